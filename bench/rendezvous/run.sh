#!/bin/bash
# One command: builds ddprun-store and the simulator, then prints the table.
# Usage: bench/rendezvous/run.sh [BUILD_DIR] [rendezvous_sim options...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$(mkdir -p "${1:-$root/build}" && cd "${1:-$root/build}" && pwd)"
shift || true
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j2 --target ddprun-store rendezvous_sim >/dev/null
# Each simulated agent holds about three connections, and so does the store for it.
ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# The listen backlog caps how many agents connect at once without SYN retries (1 s each).
sysctl -qw net.core.somaxconn=65535 2>/dev/null || true
exec "$build/bin/rendezvous_sim" --store "$build/bin/ddprun-store" "$@"
