#!/bin/bash
# One command: builds ddprun-store, PyTorch's reference server and the benchmark, then prints
# the table. Usage: bench/store/run.sh [BUILD_DIR] [store_bench options...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# Absolute, because the benchmarks run their programs from other working directories.
build="$(mkdir -p "${1:-$root/build}" && cd "${1:-$root/build}" && pwd)"
shift || true
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j2 --target ddprun-store torch_store_server store_bench >/dev/null
exec "$build/bin/store_bench" --store "$build/bin/ddprun-store" \
  --torch-server "$build/bin/torch_store_server" "$@"
