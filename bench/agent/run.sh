#!/usr/bin/env bash
# ddprun vs the reference torchrun (.venv's, PyTorch 2.13, at its default --monitor-interval):
# launch-to-exit, restart latency, rendezvous of N agents, re-form after losing one of N agents,
# agent peak memory. Prints a table of medians with their spread; exits 1 if a measure failed
# (the table says which).
# Usage: bench/agent/run.sh [BUILD_DIR] [bench_agent.py options, e.g. --repeats 3
#        --ddprun-agents 8,32,256,1024 --only launch,rss]
# etcd vs c10d: bench/agent/run.sh [BUILD_DIR] --etcd-cluster --only rendezvous,reform
#        --ddprun-agents 8,32 --ref-agents 8,32 --rdzv-repeats 3 (the script starts a 3-member
#        etcd cluster, Debian's etcd on PATH, on 127.0.0.1-3 inside the namespace and stops it).
#
# Runs in a network namespace of its own with only loopback: torchrun's agents host PyTorch's
# TCPStore, which looks up the name of every peer it accepts (a DNS query), and those queries
# must not leave the machine. Needs root (or unshare rights) for that.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../setup.sh"
bench_build ddprun
# The reference: the real torchrun of the project's venv (scripts/install-deps.sh makes it).
torchrun=$(venv_program torchrun)
# Hundreds of agents, each with its sockets and pipes.
ulimit -n "$(ulimit -Hn)"
echo "bench/agent: $(uptime)"
exec unshare --net -- /bin/sh -c 'ip link set lo up && exec "$@"' sh \
  /usr/bin/python3 "$here/bench_agent.py" --ddprun "$build/bin/ddprun" --torchrun "$torchrun" "$@"
