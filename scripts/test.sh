#!/usr/bin/env bash
# Builds ddprun and runs the whole test suite:
#   1. the Release build with every component, all CTest labels;
#   2. an ASan+UBSan build of the components that do not use LibTorch, unit and
#      integration labels.
# Usage: scripts/test.sh            (run after scripts/install-deps.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh
ctest --test-dir build --output-on-failure -j 2 --timeout 900

BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo scripts/build.sh \
  -DDDPRUN_SANITIZE=ON -DDDPRUN_WITH_TORCH=OFF
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j 2 -L 'unit|integration' --timeout 900
