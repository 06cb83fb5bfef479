#!/bin/bash
# A job with a job secret, quiet and under a flood of strangers against the store its agent
# hosts (thousands of idle connections, challenges never answered, 8 MiB writes to PyTorch's
# keys and to the agents' keys): the time from the second agent's start until both workers
# started, as medians over RUNS pairs (default 10), and their ratio. The flood comes from the
# test's own threads on this machine, so it also takes CPU from the job.
# Usage: bench/rendezvous/flood.sh [BUILD_DIR] [RUNS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../setup.sh"
cmake -S "$root" -B "$build" -DBUILD_TESTING=ON >/dev/null
bench_build ddprun ddprun-store agent_store_squatters_test
runs=${1:-10}
quiet=() flooded=() connections=()
for _ in $(seq "$runs"); do
  line=$(unshare --net bash -c "ip link set lo up && '$build/tests/agent_store_squatters_test' '*flood*'" 2>&1 |
    tr '\n' ' ' | grep -o 'rendezvous and spawn: [0-9.e-]* s quiet, [0-9.e-]* s under a flood of [0-9]*')
  read -r q f c < <(echo "$line" | awk '{print $4, $7, $13}')
  quiet+=("$q") flooded+=("$f") connections+=("$c")
done
python3 - "${quiet[*]}" "${flooded[*]}" "${connections[*]}" <<'PY'
import statistics, sys
quiet, flooded, connections = ([float(x) for x in arg.split()] for arg in sys.argv[1:4])
q, f = statistics.median(quiet), statistics.median(flooded)
print("| runs | quiet median (s) | flooded median (s) | ratio | flood connections (median) |")
print("|---|---|---|---|---|")
print(f"| {len(quiet)} | {q:.4f} | {f:.4f} | {f / q:.2f} | {statistics.median(connections):.0f} |")
PY
