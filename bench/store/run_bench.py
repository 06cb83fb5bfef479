"""Driver of bench/store/run.sh: starts ddprun-store and PyTorch's TCPStore servers, runs the
load generator (store_load) against each, interleaving the servers run by run so that the
machine's changing load hits both alike, and prints tables of medians with their spread and
the ratios measured in the same run. Standard library only."""
import argparse
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# How long a server may take to print its address (importing torch is slow on a loaded box).
SERVER_START_S = 120
# How long a server may take to close the previous run's connections before the next run.
DRAIN_S = 60


class Server:
    """One server process; its first stdout line is HOST:PORT. Stopped with SIGTERM."""

    def __init__(self, name, argv, log_dir, cpus):
        self.name = name
        self.log_path = os.path.join(log_dir, f"{name}.log")
        self.log = open(self.log_path, "ab")
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log,
                                        stdin=subprocess.DEVNULL, preexec_fn=pin(cpus))
        ready, _, _ = select.select([self.process.stdout], [], [], SERVER_START_S)
        line = self.process.stdout.readline().decode().strip() if ready else ""
        if ":" not in line:
            self.stop()
            sys.exit(f"bench/store: {name} did not print its address; see {self.log_path}")
        self.port = int(line.rsplit(":", 1)[1])
        self.idle_descriptors = self.descriptors()

    @property
    def pid(self):
        return self.process.pid

    def descriptors(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def cpu_seconds(self):
        """utime + stime of the server process so far (all its threads)."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def drain(self):
        """Waits until the previous run's connections are closed on the server's side too."""
        deadline = time.monotonic() + DRAIN_S
        while self.descriptors() > self.idle_descriptors and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def pin(cpus):
    """A preexec_fn that keeps the child (and every thread it starts) on `cpus`; None: no pin."""
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def cpu_split(pin_enabled):
    """(server CPUs, generator CPUs): the first CPU this process may use for the server, the
    rest for the load generator, so that neither steals the other's core."""
    allowed = sorted(os.sched_getaffinity(0))
    if not pin_enabled or len(allowed) < 2:
        return None, None
    return {allowed[0]}, set(allowed[1:])


def load(args, mode, options):
    cmd = [args.store_load, mode] + [str(word) for pair in options.items() for word in pair]
    done = subprocess.run(cmd, capture_output=True, text=True,
                          preexec_fn=pin(args.generator_cpus))
    lines = done.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"failure": done.stderr.strip()[-300:]}
    if done.returncode != 0 and not result.get("failure"):
        result["failure"] = f"store_load exited with {done.returncode}"
    return result


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def spread(values, fmt):
    return f"[{fmt(min(values))}-{fmt(max(values))}]"


def thousands(value):
    return f"{value:,.0f}"


def one_decimal(value):
    return f"{value:.1f}"


def two_decimals(value):
    return f"{value:.2f}"


def three_decimals(value):
    return f"{value:.3f}"


def start_servers(args, log_dir):
    venv_python = args.torch_python
    argv = {
        "ddprun": [args.store, "--host", "0.0.0.0", "--port", "0", "--log-level", "error"],
        "libuv": [venv_python, os.path.join(HERE, "torch_store_server.py"), "--backend", "libuv"],
        "legacy": [venv_python, os.path.join(HERE, "torch_store_server.py"), "--backend",
                   "legacy"],
        "baseline": [args.baseline_store, "--host", "0.0.0.0", "--port", "0", "--log-level",
                     "error"],
    }
    return [Server(name, argv[name], log_dir, args.server_cpus) for name in args.servers]


def run_mix(args, servers):
    """Returns {(depth, connections): {server: [result, ...]}}."""
    results = {}
    for depth, connections in [(d, c) for d in args.depths for c in args.connections]:
        per_server = {s.name: [] for s in servers}
        for repeat in range(args.repeats):
            rotation = servers[repeat % len(servers):] + servers[:repeat % len(servers)]
            for server in rotation:
                server.drain()
                result = load(args, "mix", {
                    "--port": server.port, "--server-pid": server.pid,
                    "--connections": connections, "--depth": depth,
                    "--threads": args.threads, "--warmup-ms": args.warmup_ms,
                    "--duration-ms": args.duration_ms})
                per_server[server.name].append(result)
        results[(depth, connections)] = per_server
    return results


def run_storms(args, servers):
    results = {}
    for connections in args.storms:
        per_server = {s.name: [] for s in servers}
        for repeat in range(args.repeats):
            rotation = servers[repeat % len(servers):] + servers[:repeat % len(servers)]
            for server in rotation:
                server.drain()
                before = server.cpu_seconds()
                result = load(args, "storm", {
                    "--port": server.port, "--connections": connections,
                    "--limit-s": args.storm_limit_s,
                    "--key-prefix": f"storm/{connections}/{repeat}/"})
                # Includes closing the storm's connections, which happens after store_load
                # exits: drain first.
                server.drain()
                result["server_cpu_seconds"] = server.cpu_seconds() - before
                per_server[server.name].append(result)
        results[connections] = per_server
    return results


def mix_summary(runs):
    ok = [r for r in runs if not r.get("failure")]
    if not ok:
        return None
    rates = [r["operations"] / r["seconds"] for r in ok]
    cpu = [r["server_cpu_seconds"] * 1e6 / max(r["operations"], 1) for r in ok]
    return {
        "rate": statistics.median(rates), "rates": rates,
        "p50": statistics.median(r["p50_us"] for r in ok),
        "p99": statistics.median(r["p99_us"] for r in ok),
        "p99s": [r["p99_us"] for r in ok],
        "cpu": statistics.median(cpu), "cpus": cpu,
        "cores": statistics.median(r["server_cpu_seconds"] / r["seconds"] for r in ok),
        "generator": statistics.median(r["generator_cpu_seconds"] * 1e6 / max(r["operations"], 1)
                                       for r in ok),
        "failed_connections": sum(r["failed_connections"] for r in ok),
        "failures": [r["failure"] for r in runs if r.get("failure")],
    }


def print_mix(args, results, names):
    print(f"mix: SET+GET (written together) and ADD, a third each; depth = requests in flight "
          f"per connection;\n{args.threads} generator thread(s); {args.warmup_ms} ms warm-up, "
          f"{args.duration_ms} ms measured; median of {args.repeats} runs [min-max]")
    print(f"{'depth':>5} {'conns':>6}  {'server':<8} {'ops/s':>9} {'[min-max]':<21} {'p50 us':>8} "
          f"{'p99 us':>9} {'[min-max]':<19} {'srv us/op':>9} {'[min-max]':<11} {'srv cores':>9} "
          f"{'gen us/op':>9}")
    summaries = {}
    for (depth, connections), per_server in results.items():
        for name in names:
            s = mix_summary(per_server[name])
            summaries[(depth, connections, name)] = s
            if s is None:
                print(f"{depth:>5} {connections:>6}  {name:<8} FAILED: "
                      f"{per_server[name][0]['failure']}")
                continue
            note = ""
            if s["failures"] or s["failed_connections"]:
                note = (f"  ({len(s['failures'])} run(s) failed, "
                        f"{s['failed_connections']} connection(s) lost)")
            print(f"{depth:>5} {connections:>6}  {name:<8} {s['rate']:>9,.0f} "
                  f"{spread(s['rates'], thousands):<21} {s['p50']:>8,.0f} {s['p99']:>9,.0f} "
                  f"{spread(s['p99s'], thousands):<19} {s['cpu']:>9.2f} "
                  f"{spread(s['cpus'], two_decimals):<11} {s['cores']:>9.2f} "
                  f"{s['generator']:>9.2f}{note}")
    return summaries


def print_mix_ratios(args, summaries, names):
    others = [n for n in names if n != "ddprun"]
    if "ddprun" not in names or not others:
        return
    print(f"\nddprun vs each other server, from the medians above (ops/s: >1 ddprun faster; server "
          f"CPU/op, p50, p99: <1 ddprun lower)")
    print(f"{'depth':>5} {'conns':>6}  {'vs':<8} {'ops/s':>7} {'CPU/op':>7} {'p50':>7} {'p99':>7}")
    for depth in args.depths:
        for connections in args.connections:
            ours = summaries.get((depth, connections, "ddprun"))
            for name in others:
                ref = summaries.get((depth, connections, name))
                if ours is None or ref is None:
                    print(f"{depth:>5} {connections:>6}  {name:<8} -")
                    continue
                print(f"{depth:>5} {connections:>6}  {name:<8} {ours['rate'] / ref['rate']:>6.2f}x "
                      f"{ours['cpu'] / ref['cpu']:>7.2f} {ours['p50'] / ref['p50']:>7.2f} "
                      f"{ours['p99'] / ref['p99']:>7.2f}")
    if "libuv" not in names:
        return
    for depth in args.depths:
        ours = summaries.get((depth, 256, "ddprun"))
        ref = summaries.get((depth, 256, "libuv"))
        if ours and ref:
            cpu_ratio, p99_ratio = ours["cpu"] / ref["cpu"], ours["p99"] / ref["p99"]
            met = cpu_ratio <= 0.5 and p99_ratio < 1
            print(f"goal at 256 connections, depth {depth} (server CPU/op at most half of "
                  f"libuv's, lower p99): {'met' if met else 'NOT met'} (CPU/op {cpu_ratio:.2f}, "
                  f"p99 {p99_ratio:.2f})")


def print_storms(args, results, names):
    print(f"\nconnection storms: N connections opened at once; each VALIDATE+PING, ADD, then WAIT "
          f"on a key the last ADDer sets;\nseconds from the first connect() until every PING was "
          f"answered / every WAIT returned; median of {args.repeats} runs [min-max]")
    print(f"{'N':>7}  {'server':<8} {'connected s':>11} {'[min-max]':<15} {'woken s':>8} "
          f"{'[min-max]':<15} {'srv CPU s':>9} {'retries':>7}  {'woken: ref/ddprun':>17}")
    for connections, per_server in results.items():
        woken = {}
        for name in names:
            runs = per_server[name]
            ok = [r for r in runs if r.get("complete")]
            failed = [r["failure"] for r in runs if not r.get("complete")]
            if not ok:
                print(f"{connections:>7,}  {name:<8} FAILED: {failed[0]}")
                continue
            conn = [r["connected_seconds"] for r in ok]
            wok = [r["woken_seconds"] for r in ok]
            woken[name] = statistics.median(wok)
            ratio = ""
            if name != "ddprun" and "ddprun" in woken:
                ratio = f"{woken[name] / woken['ddprun']:.2f}x"
            note = f"  ({len(failed)} of {len(runs)} failed: {failed[0]})" if failed else ""
            print(f"{connections:>7,}  {name:<8} {statistics.median(conn):>11.3f} "
                  f"{spread(conn, three_decimals):<15} {woken[name]:>8.3f} "
                  f"{spread(wok, three_decimals):<15} "
                  f"{statistics.median(r['server_cpu_seconds'] for r in ok):>9.2f} "
                  f"{statistics.median(r['retries'] for r in ok):>7.0f}  {ratio:>17}{note}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--store", required=True, help="the ddprun-store executable")
    p.add_argument("--store-load", required=True, help="the store_load executable")
    p.add_argument("--torch-python", required=True, help="a Python with torch 2.x")
    p.add_argument("--servers", default="ddprun,libuv",
                   help="which of ddprun,libuv,legacy,baseline to measure (legacy: PyTorch's "
                        "older server, use_libuv=False; baseline: --baseline-store)")
    p.add_argument("--baseline-store", help="another ddprun-store build, to compare a change")
    p.add_argument("--connections", default="1,16,256,4096")
    p.add_argument("--depths", default="1,8",
                   help="requests in flight per connection; 1 is what PyTorch's client does")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup-ms", type=int, default=1000)
    p.add_argument("--duration-ms", type=int, default=3000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--storms", default="1000,10000")
    p.add_argument("--storm-limit-s", type=int, default=120)
    p.add_argument("--no-pin", action="store_true",
                   help="let the scheduler place servers and generator (default: server on the "
                        "first allowed CPU, generator on the others)")
    args = p.parse_args()
    args.server_cpus, args.generator_cpus = cpu_split(not args.no_pin)
    args.servers = [s for s in args.servers.split(",") if s]
    args.connections = [int(c) for c in args.connections.split(",") if c and c != "none"]
    args.depths = [int(d) for d in args.depths.split(",") if d]
    args.storms = [int(c) for c in args.storms.split(",") if c and c != "none"]

    log_dir = os.environ.get("TMPDIR", "/tmp")
    log_dir = os.path.join(log_dir, f"bench-store-{os.getpid()}")
    os.makedirs(log_dir, exist_ok=True)
    print(f"store bench: store_load (raw TCPStore G2 over epoll, no LibTorch) against "
          f"{', '.join(args.servers)}; {os.cpu_count()} CPUs; load average at start {loadavg()}")
    if args.server_cpus:
        print(f"servers pinned to CPU {sorted(args.server_cpus)}, store_load to CPU "
              f"{sorted(args.generator_cpus)}")
    servers = start_servers(args, log_dir)
    try:
        mix = run_mix(args, servers)
        print()
        summaries = print_mix(args, mix, args.servers)
        print_mix_ratios(args, summaries, args.servers)
        if args.storms:
            print_storms(args, run_storms(args, servers), args.servers)
    finally:
        for server in servers:
            server.stop()
    print(f"\nload average at end {loadavg()}; server logs in {log_dir}")
    print("srv us/op: server process CPU (utime+stime from /proc/PID/stat) per operation; "
          "srv cores: its CPU seconds per second;\ngen us/op: the same for store_load. "
          "Latency: request queued to reply read, GET and ADD. Storm srv CPU s: the server's\n"
          "CPU seconds for the whole storm, closing its connections included.")


if __name__ == "__main__":
    main()
