#!/usr/bin/env bash
# What the job page costs the agent (peak RSS, CPU while nobody looks and while the page is open),
# against the same agent without a health port. Usage: bench/job_page/run.sh [BUILD_DIR]
# [--repeats N] [--seconds S]. Loopback only, in a network namespace of its own (needs root).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build
if [[ $# -gt 0 && $1 != --* ]]; then
  build=$1
  shift
fi
[[ -x $build/bin/ddprun ]] || { echo "bench/job_page: no $build/bin/ddprun: run scripts/build.sh" >&2; exit 1; }
exec unshare --net bash -c 'ip link set lo up && exec python3 bench/job_page/bench_job_page.py "$@"' \
  bash "$PWD/$build/bin/ddprun" "$@"
