#!/usr/bin/env bash
# Builds ddprun and runs the whole test suite:
#   1. the Release build with every component against .venv's PyTorch 2.13 (CPU), all CTest labels
#      but packaging;
#   2. ddprun-train alone against .venv-cuda's PyTorch with CUDA and NCCL, compiled and linked
#      only (no GPU here; scripts/gpu-check.sh runs it on one) as a pip installation builds it
#      (worker-runtime/build_against_torch.py), into build-cuda/. Skipped with
#      DDPRUN_CUDA_VENV=0, and with a message when install-deps.sh made no .venv-cuda (too little
#      disk); DDPRUN_CUDA_VENV=1 makes a missing .venv-cuda an error;
#   3. an ASan+UBSan build of the components that do not use LibTorch, unit and
#      integration labels (but the fuzzers, sanitized whatever the build: they ran in 1);
#   4. the packaging label: tests/packaging/pip_install_test.sh builds the pip wheel as a
#      non-root user and installs it.
# The Release suite mostly waits (on sockets, timeouts, processes), so the builds of 2 and 3 and
# the packaging test run beside it, one after the other, at the lowest CPU priority (nice 19):
# they take the cores only while the tests leave them idle. Each stage prints how long it took.
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

stage_started=$SECONDS
stage_done() {
  echo "test.sh: $1 took $((SECONDS - stage_started)) s"
  stage_started=$SECONDS
}

scripts/build.sh --all
stage_done "the Release build"

cuda_stage=${DDPRUN_CUDA_VENV:-auto}
if [[ $cuda_stage != 0 && ! -x .venv-cuda/bin/python ]]; then
  if [[ $cuda_stage == 1 ]]; then
    echo "test.sh: DDPRUN_CUDA_VENV=1 but there is no .venv-cuda: run scripts/install-deps.sh --tests" >&2
    exit 1
  fi
  echo "test.sh: CUDA build SKIPPED: no .venv-cuda (install-deps.sh said why)" >&2
  cuda_stage=0
fi

# ddprun-train against .venv-cuda's torch the way a pip installation builds it on its first
# `train` (worker-runtime/build_against_torch.py, from the files the wheel ships), with a cache
# in build-cuda/.
cuda_build() {
  rm -rf build-cuda
  mkdir -p build-cuda/source
  cp -r CMakeLists.txt cmake worker-runtime build-cuda/source/
  local trainer
  trainer=$(DDPRUN_CACHE_DIR=$PWD/build-cuda/cache .venv-cuda/bin/python \
    worker-runtime/build_against_torch.py --source build-cuda/source) || return 1
  # The NCCL path is compiled in only when LibTorch defines USE_C10D_NCCL: make sure it was.
  if ! nm -C "$trainer" | grep "c10d::ProcessGroupNCCL::ProcessGroupNCCL" >/dev/null; then
    echo "test.sh: $trainer has no ProcessGroupNCCL: the CUDA build lost NCCL" >&2
    return 1
  fi
  echo "test.sh: ddprun-train compiled and linked against CUDA LibTorch with NCCL ($trainer)"
}

# Beside the Release suite, at nice 19 (they take the cores only while the suites leave them
# idle), one after the other: the ASan build, the packaging test, the CUDA build. (Run as two
# jobs, they shared the idle cores, and the ASan build that the last stage waits for ended
# later.) Each writes its log in build/side-stages/ (shown when it fails; the packaging test's
# always, it is a test) and its time; build/side-stages/failed lists what failed. The ASan
# suite runs once its build is done, while the packaging test may still run: the side chain
# says so on its standard output, a pipe read here (which ends early if the chain dies).
mkdir -p build/side-stages
rm -f build/side-stages/*
at_lowest_priority() { renice -n 19 -p "$BASHPID" >/dev/null; }
timed() { # timed NAME COMMAND...: NAME.log, its time, and NAME in `failed` if it failed
  local name=$1 started=$SECONDS
  shift
  "$@" >"build/side-stages/$name.log" 2>&1 || echo "$name" >>build/side-stages/failed
  echo "test.sh: $name took $((SECONDS - started)) s (beside the suites)" \
    >>build/side-stages/times
}
asan_labels='unit|integration'
asan_build() {
  # -O1: AddressSanitizer's own advice (usable stacks, quick builds). -g1: line tables only,
  # enough for file:line in every frame of a report, and a fifth less compile time than -g.
  # A unity build (several sources per compiler run, so Asio's headers are compiled once per
  # batch, not once per file): the Release build, one file per run, still checks that each
  # file includes what it uses, and this one that no two files in a batch define one name.
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S . -B build-asan "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=ON \
    -DDDPRUN_SANITIZE=ON -DDDPRUN_WITH_TORCH=OFF -DCMAKE_UNITY_BUILD=ON \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
  # Only what the ASan suite runs: the programs and the executables of its tests (the slurm,
  # interop and model tests are not run there).
  local targets
  # The names come from ctest (its label filter); their executables from the CTest files, since
  # ctest names no executable that is not built yet.
  targets=$(ctest --test-dir build-asan -N -L "$asan_labels" -LE fuzz --show-only=json-v1 |
    python3 -c '
import json, pathlib, re, sys
tests = pathlib.Path(sys.argv[1]).resolve()
wanted = {test["name"] for test in json.load(sys.stdin)["tests"]}
for listing in tests.rglob("CTestTestfile.cmake"):
    for name, program in re.findall(r"add_test\(\[=\[(.*?)\]=\] \"([^\"]+)\"", listing.read_text()):
        if name in wanted and pathlib.Path(program).parent == tests:
            print(pathlib.Path(program).name)' build-asan/tests | sort -u)
  [[ -n $targets ]] || { echo "test.sh: no test executable found for the ASan suite" >&2; return 1; }
  # shellcheck disable=SC2086 # one target per word
  cmake --build build-asan -j "$(nproc)" --target ddprun-programs $targets
}
packaging_test() {
  local status=0
  isolated timeout 3600 tests/packaging/pip_install_test.sh "$PWD" || status=$?
  echo "$status" >build/side-stages/packaging.status  # judged below: 77 is a skip
}
side_stage_failed() { # side_stage_failed NAME...: shows the log of each that failed
  local failed=1
  for name in "$@"; do
    if grep -qx "$name" build/side-stages/failed 2>/dev/null; then
      echo "test.sh: $name failed (its log follows)" >&2
      cat "build/side-stages/$name.log" >&2
      failed=0
    fi
  done
  return $failed
}
side_chain() {
  at_lowest_priority
  timed asan-build asan_build
  echo built
  timed packaging packaging_test
  if [[ $cuda_stage != 0 ]]; then timed cuda-build cuda_build; fi
}
exec 3< <(side_chain)
side_chain_pid=$!

suite_status=0
isolated ctest --test-dir build --output-on-failure -j 2 --timeout 900 -LE packaging ||
  suite_status=$?
stage_done "the Release suite"
read -r -u 3 _ || { echo "test.sh: the side chain ended before its ASan build" >&2; exit 1; }
stage_done "waiting for the ASan build"
asan_status=0
if ((suite_status == 0)) && ! grep -qx asan-build build/side-stages/failed 2>/dev/null; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    isolated ctest --test-dir build-asan --output-on-failure -j 2 -L "$asan_labels" -LE fuzz \
    --timeout 900 || asan_status=$?
  stage_done "the ASan suite"
fi
wait "$side_chain_pid"
stage_done "waiting for the packaging test and the CUDA build"
cat build/side-stages/times || true
((suite_status == 0)) || { echo "test.sh: the Release suite failed" >&2; exit "$suite_status"; }
! side_stage_failed asan-build cuda-build packaging || exit 1
((asan_status == 0)) || { echo "test.sh: the ASan suite failed" >&2; exit "$asan_status"; }

cat build/side-stages/packaging.log
case $(cat build/side-stages/packaging.status) in
  0) echo "test.sh: packaging_pip_install PASSED" ;;
  77) echo "test.sh: packaging_pip_install SKIPPED (the reason is above)" ;;
  *) echo "test.sh: packaging_pip_install FAILED" >&2; exit 1 ;;
esac
