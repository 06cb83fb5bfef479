#!/usr/bin/env python3
"""Draws ddprun-train's metrics (--metrics / trainer_config.metrics_path: JSON lines) as a
picture: train loss (the step lines) and eval loss (the epoch summaries) against the job's step,
and tokens/s against the same steps. Each file is its own line (pass one file per rank or per run
to compare them); a step that was trained again after a restart is drawn at its last value.

usage: plot_metrics.py METRICS.jsonl [MORE.jsonl ...] -o curves.png [--series-out SERIES.json]
  --series-out  also writes what was drawn, read back from the figure's own lines: a JSON object
                {"<panel>/<label>": {"x": [...], "y": [...]}}, for checks without pixels.
Uses matplotlib (in the project's .venv: scripts/install-deps.sh); no display needed."""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_series(path):
    """(train loss, eval loss, tokens/s) as {job step: value} each, the last record winning."""
    train, evaluation, speed = {}, {}, {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                kind = record["kind"]
                if kind not in ("step", "epoch"):
                    continue
                base = (int(record["epoch"]) - 1) * int(record["iters_in_epoch"])
                step = base + int(record["iter"])
            except (ValueError, KeyError, TypeError) as error:
                sys.exit(f"plot_metrics: {path} line {number}: not a ddprun-train metrics "
                         f"record ({error})")
            if kind == "step":
                train[step] = float(record["train_loss"])
                speed[step] = float(record["tokens_per_second"])
            elif record.get("eval_loss") is not None:
                evaluation[step] = float(record["eval_loss"])
    if not train and not evaluation:
        sys.exit(f"plot_metrics: {path} has no step or epoch records")
    return train, evaluation, speed


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("metrics", nargs="+")
    p.add_argument("-o", "--output", required=True, help="the picture (PNG)")
    p.add_argument("--series-out", help="also write the drawn series as JSON")
    args = p.parse_args()
    figure, (loss_axes, speed_axes) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    several = len(args.metrics) > 1
    for path in args.metrics:
        name = os.path.basename(path)
        train, evaluation, speed = read_series(path)
        suffix = f" ({name})" if several else ""
        for axes, series, label, style in ((loss_axes, train, "train loss", "-"),
                                           (loss_axes, evaluation, "eval loss", "o--"),
                                           (speed_axes, speed, "tokens/s", "-")):
            if series:
                xs = sorted(series)
                axes.plot(xs, [series[x] for x in xs], style, label=label + suffix)
    loss_axes.set_ylabel("loss")
    loss_axes.legend()
    loss_axes.grid(alpha=0.3)
    speed_axes.set_ylabel("tokens/s (all ranks)")
    speed_axes.set_xlabel("step")
    speed_axes.grid(alpha=0.3)
    loss_axes.set_title("ddprun-train: " + ", ".join(os.path.basename(m) for m in args.metrics))
    figure.tight_layout()
    figure.savefig(args.output, dpi=100)
    if args.series_out:
        drawn = {}
        for panel, axes in (("loss", loss_axes), ("speed", speed_axes)):
            for line in axes.get_lines():
                drawn[f"{panel}/{line.get_label()}"] = {
                    "x": [float(x) for x in line.get_xdata()],
                    "y": [float(y) for y in line.get_ydata()]}
        with open(args.series_out, "w", encoding="utf-8") as f:
            json.dump(drawn, f)
    print(f"plot_metrics: wrote {args.output}")


if __name__ == "__main__":
    main()
