#!/usr/bin/env bash
# ddprun-train vs a PyTorch Python DDP trainer (same model, data, batch, threads, seed), at 1 and
# 2 ranks, both under the reference torchrun; then snapshot save/load vs torch.save/torch.load.
# Usage: bench/train/run.sh [BUILD_DIR]   (default: build)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# Absolute, because the benchmarks run their programs from other working directories.
build="$(mkdir -p "${1:-$root/build}" && cd "${1:-$root/build}" && pwd)"
cmake --build "$build" --target ddprun-train >/dev/null
exec /usr/bin/python3 "$here/run_bench.py" --trainer "$build/bin/ddprun-train" \
  --torchrun "$root/../shared/tools/torchrun_ref.py" \
  --data "$root/../shared/data/tinyshakespeare.txt" "${@:2}"
