#!/usr/bin/python3
"""ddprun vs torchrun (the project venv's, PyTorch 2.13, its default --monitor-interval of 0.1 s):
launch to exit, restart latency, rendezvous of N agents, agent peak RSS. Prints one table of
medians with the spread [min-max] and the ratio torchrun/ddprun.

Robust by design, because the agent changes under it: every launch runs in its own process
group with a time limit (killed as a group when it overruns), a failed measurement prints
FAILED with the reason and the rest of the table still runs, and the launcher's stderr of a
failed run is kept in the log folder printed at the end. Standard library only."""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

p = argparse.ArgumentParser()
p.add_argument("--ddprun", required=True)
p.add_argument("--torchrun", required=True)
p.add_argument("--repeats", type=int, default=5, help="runs of each single-node measure")
p.add_argument("--rdzv-repeats", type=int, default=3, help="runs of each rendezvous size")
p.add_argument("--ref-agents", default="8,32", help="rendezvous sizes measured for both")
p.add_argument("--ddprun-agents", default="8,32,256",
               help="rendezvous sizes measured for ddprun (those also in --ref-agents for both)")
p.add_argument("--only", default="launch,rss,restart,rendezvous",
               help="which measures to run")
p.add_argument("--log-dir", default=None, help="where failed runs' stderr goes")
args = p.parse_args()

ENV = dict(os.environ, OMP_NUM_THREADS="1")
# Time limits: generous for a loaded machine, small enough that a hung agent is noticed.
SINGLE_NODE_LIMIT_S = 180
RENDEZVOUS_LIMIT_S = 900
RSS_POLL_S = 0.002
LOG_DIR = args.log_dir or tempfile.mkdtemp(prefix="bench-agent-")
os.makedirs(LOG_DIR, exist_ok=True)


class Failed(Exception):
    """A measurement that could not be taken; the message says why."""


def launcher(which):
    # torchrun at its defaults (monitor interval 0.1 s in 2.13); .venv's torchrun is a script
    # whose shebang names the venv's python.
    return [args.ddprun] if which == "ddprun" else [args.torchrun]


def free_port(addr="127.0.0.1"):
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def log_path(label):
    return os.path.join(LOG_DIR, label.replace(" ", "_").replace("/", "_") + ".stderr")


def start(cmd, env, label):
    """A launcher in its own session (so the whole tree can be killed), stderr to a log."""
    err = open(log_path(label), "wb")
    try:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    finally:
        err.close()


def kill_tree(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def finish(proc, label, limit_s, started):
    """Waits for `proc` until started + limit_s; the exit code, or Failed on timeout."""
    try:
        return proc.wait(timeout=max(0.0, started + limit_s - time.perf_counter()))
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        raise Failed(f"{label}: no exit within {limit_s} s (killed; stderr: {log_path(label)})")


def check_rc(rc, label):
    if rc != 0:
        tail = open(log_path(label), errors="replace").read().strip().splitlines()[-1:]
        raise Failed(f"{label}: exit status {rc}" + (f": {tail[0][:160]}" if tail else ""))


def launch_to_exit(which, _):
    label = f"{which} launch"
    started = time.perf_counter()
    proc = start(launcher(which) + ["--standalone", "--nproc_per_node", "2", "--no_python",
                                    "/bin/true"], ENV, label)
    rc = finish(proc, label, SINGLE_NODE_LIMIT_S, started)
    elapsed = time.perf_counter() - started
    check_rc(rc, label)
    return elapsed


def agent_peak_rss_mib(which, _):
    """The agent process's own high-water mark (VmHWM), read from /proc until it exits.

    Not wait4's ru_maxrss: a child forked from this Python process counts Python's resident
    pages as its own until it execs, which would hide a small agent's figure. The workers
    sleep briefly so the agent is still there to be read after starting them."""
    label = f"{which} rss"
    started = time.perf_counter()
    proc = start(launcher(which) + ["--standalone", "--nproc_per_node", "2", "--no_python",
                                    "/bin/sleep", "0.3"], ENV, label)
    peak = 0
    while proc.poll() is None:
        if time.perf_counter() - started > SINGLE_NODE_LIMIT_S:
            kill_tree(proc)
            raise Failed(f"{label}: no exit within {SINGLE_NODE_LIMIT_S} s")
        try:
            with open(f"/proc/{proc.pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except (OSError, ValueError):
            pass  # gone, or a zombie without memory figures
        time.sleep(RSS_POLL_S)
    check_rc(proc.returncode, label)
    if peak == 0:
        raise Failed(f"{label}: exited before its memory could be read")
    return peak / 1024


def restart_latency(which, _):
    """Worker crash (its own timestamp) to the last replacement worker's start timestamp."""
    script = ('d=$BENCH_DIR; if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then '
              'if [ "$LOCAL_RANK" = 1 ]; then date +%s.%N > $d/crash; exit 1; fi; exec sleep 30; '
              'fi; date +%s.%N > $d/start-$LOCAL_RANK')
    label = f"{which} restart"
    with tempfile.TemporaryDirectory() as d:
        started = time.perf_counter()
        proc = start(launcher(which) + ["--standalone", "--nproc_per_node", "2",
                                        "--max_restarts", "1", "--no_python", "/bin/sh", "-c",
                                        script], dict(ENV, BENCH_DIR=d), label)
        check_rc(finish(proc, label, SINGLE_NODE_LIMIT_S, started), label)
        try:
            crash = float(open(f"{d}/crash").read())
            starts = [float(open(f"{d}/start-{r}").read()) for r in (0, 1)]
        except (OSError, ValueError) as error:
            raise Failed(f"{label}: a worker left no timestamp ({error})")
        return max(starts) - crash


def rendezvous(which, n):
    """N agents (one worker each) on 127.0.x.y to every worker started. Also returns, for
    ddprun, how long this script took to launch them and the time from the last launch to the
    first round_formed event (None when the events file has none)."""
    host = "127.0.0.2"
    label = f"{which} rendezvous {n}"
    with tempfile.TemporaryDirectory() as d:
        port = free_port(host)
        env = dict(ENV, BENCH_DIR=d)
        script = "date +%s.%N > $BENCH_DIR/w-$RANK"
        procs = []
        start_wall, started = time.time(), time.perf_counter()
        try:
            for i in range(n):
                addr = f"127.0.{(i + 2) // 250}.{(i + 2) % 250 + 2}" if i else host
                cmd = launcher(which) + ["--nnodes", str(n), "--nproc_per_node", "1",
                                         "--rdzv_backend", "c10d",
                                         "--rdzv_endpoint", f"{host}:{port}", "--rdzv_id",
                                         "bench"]
                if which == "ddprun":
                    cmd += ["--local_addr", addr, "--events-file", f"{d}/events-{i}"]
                else:
                    cmd += ["--rdzv_conf", f"is_host={1 if i == 0 else 0}"]
                cmd += ["--no_python", "/bin/sh", "-c", script]
                procs.append(start(cmd, env, f"{label} agent {i}"))
            spawned_wall = time.time()
            rcs = [finish(pr, f"{label} agent {i}", RENDEZVOUS_LIMIT_S, started)
                   for i, pr in enumerate(procs)]
        finally:
            for pr in procs:
                if pr.poll() is None:
                    kill_tree(pr)
        bad = [(i, rc) for i, rc in enumerate(rcs) if rc != 0]
        if bad:
            check_rc(bad[0][1], f"{label} agent {bad[0][0]}")
        try:
            stamps = [float(open(f"{d}/w-{r}").read()) for r in range(n)]
        except (OSError, ValueError) as error:
            raise Failed(f"{label}: a worker left no timestamp ({error})")
        formed = None
        if which == "ddprun":
            times = []
            for i in range(n):
                try:
                    for line in open(f"{d}/events-{i}"):
                        event = json.loads(line)
                        if event.get("event") == "round_formed" and "time" in event:
                            times.append(float(event["time"]))
                except (OSError, ValueError):
                    pass  # the events file format is the agent's; a missing figure is only "-"
            formed = min(times) - spawned_wall if times else None
        return max(stamps) - start_wall, spawned_wall - start_wall, formed


def samples(fn, which, arg, repeats):
    """`repeats` results of fn(which, arg), or the Failed message of the first failure."""
    values = []
    for _ in range(repeats):
        try:
            values.append(fn(which, arg))
        except Failed as error:
            print(f"  FAILED {error}", file=sys.stderr, flush=True)
            return str(error)
    return values


def cell(values, digits):
    if isinstance(values, str):
        return "FAILED"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    only = set(args.only.split(","))
    torch_version = subprocess.run(
        [os.path.join(os.path.dirname(args.torchrun), "python"), "-c",
         "import torch; print(torch.__version__)"], capture_output=True, text=True).stdout.strip()
    print(f"agent bench: {args.ddprun} vs {args.torchrun} (torch {torch_version or '?'}, default "
          f"--monitor-interval); {os.cpu_count()} CPUs; load average at start {loadavg()}",
          flush=True)
    rows, failures, notes = [], [], []

    def row(name, digits, fn, arg, repeats, ours_too=True, ref_too=True):
        ours = samples(fn, "ddprun", arg, repeats) if ours_too else None
        ref = samples(fn, "torchrun", arg, repeats) if ref_too else None
        rows.append((name, digits, ours, ref))
        for which, values in (("ddprun", ours), ("torchrun", ref)):
            if isinstance(values, str):
                failures.append(f"{which}: {values}")

    if "launch" in only:
        row("launch to exit, standalone 2 x /bin/true (s)", 3, launch_to_exit, None,
            args.repeats)
    if "rss" in only:
        row("agent peak RSS, VmHWM (MiB)", 1, agent_peak_rss_mib, None, args.repeats)
    if "restart" in only:
        row("restart latency, crash -> all replaced (s)", 3, restart_latency, None, args.repeats)
    if "rendezvous" in only:
        ref_ns = {int(x) for x in args.ref_agents.split(",") if x}
        ours_ns = [int(x) for x in args.ddprun_agents.split(",") if x]
        for n in sorted(set(ours_ns) | ref_ns):
            results = {}
            for which in ("ddprun", "torchrun"):
                if (which == "ddprun" and n in ours_ns) or (which == "torchrun" and n in ref_ns):
                    results[which] = samples(rendezvous, which, n, args.rdzv_repeats)
            ours = results.get("ddprun")
            rows.append((f"rendezvous of {n} agents -> all workers started (s)", 3,
                         [v[0] for v in ours] if isinstance(ours, list) else ours,
                         [v[0] for v in results["torchrun"]] if isinstance(
                             results.get("torchrun"), list) else results.get("torchrun")))
            for which, values in results.items():
                if isinstance(values, str):
                    failures.append(f"{which}: {values}")
            if isinstance(ours, list):
                spawn = statistics.median(v[1] for v in ours)
                formed = [v[2] for v in ours if v[2] is not None]
                notes.append(f"{n} agents: this script launched them in {spawn:.2f} s; last "
                             f"launch to round formed "
                             f"{statistics.median(formed):.2f} s" if formed else
                             f"{n} agents: this script launched them in {spawn:.2f} s; no "
                             f"round_formed event found")

    print(f"\n{'measure (median [min-max])':<52} {'ddprun':>24} {'torchrun':>24} {'ratio':>8}")
    for name, digits, ours, ref in rows:
        ratio = "-"
        if isinstance(ours, list) and isinstance(ref, list) and statistics.median(ours) > 0:
            ratio = f"{statistics.median(ref) / statistics.median(ours):.1f}x"
        print(f"{name:<52} {cell(ours, digits) if ours is not None else '-':>24} "
              f"{cell(ref, digits) if ref is not None else '-':>24} {ratio:>8}")
    print(f"runs: {args.repeats} per single-node measure, {args.rdzv_repeats} per rendezvous "
          f"size; ratio = torchrun / ddprun (higher is better for ddprun)")
    for note in notes:
        print(f"  {note}")
    print(f"load average at end {loadavg()}")
    if failures:
        print("FAILED measures (stderr of each run in " + LOG_DIR + "):")
        for failure in failures:
            print(f"  {failure}")
        sys.exit(1)


if __name__ == "__main__":
    main()
