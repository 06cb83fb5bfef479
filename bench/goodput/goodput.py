"""Driver of bench/goodput/run.sh: what losing a node costs, launcher and snapshots side by side.

Each configuration trains the same model on the same data as a 2-node job on loopback addresses
(node A on 127.0.0.1 hosts the c10d store, node B on 127.0.0.2; one worker each). It runs once
without failures, then (per repeat) with node B lost at seeded times: its agent and workers are
SIGKILLed together (frozen first, so that none reacts), and a replacement agent starts 1 s later,
as a Slurm requeue or a spare would. Node A is never the one lost: torchrun's store dies with the
agent that hosts it, and this benchmark compares recovery, not that.

Per configuration, medians over the repeats:
  goodput      failure-free wall time / wall time with failures
  recomputed   steps done before a kill and done again after it (per failure)
  downtime     the last step before the kill to the first step after it (per failure), and the
               part of it after the replacement started
  stall        what a snapshot costs the step, per step (ddprun-train: the copy to host memory;
               the reference: its torch.save)
"""
import argparse
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from proc_tree import descendants  # noqa: E402
STEP = re.compile(r"epoch (\d+)/(\d+) \| iter (\d+)/(\d+)")
DDPRUN_STALL = re.compile(r"the step paid ([0-9.]+) s for the copy")
REFERENCE_STALL = re.compile(r"snapshot: saved in ([0-9.]+) s")


class Node:
    """One node: its launcher as a process (and its workers under it), each output line stamped."""

    def __init__(self, name, command, workdir, lines):
        self.name = name
        self.process = subprocess.Popen(command, cwd=workdir, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, errors="replace",
                                        env=dict(os.environ, OMP_NUM_THREADS="1"))
        self.reader = threading.Thread(target=self._read, args=(lines,), daemon=True)
        self.reader.start()

    def _read(self, lines):
        for line in self.process.stdout:
            lines.append((time.monotonic(), self.name, line.rstrip("\n")))

    def lose(self):
        """SIGKILLs the launcher and every process under it, frozen first."""
        tree = descendants(self.process.pid) + [self.process.pid]
        for pid in tree:
            try_signal(pid, signal.SIGSTOP)
        for pid in tree:
            try_signal(pid, signal.SIGKILL)
        self.process.wait()

    def wait(self, timeout):
        code = self.process.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return code


def try_signal(pid, signo):
    try:
        os.kill(pid, signo)
    except ProcessLookupError:
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, deadline):
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    sys.exit(f"bench/goodput: nothing listens on 127.0.0.1:{port}")


def commands(config, args, port, address):
    """The launcher command of one node for a configuration."""
    shape = [args.data, str(args.block), str(args.n_layer), str(args.n_head), str(args.n_embd),
             str(args.batch), str(args.steps), str(args.epochs)]
    # Both agents could host a loopback endpoint (the first bind wins): node A hosts, pinned.
    host = "1" if address == "127.0.0.1" else "0"
    nodes = ["--nnodes", config.get("nnodes", "2"), "--nproc_per_node", "1", "--rdzv_backend", "c10d",
             "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", "goodput",
             "--rdzv_conf", f"is_host={host}", "--max_restarts", "100"]
    if config["launcher"] == "torchrun":
        # No --local_addr: with one, torchrun 2.13's two agents on one machine wait for each
        # other's keys forever after the rendezvous (seen here); agent_interop_test runs it so too.
        return [args.torchrun] + nodes + [os.path.join(HERE, "mingpt_trainer.py")] + shape + [
            "1", "snapshot.pt", str(args.seed)]
    nodes += ["--local_addr", address]
    if config.get("live"):
        nodes += ["--recovery", "live"]
    train = [f"data_config.path={args.data}", "data_config.truncate=1.0",
             f"data_config.block_size={args.block}", f"gpt_config.n_layer={args.n_layer}",
             f"gpt_config.n_head={args.n_head}", f"gpt_config.n_embd={args.n_embd}",
             f"trainer_config.batch_size={args.batch}", f"trainer_config.steps_per_epoch={args.steps}",
             f"trainer_config.max_epochs={args.epochs}", "trainer_config.eval_batches=1",
             "trainer_config.log_every=1", "trainer_config.sample_tokens=0",
             f"trainer_config.seed={args.seed}", "optimizer_config.learning_rate=0.003",
             f"trainer_config.save_every_steps={config['every_steps']}"]
    return [args.ddprun] + nodes + ["train"] + train


def run_job(config, args, kill_offsets):
    """Runs the job; returns its wall time, its stamped lines, and (kill, restart) times."""
    lines, kills = [], []
    with tempfile.TemporaryDirectory(prefix="ddprun-goodput-") as workdir:
        port = free_port()
        start = time.monotonic()
        node_a = Node("A", commands(config, args, port, "127.0.0.1"), workdir, lines)
        wait_listening(port, start + 60)
        node_b = Node("B", commands(config, args, port, "127.0.0.2"), workdir, lines)
        for offset in kill_offsets:
            # Offsets count from the first step, so that start-up is not where the kills land.
            while not any(STEP.search(text) for _, _, text in lines):
                if node_a.process.poll() is not None:
                    break
                time.sleep(0.05)
            first_step = next((t for t, _, text in lines if STEP.search(text)), start)
            delay = first_step + offset - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if node_a.process.poll() is not None:
                break
            killed = time.monotonic()
            node_b.lose()
            time.sleep(1.0)
            restarted = time.monotonic()
            node_b = Node("B", commands(config, args, port, "127.0.0.2"), workdir, lines)
            kills.append((killed, restarted))
        codes = (node_a.wait(args.timeout), node_b.wait(args.timeout))
        wall = time.monotonic() - start
    if codes != (0, 0):
        # The job did not survive: say so in the table, keep its output for a look.
        log = os.path.join(tempfile.gettempdir(), f"goodput-failed-{len(kills)}-{config['launcher']}"
                           f"-{config['every_steps']}{'-live' if config.get('live') else ''}.log")
        with open(log, "w") as out:
            out.writelines(f"{stamp:.3f} {name}: {text}\n" for stamp, name, text in lines)
        print(f"  {config['name']}: the job ended with exit codes {codes} "
              f"({len(kills)} failure(s)); its output: {log}", flush=True)
        return None, lines, kills
    return wall, lines, kills


def steps_of(lines, per_epoch):
    out = []
    for stamp, _, text in lines:
        match = STEP.search(text)
        if match:
            out.append((stamp, (int(match[1]) - 1) * per_epoch + int(match[3])))
    return out


def per_failure(lines, kills, per_epoch):
    steps = steps_of(lines, per_epoch)
    recomputed, downtime, beyond = [], [], []
    for killed, restarted in kills:
        before = [s for s in steps if s[0] < killed]
        after = [s for s in steps if s[0] > killed]
        if not before or not after:
            continue
        recomputed.append(before[-1][1] - (after[0][1] - 1))
        downtime.append(after[0][0] - before[-1][0])
        beyond.append(after[0][0] - restarted)
    return recomputed, downtime, beyond


def stall_per_step(lines, per_epoch):
    stalls = []
    for _, _, text in lines:
        match = DDPRUN_STALL.search(text) or REFERENCE_STALL.search(text)
        if match:
            stalls.append(float(match[1]))
    steps = len(steps_of(lines, per_epoch))
    return sum(stalls) / steps if steps else 0.0


def median(values):
    return statistics.median(values) if values else float("nan")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ddprun", required=True)
    p.add_argument("--torchrun", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--short", action="store_true", help="development: 1 failure, 1 repeat")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--failures", type=int, default=3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--n-layer", dest="n_layer", type=int, default=4)
    p.add_argument("--n-head", dest="n_head", type=int, default=4)
    p.add_argument("--n-embd", dest="n_embd", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=500, help="steps per epoch (about a minute here)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=1800)
    args = p.parse_args()
    if args.short:
        args.failures, args.repeats, args.steps = 1, 1, 100
    configs = [
        {"name": "torchrun 2.13 + minGPT-ddp trainer, epoch snapshots", "launcher": "torchrun",
         "every_steps": 0},
        {"name": "ddprun + ddprun-train, epoch snapshots", "launcher": "ddprun", "every_steps": 0},
        {"name": "ddprun + ddprun-train, snapshots every 10 steps", "launcher": "ddprun",
         "every_steps": 10},
        # Live recovery (--recovery live), with the same snapshots: the survivor keeps its worker.
        # With --nnodes 2 it waits for the replacement with the state in memory; with 1:2 it
        # goes on alone and the replacement joins a running job.
        {"name": "ddprun, --recovery live, 2 nodes", "launcher": "ddprun", "every_steps": 10,
         "live": True},
        {"name": "ddprun, --recovery live, 1:2 nodes", "launcher": "ddprun", "every_steps": 10,
         "live": True, "nnodes": "1:2"},
    ]
    print(f"bench/goodput: 2 nodes x 1 worker, {args.epochs} epochs of {args.steps} steps "
          f"(n_layer {args.n_layer}, n_embd {args.n_embd}, block {args.block}, batch "
          f"{args.batch}); {args.failures} failure(s) per run, {args.repeats} repeat(s), "
          f"seed {args.seed}", flush=True)
    rows = [measure(config, args) for config in configs]
    print_table(rows)


def measure(config, args):
    """One configuration: its failure-free run, then the repeats with failures."""
    clean_wall, clean_lines, _ = run_job(config, args, [])
    if clean_wall is None:
        return {"name": config["name"], "failed": f"{1}/{1} failure-free"}
    clean_steps = steps_of(clean_lines, args.steps)
    training = clean_steps[-1][0] - clean_steps[0][0] if clean_steps else clean_wall
    row = {"name": config["name"], "clean": clean_wall, "goodput": [], "recomputed": [],
           "downtime": [], "beyond": [], "failed": 0,
           "stall": stall_per_step(clean_lines, args.steps),
           "step": median([b[0] - a[0] for a, b in zip(clean_steps, clean_steps[1:])])}
    for repeat in range(args.repeats):
        rng = random.Random(args.seed * 1000 + repeat)
        # Seeded, within the failure-free training time, at least 10 s apart.
        offsets = sorted(rng.uniform(0.1, 0.9) * training for _ in range(args.failures))
        for i in range(1, len(offsets)):
            offsets[i] = max(offsets[i], offsets[i - 1] + 10.0)
        wall, lines, kills = run_job(config, args, offsets)
        if wall is None:
            row["failed"] += 1  # a job that never finishes has no goodput: 0
            row["goodput"].append(0.0)
            continue
        row["goodput"].append(clean_wall / wall)
        recomputed, downtime, beyond = per_failure(lines, kills, args.steps)
        row["recomputed"] += recomputed
        row["downtime"] += downtime
        row["beyond"] += beyond
    print(f"  {config['name']}: failure-free {clean_wall:.1f} s, goodput "
          f"{median(row['goodput']):.3f}", flush=True)
    return row


def print_table(rows):
    print()
    print(f"{'configuration':<52} {'clean s':>8} {'goodput':>8} {'recomp.':>8} "
          f"{'down s':>7} {'>repl s':>8} {'stall ms':>9} {'stall %':>8}  failed")
    for row in rows:
        if isinstance(row["failed"], str):
            print(f"{row['name']:<52} did not finish ({row['failed']})")
            continue
        share = 100.0 * row["stall"] / row["step"] if row["step"] > 0 else float("nan")
        print(f"{row['name']:<52} {row['clean']:>8.1f} {median(row['goodput']):>8.3f} "
              f"{median(row['recomputed']):>8.1f} {median(row['downtime']):>7.2f} "
              f"{median(row['beyond']):>8.2f} {1000 * row['stall']:>9.2f} {share:>7.2f}%  "
              f"{row['failed']}/{len(row['goodput'])}")
    reference = rows[0]
    if isinstance(reference["failed"], str) or median(reference["goodput"]) == 0:
        print("\nthe reference did not finish with failures: no goodput ratio")
    else:
        base = median(reference["goodput"])
        print(f"\ngoodput ratios to the reference ({base:.3f}): " + ", ".join(
            f"{row['name'].split(',')[-1].strip()} {median(row['goodput']) / base:.2f}x"
            for row in rows[1:] if not isinstance(row["failed"], str)))
    print("recomp.: steps recomputed per failure; down s: last step before the kill to the "
          "first after; >repl s: of which after the replacement started; stall: what snapshots "
          "cost the failure-free run per step, and as a share of its median step; failed: runs "
          "with failures that did not finish (goodput 0)")


if __name__ == "__main__":
    main()
