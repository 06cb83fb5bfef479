#!/usr/bin/env bash
# One command: builds ddprun-store and the load generator, then measures ddprun-store against
# PyTorch's own TCPStore server (the libuv one, PyTorch's default since 2.4) hosted by the
# project venv's torch, and prints the tables (see bench/README.md).
# Usage: bench/store/run.sh [BUILD_DIR] [run_bench.py options, e.g. --repeats 3 --servers
#        ddprun,libuv,legacy --connections 1,256 --storms none]
#
# Everything runs in a network namespace of its own with only loopback: PyTorch's server looks
# up the name of every peer it accepts (getnameinfo, i.e. a DNS query for ::ffff:127.0.0.1),
# and those queries must not leave the machine. Needs root (or unshare rights) for that.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../setup.sh"
bench_build ddprun-store store_load
python=$(venv_program python)
# 10,000-connection storms need that many descriptors in the generator and in each server.
ulimit -n "$(ulimit -Hn)"
echo "bench/store: descriptor limit $(ulimit -n); $(uptime)"
exec unshare --net -- /bin/sh -c 'ip link set lo up && exec "$@"' sh \
  /usr/bin/python3 "$here/run_bench.py" --store "$build/bin/ddprun-store" \
  --store-load "$build/bin/store_load" --torch-python "$python" "$@"
