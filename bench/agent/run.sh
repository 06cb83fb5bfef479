#!/usr/bin/env bash
# ddprun vs the reference torchrun (.venv's, PyTorch 2.13, at its default --monitor-interval):
# launch-to-exit, restart latency, rendezvous of N agents, agent peak memory. Prints a table
# of medians with their spread; exits 1 if a measure failed (the table says which).
# Usage: bench/agent/run.sh [BUILD_DIR] [bench_agent.py options, e.g. --repeats 3
#        --ddprun-agents 8,32,256,1024 --only launch,rss]
#
# Runs in a network namespace of its own with only loopback: torchrun's agents host PyTorch's
# TCPStore, which looks up the name of every peer it accepts (a DNS query), and those queries
# must not leave the machine. Needs root (or unshare rights) for that.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# Absolute, because the benchmarks run their programs from other working directories.
build="$(mkdir -p "${1:-$root/build}" && cd "${1:-$root/build}" && pwd)"
shift || true
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j"${JOBS:-$(nproc)}" --target ddprun >/dev/null
# The reference: the real torchrun of the project's venv (scripts/install-deps.sh makes it).
torchrun="$root/.venv/bin/torchrun"
[ -x "$torchrun" ] || { echo "bench/agent: $torchrun missing: run scripts/install-deps.sh" >&2; exit 1; }
# Hundreds of agents, each with its sockets and pipes.
ulimit -n "$(ulimit -Hn)"
echo "bench/agent: $(uptime)"
exec unshare --net -- /bin/sh -c 'ip link set lo up && exec "$@"' sh \
  /usr/bin/python3 "$here/bench_agent.py" --ddprun "$build/bin/ddprun" --torchrun "$torchrun" "$@"
