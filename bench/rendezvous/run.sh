#!/bin/bash
# One command: builds ddprun-store and the simulator, then prints the table.
# Usage: bench/rendezvous/run.sh [BUILD_DIR] [--etcd-cluster] [rendezvous_sim options...]
# (--secret-compare: each size open and with a job secret, and their ratio)
# --etcd-cluster: the agents use the etcd backend against a 3-member etcd (Debian's etcd-server)
# this script starts on 127.0.0.1-3 in a folder of its own and stops by PID at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../setup.sh"
bench_build ddprun-store rendezvous_sim
# Each simulated agent holds about three connections, and so does the store for it.
ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# The listen backlog caps how many agents connect at once without SYN retries (1 s each).
sysctl -qw net.core.somaxconn=65535 2>/dev/null || true

sim_args=()
if [ "${1:-}" = "--etcd-cluster" ]; then
  shift
  etcd_dir=$(mktemp -d /tmp/ddprun-bench-etcd.XXXXXX)
  pids=()
  cleanup() {
    # wait reports the members' SIGTERM as a failure: under set -e that must not skip the rm
    # (each run left ~200 MB of etcd data in /tmp until this said so).
    if [ "${#pids[@]}" -gt 0 ]; then
      kill "${pids[@]}" 2>/dev/null || true
      wait "${pids[@]}" 2>/dev/null || true
    fi
    rm -rf "$etcd_dir"
  }
  trap cleanup EXIT
  base=$((23000 + RANDOM % 5000))
  cluster="" endpoints=""
  for i in 1 2 3; do
    cluster+="${cluster:+,}m$i=http://127.0.0.$i:$((base + 10 + i))"
    endpoints+="${endpoints:+,}127.0.0.$i:$base"
  done
  for i in 1 2 3; do
    etcd --name "m$i" --data-dir "$etcd_dir/m$i" \
      --listen-client-urls "http://127.0.0.$i:$base" --advertise-client-urls "http://127.0.0.$i:$base" \
      --listen-peer-urls "http://127.0.0.$i:$((base + 10 + i))" \
      --initial-advertise-peer-urls "http://127.0.0.$i:$((base + 10 + i))" \
      --initial-cluster "$cluster" --initial-cluster-state new \
      --quota-backend-bytes 4294967296 >"$etcd_dir/m$i.log" 2>&1 &
    pids+=($!)
  done
  python3 - "$endpoints" <<'PY'
import json, sys, time, urllib.request
for endpoint in sys.argv[1].split(","):
    deadline = time.time() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://{endpoint}/health", timeout=2) as reply:
                if json.load(reply).get("health") == "true":
                    break
        except OSError:
            pass
        if time.time() > deadline:
            sys.exit(f"bench/rendezvous: etcd member {endpoint} not healthy after 60 s")
        time.sleep(0.2)
PY
  sim_args=(--etcd "$endpoints")
fi
"$build/bin/rendezvous_sim" "${sim_args[@]}" "$@"
if [ -n "${endpoints:-}" ]; then
  # etcd's own counts for the whole run: unlike the wall clock, they hold still on a loaded
  # machine, so a change of a few percent in what the agents ask shows in them.
  python3 - "$endpoints" "$@" <<'PY'
import re, sys, urllib.request
endpoints, args = sys.argv[1].split(","), sys.argv[2:]
totals, first_member = {}, {}
for index, endpoint in enumerate(endpoints):
    with urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=10) as reply:
        for line in reply.read().decode().splitlines():
            match = re.match(r'(\w+)(\{[^}]*\})? ([0-9.e+-]+)$', line)
            if not match:
                continue
            name, labels, value = match.group(1), match.group(2) or "", float(match.group(3))
            method = re.search(r'grpc_method="(\w+)"', labels)
            if name == "grpc_server_started_total" and method:
                name = "calls " + method.group(1)
            elif name not in ("process_cpu_seconds_total", "etcd_network_client_grpc_sent_bytes_total",
                              "etcd_server_proposals_committed_total"):
                continue
            totals[name] = totals.get(name, 0) + value
            if index == 0:
                first_member[name] = first_member.get(name, 0) + value
rows = [("raft entries committed (one member)", first_member.get("etcd_server_proposals_committed_total", 0)),
        ("CPU seconds, 3 members", totals.get("process_cpu_seconds_total", 0)),
        ("bytes sent to clients", totals.get("etcd_network_client_grpc_sent_bytes_total", 0))]
rows += [(name, value) for name, value in sorted(totals.items()) if name.startswith("calls ") and value]
def option(flag):
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None
agents = option("--agents")
print("\netcd's own counts for this whole run (every size, repeat and phase; sum of the members):")
print("| count | total |")
print("|---|---:|")
for name, value in rows:
    print(f"| {name} | {value:.6g} |")
if agents:
    print(f"(agents per size: {agents}; repeats: {option('--repeats') or 'the default'})")
PY
fi
