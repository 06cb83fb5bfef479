#!/usr/bin/python3
"""ddprun vs torchrun (the project venv's, PyTorch 2.13) with TORCHELASTIC_ENABLE_FILE_TIMER=1:
how fast a hang inside a file-timer scope (PyTorch's own FileTimerClient, expires(after=1)) is
acted on. One node, 2 workers, --max_restarts 1; local rank 1 hangs in its first attempt.

Measures, each from the scope's expiry (entering it + 1 s):
- hung worker killed: the hung worker's exit, seen by this script on a pidfd;
- all workers restarted: the latest replacement worker's first timestamp (taken before it
  imports anything heavy). ddprun restarts the group itself. torchrun 2.13's timer server
  SIGKILLs its own agent after the worker (no in-agent restart), so for torchrun this script
  relaunches torchrun at once when it dies, as a retry wrapper would; its orphaned workers
  (torchrun starts them in sessions of their own, without a parent-death signal) are killed
  by pid afterwards.

Prints a table of medians [min-max] and the ratio torchrun/ddprun. Standard library only."""
import argparse
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

p = argparse.ArgumentParser()
p.add_argument("--ddprun", required=True)
p.add_argument("--torchrun", required=True)
p.add_argument("--repeats", type=int, default=5)
args = p.parse_args()

PYTHON = os.path.join(os.path.dirname(args.torchrun), "python")
ENV = dict(os.environ, OMP_NUM_THREADS="1", TORCHELASTIC_ENABLE_FILE_TIMER="1",
           PYTHON_EXEC=PYTHON)
ENV.pop("TORCHELASTIC_TIMER_FILE", None)
LIMIT_S = 120
SCOPE_S = 1.0

WORKER = r'''import os, sys, time
t0 = time.time()
d, lr = os.environ["BENCH_DIR"], os.environ["LOCAL_RANK"]
if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0" or os.environ.get("BENCH_RELAUNCH"):
    open(f"{d}/start-{lr}", "w").write(repr(t0))
    sys.exit(0)
open(f"{d}/pid-{lr}.tmp", "w").write(str(os.getpid()))
os.rename(f"{d}/pid-{lr}.tmp", f"{d}/pid-{lr}")
if lr != "1":
    time.sleep(60)
    sys.exit(0)
from torch.distributed.elastic.timer import FileTimerClient, configure, expires
configure(FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
with expires(after=%s):
    open(f"{d}/enter", "w").write(repr(time.time()))
    time.sleep(600)
''' % SCOPE_S


class Failed(Exception):
    pass


def launch(which, d, relaunch=False):
    cmd = ([args.ddprun] if which == "ddprun" else [args.torchrun]) + [
        "--standalone", "--nproc_per_node", "2", "--max_restarts", "1", f"{d}/worker.py"]
    env = dict(ENV, BENCH_DIR=d)
    if relaunch:
        env["BENCH_RELAUNCH"] = "1"
    err = open(f"{d}/{which}{'-relaunch' if relaunch else ''}.stderr", "wb")
    try:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    finally:
        err.close()


def wait_for_file(path, deadline):
    while not os.path.exists(path):
        if time.time() > deadline:
            raise Failed(f"no {os.path.basename(path)} within {LIMIT_S} s")
        time.sleep(0.002)
    return open(path).read()


def kill_pid(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def one_run(which):
    with tempfile.TemporaryDirectory(prefix="bench-watchdog-") as d:
        open(f"{d}/worker.py", "w").write(WORKER)
        deadline = time.time() + LIMIT_S
        procs = [launch(which, d)]
        pids = []
        try:
            hung = int(wait_for_file(f"{d}/pid-1", deadline))
            pids.append(hung)
            pidfd = os.pidfd_open(hung)
            entered = float(wait_for_file(f"{d}/enter", deadline))
            ready, _, _ = select.select([pidfd], [], [], max(0.0, deadline - time.time()))
            killed = time.time()
            os.close(pidfd)
            if not ready:
                raise Failed("the hung worker was not killed")
            pids.append(int(wait_for_file(f"{d}/pid-0", deadline)))
            if which == "torchrun":
                # Its timer server SIGKILLs the agent itself: relaunch, as a retry wrapper would.
                rc = procs[0].wait(timeout=max(0.0, deadline - time.time()))
                procs.append(launch(which, d, relaunch=True))
            rc = procs[-1].wait(timeout=max(0.0, deadline - time.time()))
            if rc != 0:
                raise Failed(f"{which} exited {rc} (stderr in {d})")
            starts = [float(wait_for_file(f"{d}/start-{r}", deadline)) for r in (0, 1)]
            expiry = entered + SCOPE_S
            return killed - expiry, max(starts) - expiry
        except subprocess.TimeoutExpired:
            raise Failed(f"{which}: no exit within {LIMIT_S} s")
        finally:
            for proc in procs:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
            for pid in pids:
                kill_pid(pid)


def cell(values):
    med = statistics.median(values)
    return f"{med:.3f} [{min(values):.3f}-{max(values):.3f}]"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    version = subprocess.run([PYTHON, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    print(f"watchdog bench: {args.ddprun} vs {args.torchrun} (torch {version or '?'}), "
          f"TORCHELASTIC_ENABLE_FILE_TIMER=1, expires(after={SCOPE_S:g}); {os.cpu_count()} "
          f"CPUs; load average at start {loadavg()}", flush=True)
    # Alternating run by run, so a changing load hits both alike.
    results = {"ddprun": [], "torchrun": []}
    for _ in range(args.repeats):
        for which in ("ddprun", "torchrun"):
            try:
                results[which].append(one_run(which))
            except Failed as error:
                print(f"  FAILED {which}: {error}", file=sys.stderr, flush=True)
                sys.exit(1)
    rows = [("expiry -> hung worker killed (s)", 0), ("expiry -> all workers restarted (s)", 1)]
    print(f"\n{'measure (median [min-max])':<40} {'ddprun':>24} {'torchrun':>24} {'ratio':>8}")
    for name, i in rows:
        ours = [v[i] for v in results["ddprun"]]
        ref = [v[i] for v in results["torchrun"]]
        ratio = statistics.median(ref) / statistics.median(ours) if statistics.median(ours) > 0 \
            else float("nan")
        print(f"{name:<40} {cell(ours):>24} {cell(ref):>24} {ratio:>7.1f}x")
    print(f"runs: {args.repeats} each; ratio = torchrun / ddprun (higher is better for ddprun); "
          f"torchrun's restart is a relaunch by this script (its agent SIGKILLs itself)")
    print(f"load average at end {loadavg()}")


if __name__ == "__main__":
    main()
