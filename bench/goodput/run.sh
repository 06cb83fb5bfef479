#!/usr/bin/env bash
# What losing a node costs: a 2-node job on loopback addresses loses node B (agent and workers,
# SIGKILLed) at seeded times and gets a replacement 1 s later; torchrun 2.13 with a minGPT-ddp
# trainer (its epoch snapshots) beside ddprun with ddprun-train, epoch snapshots and snapshots
# every 10 steps. Prints goodput, steps recomputed and downtime per failure, snapshot stall.
# Usage: bench/goodput/run.sh [BUILD_DIR] [--short] [--repeats N] [--failures N] [--seed S]
#   --short: 1 failure, 1 repeat, short epochs (development; a few minutes). The full table:
#   3 failures per run, about 15 minutes here.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../setup.sh"
bench_build ddprun ddprun-train
python=$(venv_program python)
torchrun=$(venv_program torchrun)
bench_corpus 300000
echo "bench/goodput: $(uptime)"
# Loopback only, in a network namespace of its own (127.0.0.2 is node B's address there).
unshare --net -- /bin/sh -c 'ip link set lo up && exec "$@"' sh \
  "$python" "$here/goodput.py" --ddprun "$build/bin/ddprun" --torchrun "$torchrun" \
  --data "$data" "$@"
