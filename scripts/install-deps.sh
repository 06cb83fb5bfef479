#!/usr/bin/env bash
# Installs everything ddprun needs to build, test and benchmark on Debian 12:
#   1. Debian packages (apt-get);
#   2. .venv: Python virtual environment with PyTorch 2.13.0 (CPU). Its LibTorch is what
#      ddprun-train builds against, and its torchrun and TCPStore client are the tests' references;
#   3. .venv-cuda: PyTorch 2.14.1 with CUDA, which CI only compiles and links ddprun-train against
#      (DDPRUN_CUDA_VENV=0 skips it, =1 insists on it; unset, it is skipped with a message when the
#      disk has too little room for it, as a full disk would fail the whole install);
#   4. .gpu-deps/: the headers and libraries scripts/gpu-check.sh carries to a GPU machine.
# Idempotent: installed packages are skipped and a venv that already has its torch is kept.
# Both venvs and .gpu-deps are ignored by git.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config git clang libclang-rt-14-dev
  # launcher, agent, rendezvous (OpenSSL: https to etcd members)
  libboost-dev libboost-program-options-dev nlohmann-json3-dev libssl-dev
  # etcd rendezvous backend: tests start their own members; openssl makes their test CA
  etcd-server openssl
  # native stacks of hung workers (eu-stack; py-spy for Python stacks comes from PyPI)
  elfutils
  # tests: Debian's torch 1.13 is the old-protocol (G0) TCPStore client
  catch2 python3-torch python3-venv procps iproute2 psmisc
  # worker runtime: Gloo's headers (pip wheels of torch do not ship them), fast BLAS, YAML configs,
  # zlib's crc32 for the snapshots' checksums
  libgloo-dev libopenblas0-openmp libyaml-cpp-dev zlib1g-dev
  # Slurm integration tests
  slurm-wlm munge
)
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

# make_venv DIR VERSION: a venv of Debian's python3 (not whatever python3 comes first on PATH)
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
  "$dir/bin/python" -m pip install -q --no-cache-dir "torch==$version" numpy
}

make_venv .venv "$TORCH_CPU_VERSION"
# py-spy: the agent captures hung workers' Python stacks with it (found next to their python).
if [[ ! -x .venv/bin/py-spy ]]; then
  .venv/bin/python -m pip install -q --no-cache-dir py-spy
fi
# matplotlib: scripts/plot_metrics.py draws the training curves with it.
if ! .venv/bin/python -c "import matplotlib" 2>/dev/null; then
  .venv/bin/python -m pip install -q --no-cache-dir matplotlib
fi
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
fi
scripts/gpu-check.sh --prepare
