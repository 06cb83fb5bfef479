#!/bin/bash
# The long chaos run of the etcd rendezvous: the CI test `agent_etcd_e2e_test "etcd chaos*"`
# (3 agents training on a 3-member etcd; SIGKILLs of workers, agents with the head among them,
# and etcd members, each followed by a check that the job resumed from its last snapshot) with
# more faults and a seed of your choice. Prints the test's verdict and its duration.
# Usage: bench/chaos/run.sh [BUILD_DIR] [FAULTS (default 200)] [SEED (default: the time)]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../setup.sh"
faults=${1:-200}
seed=${2:-$(date +%s)}
# The chaos run is a test: a build folder that scripts/build.sh made without them gets them.
cmake -S "$root" -B "$build" -DBUILD_TESTING=ON >/dev/null
bench_build agent_etcd_e2e_test ddprun ddprun-train
echo "bench/chaos: $faults faults, seed $seed; $(uptime)"
start=$(date +%s)
status=0
DDPRUN_CHAOS_FAULTS=$faults DDPRUN_CHAOS_SEED=$seed unshare --net -- /bin/sh -c \
  'ip link set lo up && exec "$@"' sh "$build/tests/agent_etcd_e2e_test" "etcd chaos*" || status=$?
echo "bench/chaos: $faults faults, seed $seed: $([ $status -eq 0 ] && echo passed || echo FAILED) in $(($(date +%s) - start)) s"
exit $status
