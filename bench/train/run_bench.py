"""Driver of bench/train/run.sh: runs both trainers, prints a table of medians and ratios."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, cwd, env_extra):
    env = dict(os.environ, OMP_NUM_THREADS="1", **env_extra)
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def ddprun_tokens(args, world, shape, workdir, precision):
    """tokens/s, and the precision ddprun-train said it ran (its start line)."""
    block, n_layer, n_head, n_embd, batch = shape
    metrics = os.path.join(workdir, f"m{world}.jsonl")
    out = run([sys.executable, args.torchrun, "--standalone", "--nproc_per_node", str(world),
         "--no_python", args.trainer, f"data_config.path={args.data}", "data_config.truncate=0.05",
         f"data_config.block_size={block}", f"gpt_config.n_layer={n_layer}",
         f"gpt_config.n_head={n_head}", f"gpt_config.n_embd={n_embd}",
         f"trainer_config.batch_size={batch}", f"trainer_config.steps_per_epoch={args.steps}",
         "trainer_config.max_epochs=1", "trainer_config.eval_batches=1",
         f"trainer_config.log_every={args.log_every}", f"trainer_config.seed={args.seed}",
         "trainer_config.snapshot_path=bench_snapshot.pt", "optimizer_config.learning_rate=0.003",
         "trainer_config.use_amp=true", f"trainer_config.precision={precision}",
         "--metrics", metrics], workdir, {})
    os.remove(os.path.join(workdir, "bench_snapshot.pt"))
    rates = [json.loads(l)["tokens_per_second"] for l in open(metrics)
             if json.loads(l)["kind"] == "step"]
    os.remove(metrics)
    ran = out.split("ddprun-train: precision ", 1)[1].split(" ", 1)[0]
    return statistics.median(rates[1:] or rates), ran


def python_tokens(args, world, shape, workdir, variant, precision):
    block, n_layer, n_head, n_embd, batch = shape
    out = run([sys.executable, args.torchrun, "--standalone", "--nproc_per_node", str(world),
               os.path.join(HERE, "python_trainer.py"), args.data, str(block), str(n_layer),
               str(n_head), str(n_embd), str(batch), str(args.steps), str(args.log_every),
               str(args.seed), "--variant", variant, "--precision", precision], workdir, {})
    return json.loads(out.strip().splitlines()[-1])["tokens_per_second"]


def snapshot_times(args, workdir):
    """ddprun-train's own save/load of a minGPT-ddp-sized snapshot vs torch.save/torch.load:
    lists of seconds, one per run."""
    common = [args.trainer, "mingpt", f"data_config.path={args.data}",
              "trainer_config.batch_size=2", "trainer_config.steps_per_epoch=1",
              "trainer_config.eval_batches=1", "--metrics", "snap.jsonl"]
    ours_save, ours_load = [], []
    for repeat in range(args.repeats):
        for f in ("gpt_snapshot.pt", "snap.jsonl"):
            if os.path.exists(os.path.join(workdir, f)):
                os.remove(os.path.join(workdir, f))
        run(common + ["trainer_config.max_epochs=1"], workdir, {})
        run(common + ["trainer_config.max_epochs=2"], workdir, {})
        lines = [json.loads(l) for l in open(os.path.join(workdir, "snap.jsonl"))]
        ours_save += [l["save_seconds"] for l in lines if l["kind"] == "snapshot"]
        ours_load += [l["load_seconds"] for l in lines if l["kind"] == "resume"]
    path = os.path.join(workdir, "gpt_snapshot.pt")
    size = os.path.getsize(path)
    ref_save, ref_load = [], []
    state = torch.load(path)
    for _ in range(args.repeats):
        t = time.perf_counter()
        torch.save(state, os.path.join(workdir, "py.pt"))
        ref_save.append(time.perf_counter() - t)
        t = time.perf_counter()
        torch.load(os.path.join(workdir, "py.pt"))
        ref_load.append(time.perf_counter() - t)
    return size, ours_save, ref_save, ours_load, ref_load


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cell(values, digits):
    """median [min-max]"""
    med = statistics.median(values)
    return f"{med:.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--trainer", required=True)
    p.add_argument("--torchrun", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--worlds", default="1,2", help="rank counts to measure")
    p.add_argument("--no-snapshot", action="store_true", help="skip the snapshot rows")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile runs")
    p.add_argument("--shape", default="64,4,4,128,16",
                   help="block,n_layer,n_head,n_embd,batch per rank")
    args = p.parse_args()
    shape = tuple(int(v) for v in args.shape.split(","))
    worlds = [int(w) for w in args.worlds.split(",") if w]
    print(f"train bench: torch {torch.__version__}; {os.cpu_count()} CPUs; load average at start "
          f"{loadavg()}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        results = {}
        precisions = set()
        for world in worlds:
            # Interleaved, so that the machine's changing load hits every trainer alike. ddprun
            # runs use_amp (precision auto: what it chooses on this machine) and fp32; PyTorch
            # runs at the precision ddprun chose, in its best eager form and compiled.
            ours, fp32, best, compiled = [], [], [], []
            for _ in range(args.repeats):
                rate, chosen = ddprun_tokens(args, world, shape, workdir, "auto")
                precisions.add(chosen)
                ours.append(rate)
                fp32.append(ddprun_tokens(args, world, shape, workdir, "fp32")[0])
                best.append(python_tokens(args, world, shape, workdir, "best", chosen))
                if not args.no_compile:
                    compiled.append(python_tokens(args, world, shape, workdir, "compiled", chosen))
            results[world] = (ours, best)
            rows.append((f"tok/s {world}r vs best eager", ours, best, 0,
                         statistics.median(ours) / statistics.median(best)))
            if compiled:
                rows.append((f"tok/s {world}r vs torch.compile", ours, compiled, 0,
                             statistics.median(ours) / statistics.median(compiled)))
            rows.append((f"tok/s {world}r use_amp vs fp32", ours, fp32, 0,
                         statistics.median(ours) / statistics.median(fp32)))
        if 1 in results and 2 in results:
            eff = [[two / (2 * one) for one, two in zip(results[1][i], results[2][i])]
                   for i in (0, 1)]
            rows.append(("2-rank scaling efficiency", eff[0], eff[1], 2,
                         statistics.median(eff[0]) / statistics.median(eff[1])))
        if not args.no_snapshot:
            size, s_ours, s_ref, l_ours, l_ref = snapshot_times(args, workdir)
            rows.append((f"snapshot save s ({size / 1e6:.0f} MB)", s_ours, s_ref, 3,
                         statistics.median(s_ours) / statistics.median(s_ref)))
            rows.append((f"snapshot load s ({size / 1e6:.0f} MB)", l_ours, l_ref, 3,
                         statistics.median(l_ours) / statistics.median(l_ref)))
    block, n_layer, n_head, n_embd, batch = shape
    print(f"model {n_layer} layers x {n_embd} wide, {n_head} heads, block {block}, batch {batch}"
          f" per rank, {args.steps} steps, 1 thread per rank; median [min-max] of {args.repeats}"
          f" runs, ddprun-train and PyTorch alternating; precision {', '.join(sorted(precisions))}"
          f" (what ddprun-train's use_amp chose here; the PyTorch runs use the same)")
    print(f"{'metric':30} {'ddprun-train':>26} {'reference':>26} {'ratio':>6}")
    for name, ours, ref, digits, ratio in rows:
        print(f"{name:30} {cell(ours, digits):>26} {cell(ref, digits):>26} {ratio:6.2f}")
    print("reference: PyTorch DDP best eager (fused AdamW, SDPA, no per-step sync), the same under")
    print("torch.compile, or ddprun-train itself in fp32. ratio = ddprun-train / reference (of the")
    print("medians): above 1 is better for tokens/s and efficiency, worse for times. tokens/s of a")
    print("run: the median of its 10-step windows after the first (compile time falls there). Efficiency: 2-rank tokens/s / (2 x 1-rank tokens/s), run by run. Snapshot")
    print("save: ddprun-train fsyncs the file and its folder, torch.save does not; snapshot load:")
    print("ddprun-train's figure includes restoring the model and the optimizer.")
    print(f"load average at end {loadavg()}")


if __name__ == "__main__":
    main()
