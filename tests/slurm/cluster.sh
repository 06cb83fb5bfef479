#!/bin/bash
# cluster.sh -- a real, throw-away Slurm cluster (1 slurmctld + N slurmd) for ddprun's tests.
#
#   cluster.sh start  LAB [--owner PID]   start a cluster whose state lives in the folder LAB
#   cluster.sh stop   LAB                 stop everything this cluster started, by PID
#   cluster.sh status LAB
#   cluster.sh exec   LAB CMD...          run CMD as a Slurm client (srun, sbatch, squeue, ...)
#   cluster.sh node-exec LAB NODE CMD...  run CMD inside compute node NODE (its net/uts/mount ns)
#   cluster.sh node-pids LAB NODE         the PIDs running inside NODE other than its slurmd
#
# Layout: every piece of the cluster lives in network namespaces this script creates, so nothing
# it does is visible on the machine's own network and several clusters can run side by side
# (ctest -j2) with the same addresses and ports:
#   namespace <id>-ctl    bridge br0 with 10.200.0.1/24; slurmctld runs here, with hostname
#                         "ctl", and so do the Slurm clients started with `exec` (srun, sbatch).
#   namespace <id>-nodeI  eth0 with 10.200.0.(10+I)/24, a veth whose peer is on br0; slurmd
#                         runs here with hostname nodeI.
# Each namespace also gets its own UTS and mount namespace, in which the lab's hosts file is
# bind-mounted on /etc/hosts and the lab's config folder on /etc/slurm (so plain `srun` works
# inside, with no SLURM_CONF). The namespaces have no default route: no packet leaves them.
# munged is shared by all of them through a socket in LAB.
#
# --owner PID starts a watchdog that stops the cluster when PID exits, so a test killed by its
# timeout still leaves nothing behind. `stop` signals a PID only after checking, through
# /proc/PID/exe or the namespace the PID lives in, that this cluster started it.
#
# Knobs: DDPRUN_SLURM_NODES (default 2), DDPRUN_SLURM_DEBUG (default info).
set -euo pipefail
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

NNODES=${DDPRUN_SLURM_NODES:-2}
DEBUG=${DDPRUN_SLURM_DEBUG:-info}
NET=10.200.0
SELF=$(readlink -f "$0")

log() { printf '[cluster %s] %s\n' "$(date +%T.%N | cut -c1-12)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
now() { date +%s.%N; }
dt() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

usage() {
  sed -n '3,9p' "$SELF" >&2
  exit 2
}

[ $# -ge 2 ] || usage
CMD=$1
LAB=$(readlink -m "$2")
shift 2

CONF=$LAB/etc/slurm/slurm.conf
MSOCK=$LAB/munge/munge.socket.2
MARKER=$LAB/.ddprun-slurm-cluster

# The real executables: Debian installs /usr/sbin/slurmd etc. as alternatives symlinks to
# *-wlm, and /proc/PID/exe shows the target.
exe_of() { readlink -f "$(command -v "$1")" || die "$1 is not installed (scripts/install-deps.sh)"; }

nodes() { local i; for ((i = 1; i <= NNODES; i++)); do echo "node$i"; done; }
ns_name() { echo "$(cat "$LAB/id")-$1"; }   # $1: ctl | nodeI

alive() {  # a zombie counts as gone: PID 1 here reaps exited daemons late
  local st
  st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}
is_exe() { [ "$(readlink "/proc/$1/exe" 2>/dev/null)" = "$2" ]; }
pidfile_pid() { if [ -s "$1" ]; then cat "$1"; fi; }
stop_pid() {  # pid exe label: SIGTERM, up to 5 s, then SIGKILL
  local p=$1 exe=$2 what=$3 i
  [ -n "$p" ] && alive "$p" && is_exe "$p" "$exe" || return 0
  kill -TERM "$p" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    alive "$p" || return 0
    sleep 0.1
  done
  log "$what (pid $p) ignored SIGTERM, sending SIGKILL"
  kill -KILL "$p" 2>/dev/null || true
}
ns_pids() { # live PIDs in one of our network namespaces
  local p
  [ -e "/run/netns/$1" ] || return 0
  for p in $(ip netns pids "$1" 2>/dev/null); do if alive "$p"; then echo "$p"; fi; done
}

# --- start -------------------------------------------------------------------------------------
start_munge() {
  mkdir -p "$LAB/munge"
  chmod 755 "$LAB" "$LAB/munge"   # munged insists on o+x along the path to its socket
  mungekey -c -k "$LAB/munge/munge.key" 2>/dev/null ||
    dd if=/dev/urandom of="$LAB/munge/munge.key" bs=1 count=1024 status=none
  chmod 600 "$LAB/munge/munge.key"
  munged --key-file="$LAB/munge/munge.key" --socket="$MSOCK" --pid-file="$LAB/run/munged.pid" \
    --log-file="$LAB/log/munged.log" --seed-file="$LAB/munge/munged.seed" --num-threads=4
  munge -S "$MSOCK" -n | unmunge -S "$MSOCK" >/dev/null || die "munge self-test failed"
}

net_up() {
  local ctl i n
  ctl=$(ns_name ctl)
  ip netns add "$ctl"
  ip -n "$ctl" link set lo up
  ip -n "$ctl" link add br0 type bridge
  ip -n "$ctl" addr add "$NET.1/24" dev br0
  ip -n "$ctl" link set br0 up
  for ((i = 1; i <= NNODES; i++)); do
    n=$(ns_name "node$i")
    ip netns add "$n"
    ip -n "$ctl" link add "p$i" type veth peer name eth0 netns "$n"
    ip -n "$ctl" link set "p$i" master br0 up
    ip -n "$n" addr add "$NET.$((10 + i))/24" dev eth0
    ip -n "$n" link set eth0 up
    ip -n "$n" link set lo up
  done
}

write_conf() {
  local i mem cpus
  cpus=$(nproc)
  mem=$(awk -v n="$NNODES" '/MemTotal/ { print int($2 / 1024 / n * 0.9) }' /proc/meminfo)
  mkdir -p "$LAB/etc/slurm"
  : >"$LAB/etc/slurm/plugstack.conf"
  cat >"$CONF" <<EOF
# written by ddprun tests/slurm/cluster.sh
ClusterName=ddprun
SlurmctldHost=ctl($NET.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MSOCK
StateSaveLocation=$LAB/state
SlurmdSpoolDir=$LAB/spool/%n
SlurmctldPidFile=$LAB/run/slurmctld.pid
SlurmdPidFile=$LAB/run/slurmd-%n.pid
SlurmctldLogFile=$LAB/log/slurmctld.log
SlurmdLogFile=$LAB/log/slurmd-%n.log
PlugStackConfig=$LAB/etc/slurm/plugstack.conf
# linuxproc signals a task's whole process tree; no cgroups are needed
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
# batch jobs start at once instead of on the default 3 s batch_sched_delay tick
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=30
# time between SIGTERM and SIGKILL on scancel / time limit: long enough for a snapshot
KillWait=15
Waittime=0
SlurmctldDebug=$DEBUG
SlurmdDebug=$DEBUG
EOF
  {
    echo "127.0.0.1 localhost"
    echo "$NET.1 ctl"
  } >"$LAB/etc/hosts"
  for ((i = 1; i <= NNODES; i++)); do
    echo "NodeName=node$i NodeHostname=node$i NodeAddr=$NET.$((10 + i)) CPUs=$cpus" \
      "RealMemory=$mem State=UNKNOWN" >>"$CONF"
    echo "$NET.$((10 + i)) node$i" >>"$LAB/etc/hosts"
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$CONF"
}

# Runs a daemon in namespace $1 with hostname $2 and the lab's /etc/hosts and /etc/slurm.
# nsenter --net, not `ip netns exec`: the latter remounts /sys, hiding /sys/fs/cgroup, and
# slurmd 22.05 then refuses to start.
in_new_host() {
  local ns=$1 host=$2
  shift 2
  nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private \
    /bin/sh -c 'hostname "$1" && mount --bind "$2" /etc/hosts && mount --bind "$3" /etc/slurm &&
                shift 3 && exec "$@"' sh "$host" "$LAB/etc/hosts" "$LAB/etc/slurm" "$@"
}

client() { # runs a Slurm client command inside slurmctld's namespaces
  local p
  p=$(pidfile_pid "$LAB/run/slurmctld.pid")
  [ -n "$p" ] && alive "$p" || die "slurmctld of $LAB is not running"
  nsenter -t "$p" --net --uts --mount -- env SLURM_CONF="$CONF" "$@"
}

start_watchdog() { # stops the cluster when the owner process exits, however it exits
  local owner=$1
  alive "$owner" || die "--owner $owner is not a running process"
  setsid /bin/bash -c 'tail --pid="$1" -f /dev/null; exec "$2" stop "$3"' \
    watchdog "$owner" "$SELF" "$LAB" </dev/null >>"$LAB/log/watchdog.log" 2>&1 &
  echo $! >"$LAB/run/watchdog.pid"
}

cmd_start() {
  local owner="" t0 i up=0 n
  while [ $# -gt 0 ]; do
    case $1 in
      --owner) owner=${2:?--owner needs a PID}; shift 2 ;;
      *) usage ;;
    esac
  done
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces, bind mounts, SlurmUser=root)"
  local tool
  for tool in slurmctld slurmd slurmstepd munged mungekey srun sbatch nsenter unshare ip; do
    command -v "$tool" >/dev/null || die "$tool is not installed (scripts/install-deps.sh)"
  done
  if [ -e "$LAB" ] && [ -n "$(ls -A "$LAB")" ]; then
    [ -e "$MARKER" ] || die "$LAB exists, is not empty and is not a cluster folder"
    [ "$(cat "$LAB/state.txt" 2>/dev/null)" = stopped ] || die "a cluster in $LAB may be running; stop it first"
    rm -rf "$LAB"
  fi
  t0=$(now)
  mkdir -p "$LAB"/{etc/slurm,log,run,state,spool,munge,job}
  touch "$MARKER"
  echo starting >"$LAB/state.txt"
  echo "$NNODES" >"$LAB/nnodes"
  # namespace names are unique per lab folder, so parallel clusters never collide
  echo "ddps$(echo "$LAB" | md5sum | cut -c1-8)" >"$LAB/id"
  [ ! -e "/run/netns/$(ns_name ctl)" ] || die "namespace $(ns_name ctl) exists; run: $0 stop $LAB"
  # from here on, a failure tears down whatever was started
  trap 'rc=$?; if [ $rc -ne 0 ]; then log "start failed (rc=$rc), stopping what was started"; cmd_stop; fi' EXIT
  [ -z "$owner" ] || start_watchdog "$owner"
  start_munge
  net_up
  write_conf
  in_new_host "$(ns_name ctl)" ctl slurmctld -f "$CONF"
  for ((i = 0; i < 150; i++)); do
    [ -s "$LAB/run/slurmctld.pid" ] && client scontrol ping 2>/dev/null | grep -q UP && break
    sleep 0.1
  done
  client scontrol ping 2>/dev/null | grep -q UP || die "slurmctld does not answer, see $LAB/log/slurmctld.log"
  for n in $(nodes); do
    mkdir -p "$LAB/spool/$n"
    in_new_host "$(ns_name "$n")" "$n" slurmd -f "$CONF" -N "$n"
  done
  for ((i = 0; i < 300; i++)); do
    up=$(client sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)
    [ "$up" -ge "$NNODES" ] && break
    sleep 0.1
  done
  [ "$up" -ge "$NNODES" ] || { client sinfo -N >&2 || true; die "only $up of $NNODES nodes idle, see $LAB/log/"; }
  trap - EXIT
  echo running >"$LAB/state.txt"
  log "cluster of $NNODES nodes ready in $(dt "$t0" "$(now)") s in $LAB"
}

# --- stop --------------------------------------------------------------------------------------
cmd_stop() {
  local p n ns i jobs exe_stepd
  [ -e "$MARKER" ] || { log "nothing to stop: $LAB is not a cluster folder"; return 0; }
  [ -s "$LAB/nnodes" ] && NNODES=$(cat "$LAB/nnodes")
  echo stopping >"$LAB/state.txt"
  p=$(pidfile_pid "$LAB/run/slurmctld.pid")
  if [ -n "$p" ] && alive "$p" && is_exe "$p" "$(exe_of slurmctld)"; then
    # cancel the jobs first so the steps end the normal way (KillWait applies)
    jobs=$(client squeue -h -o %A 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086
      client scancel --quiet --full $jobs 2>/dev/null || true
      for ((i = 0; i < 200; i++)); do
        [ -z "$(client squeue -h -o %A 2>/dev/null || true)" ] && break
        sleep 0.1
      done
    fi
  fi
  for n in $(nodes); do
    stop_pid "$(pidfile_pid "$LAB/run/slurmd-$n.pid")" "$(exe_of slurmd)" "slurmd $n"
  done
  # Whatever still lives in our node namespaces was started by this cluster (stepds, tasks).
  exe_stepd=$(exe_of slurmstepd)
  for n in $(nodes); do
    ns=$(ns_name "$n")
    for p in $(ns_pids "$ns"); do
      is_exe "$p" "$exe_stepd" && continue   # after its tasks, or it would respawn nothing
      log "killing leftover pid $p in $n: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-80)"
      kill -KILL "$p" 2>/dev/null || true
    done
    for p in $(ns_pids "$ns"); do kill -KILL "$p" 2>/dev/null || true; done
  done
  stop_pid "$(pidfile_pid "$LAB/run/slurmctld.pid")" "$(exe_of slurmctld)" slurmctld
  for p in $(ns_pids "$(ns_name ctl)"); do
    log "killing leftover pid $p in ctl: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-80)"
    kill -KILL "$p" 2>/dev/null || true
  done
  stop_pid "$(pidfile_pid "$LAB/run/munged.pid")" "$(exe_of munged)" munged
  for n in ctl $(nodes); do
    for ((i = 0; i < 50; i++)); do
      [ -z "$(ns_pids "$(ns_name "$n")")" ] && break
      sleep 0.1
    done
    ip netns del "$(ns_name "$n")" 2>/dev/null || true
  done
  # the watchdog last: it may be the process running this very stop
  p=$(pidfile_pid "$LAB/run/watchdog.pid")
  if [ -n "$p" ] && [ "$p" != "$$" ] && [ "$p" != "$PPID" ] && alive "$p" &&
    grep -qaF "$LAB" "/proc/$p/cmdline" 2>/dev/null; then
    kill -TERM -- "-$p" 2>/dev/null || true   # its process group: bash and its tail
  fi
  echo stopped >"$LAB/state.txt"
  log "stopped (logs kept in $LAB/log)"
}

cmd_status() {
  local n f p
  echo "lab=$LAB state=$(cat "$LAB/state.txt" 2>/dev/null || echo none)"
  for f in munged slurmctld $(for n in $(nodes); do echo "slurmd-$n"; done); do
    p=$(pidfile_pid "$LAB/run/$f.pid")
    if [ -n "$p" ] && alive "$p"; then echo "  up   $f pid $p"; else echo "  down $f"; fi
  done
  client sinfo -N -o '%N %T %c' 2>/dev/null || true
}

node_pid() { # the slurmd of node $1: its namespaces are the node's
  local p
  p=$(pidfile_pid "$LAB/run/slurmd-$1.pid")
  [ -n "$p" ] && alive "$p" || die "slurmd of $1 is not running"
  echo "$p"
}

cmd_node_pids() {
  local n=${1:?node name} p slurmd
  [ -s "$LAB/nnodes" ] && NNODES=$(cat "$LAB/nnodes")
  slurmd=$(pidfile_pid "$LAB/run/slurmd-$n.pid")
  for p in $(ns_pids "$(ns_name "$n")"); do [ "$p" = "$slurmd" ] || echo "$p"; done
}

[ -s "$LAB/nnodes" ] && NNODES=$(cat "$LAB/nnodes")
case $CMD in
  start) cmd_start "$@" ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  exec) [ $# -ge 1 ] || usage; client "$@" ;;
  node-exec)
    [ $# -ge 2 ] || usage
    node=$1
    shift
    nsenter -t "$(node_pid "$node")" --net --uts --mount -- "$@"
    ;;
  node-pids) cmd_node_pids "$@" ;;
  *) usage ;;
esac
