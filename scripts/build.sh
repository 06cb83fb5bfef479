#!/usr/bin/env bash
# Configures and builds ddprun (Release) into build/; executables land in build/bin/.
# Usage: scripts/build.sh [--all] [extra cmake -D options]
#   (default)  the programs: ddprun (launcher and agent), ddprun-store, ddprun-train (the bundled
#              trainer) and the etcd TLS module ddprun loads for https members
#   --all      everything: the programs, the tests and the benchmarks' helpers (what
#              scripts/test.sh builds; needs scripts/install-deps.sh --tests)
# BUILD_DIR (default build), BUILD_TYPE (default Release), JOBS (default: every core).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
target=(--target ddprun-programs)
testing=OFF
if [[ ${1:-} == --all ]]; then
  shift
  target=()
  testing=ON
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DBUILD_TESTING="$testing" "$@"
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" "${target[@]}"
