"""What the job page costs the agent: peak RSS (VmHWM) and CPU time of a standalone ddprun agent
with 2 sleeping workers, without a health port (the reference), with the port and nobody looking,
and with the page open (a viewer fetching /job/ once, then /job/api/state and /job/api/stacks
every 2 s as the page does, or every 0.1 s as a stress). Prints medians [min-max] and the
difference to the reference. Standard library only."""

import argparse
import os
import re
import socket
import statistics
import subprocess
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("ddprun")
parser.add_argument("--repeats", type=int, default=5)
parser.add_argument("--seconds", type=float, default=20.0, help="how long each agent runs")
args = parser.parse_args()



def free_port():
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def get(port, path):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def viewer(port, every, stop):
    get(port, "/job/")
    while not stop.wait(every):
        get(port, "/job/api/state")
        get(port, "/job/api/stacks")


def cpu_seconds(pid):
    """CPU time of every thread of the agent, from the scheduler's nanosecond counters (the
    clock ticks of /proc/PID/stat are 10 ms: coarser than what an idle agent uses)."""
    total_ns = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total_ns += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that just ended
    return total_ns / 1e9


def peak_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def run(config):
    """One agent run: (peak RSS MiB, CPU seconds over the measured window)."""
    env = dict(os.environ)
    port = None
    if config != "no health port":
        port = free_port()
        env["TORCHELASTIC_HEALTH_CHECK_PORT"] = str(port)
    proc = subprocess.Popen(
        [args.ddprun, "--standalone", "--nproc_per_node", "2", "--no_python", "/bin/sleep",
         str(args.seconds)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    # Its output is drained all along (a full pipe would stall it); the workers_started line
    # is not printed, so the steady state is its start line plus a second.
    started = threading.Event()

    def drain():
        for line in proc.stderr:
            if line.startswith("ddprun: ") and "job page" not in line:
                started.set()
        started.set()

    threading.Thread(target=drain, daemon=True).start()
    if not started.wait(30):
        proc.kill()
        raise SystemExit(f"bench/job_page: the agent ({config}) did not start within 30 s")
    time.sleep(1.0)
    stop = threading.Event()
    thread = None
    if config.startswith("page open"):
        every = 2.0 if "2 s" in config else 0.1
        thread = threading.Thread(target=viewer, args=(port, every, stop), daemon=True)
        thread.start()
    start_cpu = cpu_seconds(proc.pid)
    window = args.seconds - 3.0
    time.sleep(window)
    used = cpu_seconds(proc.pid) - start_cpu
    peak = peak_mib(proc.pid)
    stop.set()
    if thread:
        thread.join()
    proc.wait()
    return peak, used / window


CONFIGS = ["no health port", "health port, nobody looking", "page open, polled every 2 s",
           "page open, polled every 0.1 s"]


def main():
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"job page bench: {args.ddprun}, {args.repeats} repeats of {args.seconds:.0f} s; "
          f"load average at start {load}", flush=True)
    results = {c: [] for c in CONFIGS}
    for _ in range(args.repeats):
        for config in CONFIGS:  # interleaved, so a change in load touches every config alike
            results[config].append(run(config))

    def cell(values, digits):
        med = statistics.median(values)
        return f"{med:.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"

    ref_rss = statistics.median(r[0] for r in results[CONFIGS[0]])
    ref_cpu = statistics.median(r[1] for r in results[CONFIGS[0]])
    print(f"\n{'agent (median [min-max])':<32} {'peak RSS MiB':>20} {'vs ref':>8} "
          f"{'CPU us per s':>24} {'vs ref':>8}")
    for config in CONFIGS:
        rss = [r[0] for r in results[config]]
        cpu = [1e6 * r[1] for r in results[config]]
        print(f"{config:<32} {cell(rss, 2):>20} {statistics.median(rss) - ref_rss:>+8.2f} "
              f"{cell(cpu, 0):>24} {statistics.median(cpu) - 1e6 * ref_cpu:>+8.0f}")
    print("\nref: the agent without a health port; CPU: time on CPU of all the agent's threads "
          "(/proc/PID/task/*/schedstat) over the run's steady part, per second")


main()
