#!/usr/bin/env bash
# ddprun vs the reference torchrun (.venv's, --monitor_interval 0.1): launch-to-exit,
# restart latency, rendezvous of N agents, agent peak memory. Prints a table of medians.
# Usage: bench/agent/run.sh [build-dir]   (builds ddprun there first)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# Absolute, because the benchmarks run their programs from other working directories.
build="$(mkdir -p "${1:-$root/build}" && cd "${1:-$root/build}" && pwd)"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" --target ddprun >/dev/null
# The reference: the real torchrun of the project's venv (scripts/install-deps.sh makes it).
torchrun="$root/.venv/bin/torchrun"
[ -x "$torchrun" ] || { echo "bench/agent: $torchrun missing: run scripts/install-deps.sh" >&2; exit 1; }
exec /usr/bin/python3 "$here/bench_agent.py" --ddprun "$build/bin/ddprun" \
  --torchrun "$torchrun" "${@:2}"
