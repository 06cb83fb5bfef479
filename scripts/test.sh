#!/usr/bin/env bash
# Builds ddprun and runs the whole test suite:
#   1. the Release build with every component against .venv's PyTorch 2.13 (CPU), all CTest labels;
#   2. ddprun-train alone against .venv-cuda's PyTorch with CUDA and NCCL, compiled and linked
#      only (no GPU here; scripts/gpu-check.sh runs it on one), into build-cuda/. Skipped with
#      DDPRUN_CUDA_VENV=0, and with a message when install-deps.sh made no .venv-cuda (too little
#      disk); DDPRUN_CUDA_VENV=1 makes a missing .venv-cuda an error;
#   3. an ASan+UBSan build of the components that do not use LibTorch, unit and
#      integration labels.
# Usage: scripts/test.sh            (run after scripts/install-deps.sh --tests)
set -euo pipefail
cd "$(dirname "$0")/.."

# The tests talk only to loopback and to network namespaces they make themselves. As root they
# run in a network namespace of their own with only loopback up, so nothing they start (a
# PyTorch server's reverse name lookup, say) can send a packet anywhere else by accident.
# DDPRUN_TEST_NETNS=0 runs them in the machine's own namespace.
isolated() {
  if [[ $(id -u) -eq 0 && ${DDPRUN_TEST_NETNS:-1} != 0 ]] && command -v unshare >/dev/null &&
    unshare --net true 2>/dev/null; then
    unshare --net bash -c 'ip link set lo up && exec "$@"' isolated "$@"
  else
    "$@"
  fi
}

scripts/build.sh --all
isolated ctest --test-dir build --output-on-failure -j 2 --timeout 900

cuda_stage=${DDPRUN_CUDA_VENV:-auto}
if [[ $cuda_stage != 0 && ! -x .venv-cuda/bin/python ]]; then
  if [[ $cuda_stage == 1 ]]; then
    echo "test.sh: DDPRUN_CUDA_VENV=1 but there is no .venv-cuda: run scripts/install-deps.sh --tests" >&2
    exit 1
  fi
  echo "test.sh: CUDA build SKIPPED: no .venv-cuda (install-deps.sh said why)" >&2
  cuda_stage=0
fi
if [[ $cuda_stage != 0 ]]; then
  BUILD_DIR=build-cuda scripts/build.sh -DDDPRUN_TRAINER_ONLY=ON \
    -DDDPRUN_TORCH_PYTHON="$PWD/.venv-cuda/bin/python"
  # The NCCL path is compiled in only when LibTorch defines USE_C10D_NCCL: make sure it was.
  if ! nm -C build-cuda/bin/ddprun-train | grep "c10d::ProcessGroupNCCL::ProcessGroupNCCL" >/dev/null; then
    echo "test.sh: build-cuda/bin/ddprun-train has no ProcessGroupNCCL: the CUDA build lost NCCL" >&2
    exit 1
  fi
  echo "test.sh: ddprun-train compiled and linked against CUDA LibTorch with NCCL (build-cuda/)"
fi

BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo scripts/build.sh --all \
  -DDDPRUN_SANITIZE=ON -DDDPRUN_WITH_TORCH=OFF
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  isolated ctest --test-dir build-asan --output-on-failure -j 2 -L 'unit|integration' --timeout 900
