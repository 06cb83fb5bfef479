#!/usr/bin/env bash
# ddprun-train vs a PyTorch Python DDP trainer (same model, data, batch, threads, seed), at 1 and
# 2 ranks, both under the reference torchrun; then snapshot save/load vs torch.save/torch.load.
# Usage: bench/train/run.sh [BUILD_DIR]   (default: build)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../setup.sh"
bench_build ddprun-train
# The reference side runs on the project's venv (scripts/install-deps.sh): its Python runs the
# driver, so the driver's torchrun and torch.save/torch.load are that venv's.
python=$(venv_program python)
torchrun=$(venv_program torchrun)
# Data: the default corpus's generator, at tinyshakespeare's size (1,115,394 characters).
bench_corpus 1115394
echo "bench/train: $(uptime)"
# In a network namespace of its own with only loopback: torchrun --standalone hosts PyTorch's
# TCPStore, which looks up the name of every peer it accepts (a DNS query), and those queries
# must not leave the machine. Needs root (or unshare rights) for that.
unshare --net -- /bin/sh -c 'ip link set lo up && exec "$@"' sh \
  "$python" "$here/run_bench.py" --trainer "$build/bin/ddprun-train" \
  --torchrun "$torchrun" --data "$data" "$@"
