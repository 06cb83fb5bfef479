#!/usr/bin/env bash
# Installs every Debian 12 package ddprun needs to build, test and benchmark.
# Idempotent: packages already present are skipped by apt-get.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config git clang libclang-rt-14-dev
  # launcher, agent, rendezvous (OpenSSL: https to etcd members)
  libboost-dev libboost-program-options-dev nlohmann-json3-dev libssl-dev
  # etcd rendezvous backend: tests start their own members; openssl makes their test CA
  etcd-server openssl
  # tests
  catch2 python3-torch procps iproute2 psmisc
  # worker runtime (LibTorch CPU, Gloo headers, fast BLAS, YAML configs)
  libtorch-dev libgloo-dev libopenblas0-openmp libyaml-cpp-dev
  # Slurm integration tests
  slurm-wlm munge
)

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
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
