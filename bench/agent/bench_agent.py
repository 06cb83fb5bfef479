#!/usr/bin/python3
"""ddprun vs torchrun (the project venv's, PyTorch 2.13, its default --monitor-interval of 0.1 s):
launch to exit, restart latency, rendezvous of N agents, re-form after losing one of N agents,
agent peak RSS. Prints one table of medians with the spread [min-max] and the ratio
torchrun/ddprun. With --etcd-cluster the script starts a 3-member etcd cluster of its own and
the rendezvous measures get a third column, ddprun with --rdzv_backend etcd.

Robust by design, because the agent changes under it: every launch runs in its own process
group with a time limit (killed as a group when it overruns), a failed measurement prints
FAILED with the reason and the rest of the table still runs, and the launcher's stderr of a
failed run is kept in the log folder printed at the end. Standard library only."""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from proc_tree import descendants  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--ddprun", required=True)
p.add_argument("--torchrun", required=True)
p.add_argument("--repeats", type=int, default=5, help="runs of each single-node measure")
p.add_argument("--rdzv-repeats", type=int, default=3, help="runs of each rendezvous size")
p.add_argument("--ref-agents", default="8,32", help="rendezvous sizes measured for both")
p.add_argument("--ddprun-agents", default="8,32,256",
               help="rendezvous sizes measured for ddprun (those also in --ref-agents for both)")
p.add_argument("--reform-agents", default="8",
               help="sizes N of the re-form measure (one of N agents SIGKILLed)")
p.add_argument("--only", default="launch,rss,restart,rendezvous",
               help="which measures to run (also: reform)")
p.add_argument("--etcd-cluster", action="store_true",
               help="start a 3-member etcd cluster (etcd on PATH) on 127.0.0.1-3 and add "
                    "ddprun --rdzv_backend etcd to the rendezvous and reform measures")
p.add_argument("--variants", default="ddprun,ddprun-etcd,torchrun",
               help="launchers of the rendezvous and reform measures (ddprun-etcd needs "
                    "--etcd-cluster)")
p.add_argument("--log-dir", default=None, help="where failed runs' stderr goes")
args = p.parse_args()

ENV = dict(os.environ, OMP_NUM_THREADS="1", TORCH_CPP_LOG_LEVEL="ERROR",
           GLOO_SOCKET_IFNAME="lo")
# Time limits: generous for a loaded machine, small enough that a hung agent is noticed.
SINGLE_NODE_LIMIT_S = 180
RENDEZVOUS_LIMIT_S = 900
REFORM_WAIT_S = 120  # each wait of the re-form measure: first world started, re-formed world
FILE_POLL_S = 0.05
ETCD_HEALTHY_S = 60
# Identical for all three variants of the re-form measure.
REFORM_CONF = "keep_alive_interval=1,keep_alive_max_attempt=2,last_call_timeout=1"
VARIANTS = ("ddprun", "ddprun-etcd", "torchrun")
ETCD_ENDPOINTS = None  # "127.0.0.1:C1,127.0.0.2:C2,127.0.0.3:C3" while the cluster runs
RSS_POLL_S = 0.002
LOG_DIR = args.log_dir or tempfile.mkdtemp(prefix="bench-agent-")
os.makedirs(LOG_DIR, exist_ok=True)


class Failed(Exception):
    """A measurement that could not be taken; the message says why."""


def launcher(which):
    # torchrun at its defaults (monitor interval 0.1 s in 2.13); .venv's torchrun is a script
    # whose shebang names the venv's python.
    return [args.torchrun] if which == "torchrun" else [args.ddprun]


def rdzv_flags(which, host, port, run_id, is_host, conf=()):
    """The rendezvous flags of one agent: c10d on host:port (torchrun: is_host on the first
    agent only), or etcd on the script's cluster with the run's own id (the cluster outlives
    runs, and with it their rendezvous keys)."""
    conf = list(conf)
    if which == "ddprun-etcd":
        flags = ["--rdzv_backend", "etcd", "--rdzv_endpoint", ETCD_ENDPOINTS,
                 "--rdzv_id", run_id]
    else:
        flags = ["--rdzv_backend", "c10d", "--rdzv_endpoint", f"{host}:{port}",
                 "--rdzv_id", "bench"]
        if which == "torchrun":
            conf.append(f"is_host={1 if is_host else 0}")
    return flags + (["--rdzv_conf", ",".join(conf)] if conf else [])


def agent_addr(i, host):
    """Agent i's loopback address: the c10d host for agent 0, then 127.0.x.y."""
    return f"127.0.{(i + 2) // 250}.{(i + 2) % 250 + 2}" if i else host


class EtcdCluster:
    """Three etcd members on 127.0.0.1-3, free ports, a temporary data folder; stopped by PID
    (SIGTERM, then SIGKILL) on exit, also when starting failed."""

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="bench-etcd-")
        self.procs = []
        try:
            hosts = [f"127.0.0.{i}" for i in (1, 2, 3)]
            client = [free_port(h) for h in hosts]
            peer = [free_port(h) for h in hosts]
            cluster = ",".join(f"m{i + 1}=http://{h}:{peer[i]}" for i, h in enumerate(hosts))
            for i, h in enumerate(hosts):
                cmd = ["etcd", "--name", f"m{i + 1}", "--data-dir", f"{self.dir}/m{i + 1}",
                       "--listen-client-urls", f"http://{h}:{client[i]}",
                       "--advertise-client-urls", f"http://{h}:{client[i]}",
                       "--listen-peer-urls", f"http://{h}:{peer[i]}",
                       "--initial-advertise-peer-urls", f"http://{h}:{peer[i]}",
                       "--initial-cluster", cluster, "--initial-cluster-state", "new"]
                self.procs.append(start(cmd, dict(os.environ), f"etcd m{i + 1}"))
            self.endpoints = [f"{h}:{client[i]}" for i, h in enumerate(hosts)]
            for endpoint in self.endpoints:
                self._wait_healthy(endpoint)
            return ",".join(self.endpoints)
        except BaseException:
            self.__exit__()
            raise

    def _wait_healthy(self, endpoint):
        # No proxy: a proxy named in the environment must not see (or answer) these requests.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + ETCD_HEALTHY_S
        while True:
            try:
                with opener.open(f"http://{endpoint}/health", timeout=2) as reply:
                    if json.load(reply).get("health") == "true":
                        return
            except (OSError, ValueError):
                pass
            if any(pr.poll() is not None for pr in self.procs):
                raise Failed(f"etcd: a member exited (logs: {LOG_DIR}/etcd_m*.stderr)")
            if time.monotonic() > deadline:
                raise Failed(f"etcd: member {endpoint} not healthy after {ETCD_HEALTHY_S} s")
            time.sleep(0.2)

    def __exit__(self, *_):
        for pr in self.procs:
            if pr.poll() is None:
                pr.terminate()
        for pr in self.procs:
            try:
                pr.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pr.kill()
                pr.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


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


def pids_with_env(key, value):
    """Every process of ours whose environment holds key=value: a run's agents and all their
    workers, also those torchrun left behind (it starts workers in sessions of their own, so
    SIGKILLing its agent's group orphans them)."""
    needle = f"{key}={value}".encode()
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        found.append(int(pid))
            except OSError:
                pass  # gone, or not ours
    return found


def sigkill(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


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
        port, run_id = free_port(host), f"bench-{uuid.uuid4().hex}"
        env = dict(ENV, BENCH_DIR=d)
        script = "date +%s.%N > $BENCH_DIR/w-$RANK"
        procs = []
        start_wall, started = time.time(), time.perf_counter()
        try:
            for i in range(n):
                cmd = launcher(which) + ["--nnodes", str(n), "--nproc_per_node", "1"]
                cmd += rdzv_flags(which, host, port, run_id, i == 0)
                if which != "torchrun":
                    cmd += ["--local_addr", agent_addr(i, host), "--events-file",
                            f"{d}/events-{i}"]
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
        if which != "torchrun":
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


# A real training step's view of a lost peer: Gloo's all-reduce fails when a peer's sockets
# close. The start stamp is taken after init_process_group (the whole world has connected) and
# renamed into place, so a reader never sees a partial file; the pid keeps names unique when a
# restart count repeats (torchrun does not count a re-form for a membership change).
REFORM_WORKER = """
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
stamp = repr(time.time())
d, pid = os.environ["BENCH_DIR"], os.getpid()
with open(f"{d}/.tmp-{pid}", "w") as f:
    f.write(stamp)
os.rename(f"{d}/.tmp-{pid}",
          f"{d}/w-{os.environ['TORCHELASTIC_RESTART_COUNT']}-{os.environ['RANK']}-{pid}")
while True:
    dist.all_reduce(torch.ones(1))
    time.sleep(0.05)
"""


def worker_stamps(d):
    """{file name: (rank, start time)} of the worker files in d written so far."""
    out = {}
    for name in os.listdir(d):
        if name.startswith("w-"):
            try:
                out[name] = (int(name.split("-")[2]), float(open(f"{d}/{name}").read()))
            except (OSError, ValueError, IndexError):
                pass
    return out


def wait_for_ranks(d, ranks, ignore, deadline, agents, label, what):
    """Polls d until a worker of every rank in `ranks` has written a file not in `ignore`;
    {rank: earliest such start time}. Failed at the deadline or when every agent has exited."""
    while True:
        first = {}
        for name, (rank, stamp) in worker_stamps(d).items():
            if name not in ignore and rank in ranks:
                first[rank] = min(stamp, first.get(rank, stamp))
        if len(first) == len(ranks):
            return first
        if time.monotonic() > deadline:
            raise Failed(f"{label}: {what}: ranks {sorted(set(ranks) - set(first))} not started "
                         f"within {REFORM_WAIT_S} s (stderr: {log_path(label + ' agent 0')})")
        if all(pr.poll() is not None for pr in agents):
            raise Failed(f"{label}: {what}: every agent exited (stderr: "
                         f"{log_path(label + ' agent 0')})")
        time.sleep(FILE_POLL_S)


def rank0_agent(d, n):
    """The agent whose worker has RANK 0 in the latest round its events file records (one
    worker per agent: group_rank is the worker's rank), or None."""
    for i in range(n):
        rank = None
        try:
            for line in open(f"{d}/events-{i}"):
                event = json.loads(line)
                if event.get("event") == "round_formed" and "group_rank" in event:
                    rank = int(event["group_rank"])
        except (OSError, ValueError):
            continue
        if rank == 0:
            return i
    return None


def reform(which, n):
    """N agents with --nnodes N-1:N and one Gloo worker each; once all N workers run, one agent
    and its worker are SIGKILLed at once (a lost node). Seconds from the kill to the last of the
    N-1 ranks of the re-formed world started (each rank's first worker started after the kill).
    Returns (seconds, index of the agent killed)."""
    host = "127.0.0.2"
    label = f"{which} reform {n}"
    python = os.path.join(os.path.dirname(args.torchrun), "python")
    with tempfile.TemporaryDirectory() as d:
        port, run_id = free_port(host), f"bench-{uuid.uuid4().hex}"
        # LOGLEVEL=INFO: torchrun's rendezvous and restart decisions in its stderr log.
        env = dict(ENV, BENCH_DIR=d, LOGLEVEL="INFO")
        if which == "torchrun":
            # At its default (workers share the agents' rendezvous store) torchrun 2.13 did not
            # re-form in 3 of 3 tries: the re-formed workers' Gloo read peer addresses of an
            # earlier attempt (the store prefix is the restart count, which a re-form can
            # repeat) and failed with "Connection refused" until the restarts ran out. With a
            # store of their own per round (hosted by rank 0's worker) it re-forms.
            env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
        procs = []
        try:
            for i in range(n):
                cmd = launcher(which) + ["--nnodes", f"{n - 1}:{n}", "--nproc_per_node", "1",
                                         "--max_restarts", "3"]
                cmd += rdzv_flags(which, host, port, run_id, i == 0, [REFORM_CONF])
                if which != "torchrun":
                    cmd += ["--local_addr", agent_addr(i, host), "--events-file",
                            f"{d}/events-{i}"]
                cmd += ["--no_python", python, "-c", REFORM_WORKER]
                procs.append(start(cmd, env, f"{label} agent {i}"))
            wait_for_ranks(d, range(n), set(), time.monotonic() + REFORM_WAIT_S, procs, label,
                           f"first world of {n}")
            # c10d: never the agent hosting the store (agent 0); etcd has no such agent, so the
            # one whose worker is rank 0, the hardest loss for c10d.
            victim = rank0_agent(d, n) if which == "ddprun-etcd" else None
            victim = n - 1 if victim is None else victim
            before = set(worker_stamps(d))
            doomed = descendants(procs[victim].pid)
            killed = time.time()
            os.killpg(procs[victim].pid, signal.SIGKILL)
            sigkill(doomed)  # torchrun's workers run in sessions of their own
            survivors = [pr for i, pr in enumerate(procs) if i != victim]
            first = wait_for_ranks(d, range(n - 1), before, time.monotonic() + REFORM_WAIT_S,
                                   survivors, label, f"re-formed world of {n - 1}")
            return max(first.values()) - killed, victim
        finally:
            for pr in procs:
                if pr.poll() is None:
                    kill_tree(pr)
            sigkill(pids_with_env("BENCH_DIR", d))  # orphaned workers


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
    # rows: (measure, digits, {variant: list of values, or the Failed message}); a variant
    # missing from the dict was not measured ("-").
    rows, failures, notes = [], [], []

    def record(name, digits, results):
        rows.append((name, digits, results))
        for which, values in results.items():
            if isinstance(values, str):
                failures.append(f"{which}: {values}")

    def row(name, digits, fn, arg, repeats):
        record(name, digits, {which: samples(fn, which, arg, repeats)
                              for which in ("ddprun", "torchrun")})

    def first_of(values):
        return [v[0] for v in values] if isinstance(values, list) else values

    elastic = [w for w in VARIANTS if w in args.variants.split(",")
               and (w != "ddprun-etcd" or ETCD_ENDPOINTS)]
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
            for which in elastic:
                if (which != "torchrun" and n in ours_ns) or (which == "torchrun" and n in ref_ns):
                    results[which] = samples(rendezvous, which, n, args.rdzv_repeats)
            record(f"rendezvous of {n} agents -> all workers started (s)", 3,
                   {which: first_of(values) for which, values in results.items()})
            for which in ("ddprun", "ddprun-etcd"):
                ours = results.get(which)
                if not isinstance(ours, list):
                    continue
                spawn = statistics.median(v[1] for v in ours)
                formed = [v[2] for v in ours if v[2] is not None]
                notes.append(f"{which}, {n} agents: this script launched them in {spawn:.2f} s; "
                             + (f"last launch to round formed {statistics.median(formed):.2f} s"
                                if formed else "no round_formed event found"))
    if "reform" in only:
        for n in sorted({int(x) for x in args.reform_agents.split(",") if x}):
            results = {which: samples(reform, which, n, args.rdzv_repeats) for which in elastic}
            record(f"re-form after losing 1 of {n} agents (SIGKILL) -> survivors' workers "
                   f"restarted (s)", 3, {which: first_of(v) for which, v in results.items()})
            for which, values in results.items():
                if isinstance(values, list):
                    notes.append(f"{which}, re-form of {n}: agent(s) killed "
                                 f"{sorted({v[1] for v in values})}")
            if "torchrun" in results:
                notes.append("torchrun re-form: TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (at its "
                             "default it did not re-form: stale Gloo peer addresses)")

    columns = [w for w in VARIANTS if any(w in r[2] for r in rows)]
    ours_columns = [w for w in columns if w != "torchrun"]
    titles = {"ddprun": "ddprun c10d", "ddprun-etcd": "ddprun etcd", "torchrun": "torchrun c10d"}
    width = max([len("measure (median [min-max])")] + [len(r[0]) for r in rows])
    ratio_titles = [f"ref/{titles[w].replace(' ', '-')}" for w in ours_columns]
    print(f"\n{'measure (median [min-max])':<{width}} "
          + " ".join(f"{titles[w]:>24}" for w in columns) + " "
          + " ".join(f"{t:>18}" for t in ratio_titles if "torchrun" in columns))
    for name, digits, results in rows:
        cells = [cell(results[w], digits) if w in results else "-" for w in columns]
        ratios = []
        ref = results.get("torchrun")
        for w in ours_columns:
            ours = results.get(w)
            ratio = "-"
            if isinstance(ours, list) and isinstance(ref, list) and statistics.median(ours) > 0:
                ratio = f"{statistics.median(ref) / statistics.median(ours):.1f}x"
            ratios.append(ratio)
        print(f"{name:<{width}} " + " ".join(f"{c:>24}" for c in cells) + " "
              + " ".join(f"{r:>18}" for r in ratios if "torchrun" in columns))
    print(f"runs: {args.repeats} per single-node measure, {args.rdzv_repeats} per rendezvous "
          f"and re-form size; ref/X = torchrun c10d / X (higher is better for ddprun)"
          + ("; ddprun etcd: a 3-member etcd cluster on 127.0.0.1-3" if ETCD_ENDPOINTS else ""))
    for note in notes:
        print(f"  {note}")
    print(f"load average at end {loadavg()}")
    if failures:
        print("FAILED measures (stderr of each run in " + LOG_DIR + "):")
        for failure in failures:
            print(f"  {failure}")
        sys.exit(1)


def run():
    global ETCD_ENDPOINTS
    # A SIGTERM (timeout, run.sh's caller) unwinds like an error, so the finally blocks stop
    # the etcd members and the agents.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("bench/agent: terminated"))
    if not args.etcd_cluster:
        return main()
    if shutil.which("etcd") is None:
        sys.exit("bench/agent: --etcd-cluster needs etcd on PATH (Debian: etcd-server)")
    try:
        with EtcdCluster() as endpoints:
            ETCD_ENDPOINTS = endpoints
            main()
    except Failed as error:
        sys.exit(f"bench/agent: {error}")


if __name__ == "__main__":
    run()
