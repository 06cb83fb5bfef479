#!/usr/bin/env bash
# ddprun vs the reference torchrun (.venv's, PyTorch 2.13) with TORCHELASTIC_ENABLE_FILE_TIMER=1:
# from a file-timer scope's expiry to the hung worker killed, and to all workers restarted.
# Prints a table of medians with their spread and the ratio; exits 1 if a run failed.
# Usage: bench/watchdog/run.sh [BUILD_DIR] [--repeats N]
#
# Runs in a network namespace of its own with only loopback (torchrun's TCPStore looks up the
# name of every peer it accepts; those DNS queries must not leave the machine). Needs root (or
# unshare rights) for that.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../setup.sh"
bench_build ddprun
torchrun=$(venv_program torchrun)
exec unshare --net -- /bin/sh -c 'ip link set lo up && exec "$@"' sh \
  /usr/bin/python3 "$here/bench_watchdog.py" --ddprun "$build/bin/ddprun" --torchrun "$torchrun" "$@"
