#!/usr/bin/env bash
# Installs what ddprun needs on Debian 12.
#   scripts/install-deps.sh           what building ddprun (scripts/build.sh) and running the main
#                                     job need: Debian's compiler, CMake, Ninja, Boost, nlohmann-json,
#                                     OpenSSL and yaml-cpp (apt-get), and .venv,
#                                     a Python virtual environment with PyTorch 2.13.0 (CPU), whose
#                                     LibTorch ddprun-train builds against, and matplotlib for
#                                     scripts/plot_metrics.py.
#   scripts/install-deps.sh --tests   also what the test command (scripts/test.sh) and the
#                                     benchmarks need: Slurm and munge, etcd, clang, Catch2, Debian's
#                                     python3-torch 1.13 (the old-protocol TCPStore client), elfutils,
#                                     py-spy in .venv, .venv-cuda (PyTorch 2.14.1 with CUDA, which CI
#                                     only compiles and links ddprun-train against; DDPRUN_CUDA_VENV=0
#                                     skips it, =1 insists on it; unset, it is skipped with a message
#                                     when the disk has too little room for it, as a full disk would
#                                     fail the whole install), and .gpu-deps/ (the headers and
#                                     libraries scripts/gpu-check.sh carries to a GPU machine),
#                                     and .wheelhouse/ (what the pip-install test builds with).
# Idempotent: installed packages are skipped and a venv that already has its torch is kept.
# The venvs, .gpu-deps and .wheelhouse are ignored by git.
set -euo pipefail
cd "$(dirname "$0")/.."

with_tests=0
case ${1:-} in
  "") ;;
  --tests) with_tests=1 ;;
  *)
    echo "usage: scripts/install-deps.sh [--tests]" >&2
    exit 2
    ;;
esac

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config
  # launcher, agent, rendezvous (OpenSSL: https to etcd members, in a module of its own)
  libboost-dev nlohmann-json3-dev libssl-dev
  # worker runtime: YAML configs; python3-venv for .venv
  libyaml-cpp-dev python3-venv
)
TEST_PACKAGES=(
  git clang libclang-rt-14-dev
  # etcd rendezvous backend: tests start their own members; openssl makes their test CA
  etcd-server openssl
  # native stacks of hung workers (eu-stack; py-spy for Python stacks comes from PyPI)
  elfutils
  # tests: Debian's torch 1.13 (with its BLAS) is the old-protocol (G0) TCPStore client
  catch2 python3-torch libopenblas0-openmp procps iproute2 psmisc
  # Slurm integration tests
  slurm-wlm munge
  # the job page, opened by a real headless browser
  chromium
)
if ((with_tests)); then
  PACKAGES+=("${TEST_PACKAGES[@]}")
fi
# Pinned so builds and interop tests are reproducible; see README "Building against PyTorch".
TORCH_CPU_VERSION=2.13.0
TORCH_CUDA_VERSION=2.14.1

if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
else
  SUDO=(sudo)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# make_venv DIR VERSION [PACKAGE...]: a venv of Debian's python3 (not whatever python3 comes first on PATH)
# holding torch==VERSION. A venv whose torch does not import (an interrupted install) is redone.
make_venv() {
  local dir=$1 version=$2
  if [[ -x $dir/bin/python ]] &&
    "$dir/bin/python" -c "import sys, torch; sys.exit(torch.__version__.split('+')[0] != '$version')" \
      2>/dev/null; then
    echo "install-deps: $dir has torch $version"
    return
  fi
  echo "install-deps: creating $dir with torch $version"
  rm -rf "$dir"
  /usr/bin/python3 -m venv "$dir"
  # PIP_* variables reach pip as usual, e.g. PIP_INDEX_URL for a mirror or a CPU-only index.
  # numpy too: torch prints a warning on import without it, which would reach every log.
  # --no-compile: Python compiles the modules a program imports when it first does; compiling
  # all of torch's ahead took 13 of the 22 s of .venv's install on the 2-core machine.
  "$dir/bin/python" -m pip install -q --no-cache-dir --no-compile "torch==$version" numpy "${@:3}"
}

# matplotlib: scripts/plot_metrics.py draws the training curves with it (one pip run with torch,
# and once more for a .venv made before it was wanted).
make_venv .venv "$TORCH_CPU_VERSION" matplotlib
if ! .venv/bin/python -c "import matplotlib" 2>/dev/null; then
  .venv/bin/python -m pip install -q --no-cache-dir matplotlib
fi
if ((!with_tests)); then
  exit 0
fi
# py-spy: the agent captures hung workers' Python stacks with it (found next to their python).
if [[ ! -x .venv/bin/py-spy ]]; then
  .venv/bin/python -m pip install -q --no-cache-dir py-spy
fi
# .wheelhouse: the PyPI packages the pip-install test (tests/packaging) builds the wheel with,
# installs it with (the package's dependencies, and the torch its trainer is built against) and
# checks it with, fetched now so that the test needs no network (the suite runs without one).
.venv/bin/python -m pip download -q --no-cache-dir --dest .wheelhouse \
  scikit-build-core boost-headers nlohmann-json ziglang auditwheel \
  cmake ninja cmeel-yaml-cpp "torch==$TORCH_CPU_VERSION"
# The CUDA wheels take about 5.5 GiB once installed, and pip unpacks them beside that: with less
# room than this the install would die of ENOSPC halfway and leave the disk full for the build.
CUDA_VENV_NEEDS_GIB=12
cuda_venv_wanted() {
  case ${DDPRUN_CUDA_VENV:-auto} in
    0) return 1 ;;
    1) return 0 ;;
  esac
  if [[ -x .venv-cuda/bin/python ]]; then
    return 0
  fi
  local free_gib
  free_gib=$(df --output=avail -B1G . | tail -n 1 | tr -d ' ')
  if ((free_gib < CUDA_VENV_NEEDS_GIB)); then
    echo "install-deps: skipping .venv-cuda: $free_gib GiB free here and it needs about" \
      "$CUDA_VENV_NEEDS_GIB GiB; scripts/test.sh will skip the CUDA build (DDPRUN_CUDA_VENV=1 insists)" >&2
    return 1
  fi
}
if cuda_venv_wanted; then
  if ! make_venv .venv-cuda "$TORCH_CUDA_VERSION"; then
    rm -rf .venv-cuda # a half-installed CUDA venv is gigabytes of nothing
    echo "install-deps: could not install torch $TORCH_CUDA_VERSION into .venv-cuda" >&2
    exit 1
  fi
  # scripts/test.sh builds the CUDA trainer as a pip installation does, with the pip package's
  # dependencies beside torch (worker-runtime/build_against_torch.py).
  if ! .venv-cuda/bin/python -m pip show -q nlohmann-json cmeel-yaml-cpp >/dev/null 2>&1; then
    .venv-cuda/bin/python -m pip install -q --no-cache-dir nlohmann-json cmeel-yaml-cpp
  fi
fi
scripts/gpu-check.sh --prepare
