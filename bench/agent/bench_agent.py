#!/usr/bin/python3
"""ddprun vs torchrun (the venv's): launch-to-exit, restart latency, N-agent rendezvous, peak RSS."""
import argparse, json, os, socket, statistics, subprocess, sys, tempfile, time

p = argparse.ArgumentParser()
p.add_argument("--ddprun", required=True)
p.add_argument("--torchrun", required=True)
p.add_argument("--repeats", type=int, default=5)
p.add_argument("--ref-agents", default="8,32")
p.add_argument("--ddprun-agents", default="8,32,256,1024")
args = p.parse_args()

ENV = dict(os.environ, OMP_NUM_THREADS="1")


def launcher(which):
    if which == "ddprun":
        return [args.ddprun]
    return [args.torchrun, "--monitor_interval", "0.1"]  # an executable: .venv's torchrun


def free_port(addr="127.0.0.1"):
    s = socket.socket()
    s.bind((addr, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_measured(cmd, env=ENV):
    """Wall time and peak RSS (KiB) of the launcher process and what it waited for."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_maxrss, proc.returncode


def launch_to_exit(which):
    times = []
    for _ in range(args.repeats):
        t, _, rc = run_measured(launcher(which) + ["--standalone", "--nproc_per_node", "2",
                                                   "--no_python", "/bin/true"])
        assert rc == 0, (which, rc)
        times.append(t)
    return statistics.median(times)


def agent_peak_rss_kib(which):
    """The agent process's own high-water mark (VmHWM), read from /proc until it exits.

    Not wait4's ru_maxrss: a child forked from this Python process counts Python's resident
    pages (about 12 MiB) as its own until it execs, which would hide a small agent's figure.
    The workers sleep briefly so the agent is still there to be read after starting them."""
    samples = []
    for _ in range(args.repeats):
        proc = subprocess.Popen(launcher(which) + ["--standalone", "--nproc_per_node", "2",
                                                   "--no_python", "/bin/sleep", "0.3"],
                                env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        peak = 0
        while proc.poll() is None:
            try:
                with open(f"/proc/{proc.pid}/status") as status:
                    for line in status:
                        if line.startswith("VmHWM:"):
                            peak = max(peak, int(line.split()[1]))
            except OSError:
                break
        assert proc.wait() == 0, which
        samples.append(peak)
    return statistics.median(samples)


def restart_latency(which):
    """Worker crash (its own timestamp) to the last replacement worker's start timestamp."""
    script = ('d=$BENCH_DIR; if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then '
              'if [ "$LOCAL_RANK" = 1 ]; then date +%s.%N > $d/crash; exit 1; fi; exec sleep 30; '
              'fi; date +%s.%N > $d/start-$LOCAL_RANK')
    samples = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as d:
            env = dict(ENV, BENCH_DIR=d)
            _, _, rc = run_measured(launcher(which) + [
                "--standalone", "--nproc_per_node", "2", "--max_restarts", "1",
                "--no_python", "/bin/sh", "-c", script], env)
            assert rc == 0, (which, rc)
            crash = float(open(f"{d}/crash").read())
            starts = [float(open(f"{d}/start-{r}").read()) for r in (0, 1)]
            samples.append(max(starts) - crash)
    return statistics.median(samples)


def rendezvous(which, n):
    """N agents (one worker each) on 127.0.x.y to every worker started."""
    with tempfile.TemporaryDirectory() as d:
        host = "127.0.0.2"
        port = free_port(host)
        env = dict(ENV, BENCH_DIR=d)
        script = "date +%s.%N > $BENCH_DIR/w-$RANK"
        procs = []
        start = time.time()
        for i in range(n):
            addr = f"127.0.{(i + 2) // 250}.{(i + 2) % 250 + 2}" if i else host
            cmd = launcher(which) + ["--nnodes", str(n), "--nproc_per_node", "1",
                                     "--rdzv_backend", "c10d",
                                     "--rdzv_endpoint", f"{host}:{port}", "--rdzv_id", "bench"]
            if which == "ddprun":
                cmd += ["--local_addr", addr, "--events-file", f"{d}/events-{i}"]
            else:
                cmd += ["--rdzv_conf", f"is_host={1 if i == 0 else 0}"]
            cmd += ["--no_python", "/bin/sh", "-c", script]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        spawned = time.time()
        rcs = [pr.wait(timeout=600) for pr in procs]
        assert all(rc == 0 for rc in rcs), (which, n, rcs[:8])
        stamps = [float(open(f"{d}/w-{r}").read()) for r in range(n)]
        formed = None
        if which == "ddprun":
            formed = min(json.loads(line)["time"] for i in range(n)
                         for line in open(f"{d}/events-{i}")
                         if json.loads(line)["event"] == "round_formed") - spawned
        return max(stamps) - start, spawned - start, formed


rows = []
rows.append(("launch-to-exit, standalone 2x /bin/true (s)", launch_to_exit("ddprun"),
             launch_to_exit("torchrun")))
rows.append(("agent peak RSS, VmHWM (MiB)", agent_peak_rss_kib("ddprun") / 1024,
             agent_peak_rss_kib("torchrun") / 1024))
rows.append(("restart latency, crash -> all replaced (s)", restart_latency("ddprun"),
             restart_latency("torchrun")))
ref_ns = {int(x) for x in args.ref_agents.split(",") if x}
spawning, closing = [], []
for n in [int(x) for x in args.ddprun_agents.split(",") if x]:
    ours, ours_spawn, formed = rendezvous("ddprun", n)
    ref = rendezvous("torchrun", n)[0] if n in ref_ns else None
    rows.append((f"rendezvous of {n} agents -> all workers started (s)", ours, ref))
    spawning.append(f"{n}: {ours_spawn:.2f} s")
    closing.append(f"{n}: {formed:.2f} s")

print(f"{'measure (median of %d; rendezvous: 1 run)' % args.repeats:<52} {'ddprun':>10} "
      f"{'torchrun':>10} {'ratio':>8}")
for name, ours, ref in rows:
    ref_text = f"{ref:10.3f}" if ref is not None else f"{'-':>10}"
    ratio = f"{ref / ours:7.1f}x" if ref is not None and ours > 0 else f"{'-':>8}"
    print(f"{name:<52} {ours:10.3f} {ref_text} {ratio}")
print("ratio = torchrun / ddprun (higher is better for ddprun)")
print("rendezvous times count from the first agent's launch; this script's own launching of")
print("the ddprun agents took " + ", ".join(spawning) + ";")
print("from the last agent's launch to the round formed (first round_formed event): " +
      ", ".join(closing))
