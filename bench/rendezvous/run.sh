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
