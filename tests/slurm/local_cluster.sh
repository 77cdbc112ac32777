#!/usr/bin/env bash
# A throwaway Slurm cluster for tests: munged, slurmctld and slurmd, with config, munge
# key, state, spool, sockets, pid files and logs all under one directory (nothing in
# /etc/munge, /etc/slurm, /run or systemd). Tests that need a real Slurm use it so:
#   tests/slurm/local_cluster.sh check || skip          # are the programs installed?
#   eval "$(tests/slurm/local_cluster.sh start DIR)"     # or later: . DIR/env.sh
#   sbatch/squeue/scontrol/srun ...                      # SLURM_CONF points at DIR
#   tests/slurm/local_cluster.sh stop DIR                # idempotent
# By default one node, this machine, on loopback. With `start DIR NAME N` the nodes are
# the N simulated hosts NAME-h0.. of tests/multinode/hosts.sh (made beforehand): one
# slurmd in each host's network namespace (with its own host name, and the cgroup
# mounts slurmd wants, which `ip netns exec` hides), slurmctld in host 0's; clients
# (sbatch, srun, a sweep) then run on host 0 (hosts.sh exec NAME 0 ...).
# start waits (up to 30 s) for the nodes to be idle; on failure it prints why and the
# tail of the daemon's log, stops what it started and exits non-zero. stop cancels the
# jobs, then stops the daemons by the pids recorded under DIR (TERM, then KILL).
set -euo pipefail

# The node is named after this host, so that a job's node list names a host that resolves (a
# data-parallel job's master address is the first host of SLURM_JOB_NODELIST).
NODE=$(hostname -s)
PROGS=(munged slurmctld slurmd sbatch squeue scontrol srun sinfo scancel)

die() { echo "local_cluster.sh: $*" >&2; exit 1; }

check() {
  local p missing=()
  for p in "${PROGS[@]}"; do command -v "$p" >/dev/null || missing+=("$p"); done
  ((EUID == 0)) || missing+=("root (slurmd and SlurmUser=root)")
  [[ ${#missing[@]} -eq 0 ]] || { echo "missing: ${missing[*]}" >&2; return 1; }
}

# Ports that no TCP socket (any state, v4 or v6) uses, outside the ephemeral range.
free_ports() {
  local used=" " p line
  while read -r _ line _; do used+="$((16#${line##*:})) "; done \
    < <(tail -q -n +2 /proc/net/tcp /proc/net/tcp6 2>/dev/null)
  local n=0 tries=0
  while ((n < $1 && tries++ < 1000)); do
    p=$((20000 + RANDOM % 12000))
    [[ $used == *" $p "* ]] && continue
    used+="$p "; echo "$p"; n=$((n + 1))
  done
  ((n == $1)) || die "no free TCP ports found"
}

# Is the pid in pid file $1 running (a zombie is not)?
alive() {
  local stat
  [[ -s $1 ]] && stat=$(cat "/proc/$(<"$1")/stat" 2>/dev/null) && [[ ${stat##*) } != Z* ]]
}

# TERM the daemons in the given "pidfile:name" pairs (a pid counts only if its command
# line names the daemon, in case the pid was reused), KILL what is left after 5 s.
stop_pids() {
  local fp pids=()
  for fp in "$@"; do
    if alive "${fp%%:*}" && tr '\0' ' ' <"/proc/$(<"${fp%%:*}")/cmdline" | grep -q "${fp##*:}"; then
      pids+=("$(<"${fp%%:*}")")
    fi
    rm -f "${fp%%:*}"
  done
  ((${#pids[@]})) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "${pids[@]}" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

stop() {
  local d=$1 pid
  [[ -d $d ]] || return 0
  export SLURM_CONF=$d/slurm.conf
  HNAME="" HOSTS=$(cd "$(dirname "$0")/../multinode" && pwd)/hosts.sh
  [[ ! -s $d/.hosts ]] || read -r HNAME _ <"$d/.hosts"
  local slurmds=() f
  for f in "$d"/run/slurmd*.pid; do [[ -e $f ]] && slurmds+=("$f:slurmd"); done
  if alive "$d/run/slurmctld.pid" && ((${#slurmds[@]})); then
    # Cancel the jobs so that their slurmstepd processes go with them.
    client scancel --user=root 2>/dev/null || true
    for _ in $(seq 100); do
      [[ -z $(client squeue -h -o %A 2>/dev/null) ]] && break; sleep 0.1
    done
  fi
  stop_pids ${slurmds[@]+"${slurmds[@]}"} "$d/run/slurmctld.pid:slurmctld" "$d/munge/munged.pid:munged"
  # A slurmstepd left behind (its slurmd died first) still has DIR/log/slurmd*.log open:
  # kill it and the processes of its job.
  local steps=()
  for pid in /proc/[0-9]*; do
    [[ $(readlink "$pid/exe" 2>/dev/null) == */slurmstepd* ]] || continue
    for f in "$pid"/fd/*; do
      [[ $(readlink "$f" 2>/dev/null) == "$d"/log/slurmd*.log ]] && { steps+=("${pid#/proc/}"); break; }
    done
  done
  ((${#steps[@]})) || return 0
  # shellcheck disable=SC2046
  kill -KILL $(ps -eo pid=,ppid= | awk -v roots="${steps[*]}" '
    BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) tree[r[i]] = 1 }
    { parent[$1] = $2 }
    END { do { grew = 0; for (p in parent) if (!(p in tree) && (parent[p] in tree)) { tree[p] = 1; grew = 1 } } while (grew)
          for (p in tree) print p }') 2>/dev/null || true
}

fail() {  # message, log file
  echo "local_cluster.sh: $1" >&2
  [[ -f $2 ]] && { echo "--- tail of $2:" >&2; tail -n 20 "$2" >&2; }
  stop "$D"
  exit 1
}

# Run a daemon (it forks itself into the background) with stdin, stdout and stderr
# only: munged keeps inherited descriptors, which could hold a test runner's pipe open.
spawn() {  # log, command...
  local log=$1; shift
  (
    for fd in "/proc/$BASHPID/fd"/*; do
      fd=${fd##*/}; ((fd > 2)) && eval "exec $fd>&-" 2>/dev/null
    done
    exec "$@"
  ) >>"$log" 2>&1 </dev/null
}

wait_for() {  # seconds, what, log, command...
  local secs=$1 what=$2 log=$3 end=$((SECONDS + $1)); shift 3
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || fail "timed out after $secs s waiting for $what" "$log"
    sleep 0.1
  done
}

# Sets HOST_CMD to the command prefix that runs a daemon on simulated host $1 (hosts mode):
# in its network namespace, under its own host name (slurmctld and slurmd check theirs
# against slurm.conf), with /sys/fs/cgroup laid out as slurmd's cgroup plugin expects it on
# this machine (v1 controllers on a tmpfs; `ip netns exec` mounts a fresh /sys without it).
host_cmd() {  # index
  HOST_CMD=("$HOSTS" exec "$HNAME" "$1" unshare --uts sh -c '
    hostname "$0"
    mount -t tmpfs none /sys/fs/cgroup || exit 1
    for c in cpu cpuacct cpuset memory devices freezer; do
      mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c || exit 1
    done
    mkdir -p /sys/fs/cgroup/systemd && mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd || exit 1
    exec "$@"' "$HNAME-h$1")
}

# A Slurm client command, on host 0 in hosts mode (only the hosts reach slurmctld there).
client() {
  if [[ -n ${HNAME:-} ]]; then "$HOSTS" exec "$HNAME" 0 "$@"; else "$@"; fi
}

start() {
  mkdir -p "$1"
  D=$(cd "$1" && pwd)
  HNAME=${2:-} HN=${3:-0}
  HOSTS=$(cd "$(dirname "$0")/../multinode" && pwd)/hosts.sh
  if [[ -n $HNAME ]]; then
    [[ $HN =~ ^[1-9][0-9]?$ ]] || die "usage: $0 start DIR [NAME N]: N hosts, 1-99"
    "$HOSTS" exec "$HNAME" $((HN - 1)) true 2>/dev/null || die "no simulated host $HNAME-h$((HN - 1)) (tests/multinode/hosts.sh up $HNAME $HN)"
  fi
  if [[ -n $HNAME ]]; then echo "$HNAME $HN" >"$D/.hosts"; else rm -f "$D/.hosts"; fi  # for stop
  # Unix socket paths (munge, slurmd spool) must fit in 108 bytes.
  ((${#D} <= 64)) || die "directory path too long for unix sockets (${#D} > 64): $D"
  check || die "Slurm/munge programs missing"
  # With NoInAddrAny the daemons and srun bind to the address the hostname resolves to.
  local addr
  addr=$(getent ahostsv4 "$(hostname)" | awk 'NR == 1 {print $1}')
  [[ -n $HNAME || $addr == 127.* ]] || die "hostname $(hostname) resolves to '${addr:-nothing}', not loopback"
  alive "$D/run/slurmctld.pid" && die "a cluster already runs in $D (stop it first)"
  stop "$D"
  rm -rf "$D/state" "$D/spool"
  mkdir -p "$D/munge" "$D/state" "$D/spool" "$D/run" "$D/log"
  chmod 755 "$D/munge"
  : >"$D/log/slurmctld.log"; : >"$D/munge/munged.log"
  rm -f "$D"/log/slurmd*.log

  local sock=$D/munge/munge.socket.2 ports cpus mem
  [[ -s $D/munge/munge.key ]] || {
    dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none
    chmod 0400 "$D/munge/munge.key"
  }
  spawn "$D/munge/munged.log" munged --force --key-file="$D/munge/munge.key" \
    --socket="$sock" --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" \
    --seed-file="$D/munge/munged.seed" --origin=127.0.0.1 \
    || fail "munged did not start" "$D/munge/munged.log"
  wait_for 10 munged "$D/munge/munged.log" bash -c "munge -n -S '$sock' | unmunge -S '$sock'"

  mapfile -t ports < <(free_ports 2)
  cpus=$(nproc)
  mem=$(awk '/MemTotal/ {m = int($2 / 2048); print (m < 1024 ? m : 1024)}' /proc/meminfo)
  : >"$D/plugstack.conf"
  # Loopback: one node, this machine, and the daemons bound to its address only. Hosts: a
  # node per host at its address, each slurmd with its own spool, pid file and log (%n).
  local ctld="localhost(127.0.0.1)" comm="CommunicationParameters=NoCtldInAddrAny,NoInAddrAny"
  local spool=$D/spool pidf=$D/run/slurmd.pid logf=$D/log/slurmd.log names=$NODE i
  local nodes="NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$(hostname) CPUs=$cpus RealMemory=$mem State=UNKNOWN"
  if [[ -n $HNAME ]]; then
    ctld="$HNAME-h0(10.231.0.1)" comm="# (each daemon binds every address of its own namespace)"
    spool=$D/spool/%n pidf=$D/run/slurmd-%n.pid logf=$D/log/slurmd-%n.log names="$HNAME-h[0-$((HN - 1))]" nodes=""
    for ((i = 0; i < HN; i++)); do
      nodes+="NodeName=$HNAME-h$i NodeAddr=10.231.0.$((i + 1)) NodeHostname=$HNAME-h$i CPUs=$cpus RealMemory=$mem State=UNKNOWN"$'\n'
      mkdir -p "$D/spool/$HNAME-h$i"
    done
  fi
  cat >"$D/slurm.conf" <<EOF
# Generated by tests/slurm/local_cluster.sh: a throwaway cluster.
ClusterName=wavetrain
SlurmctldHost=$ctld
SlurmctldPort=${ports[0]}
SlurmdPort=${ports[1]}
$comm
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$spool
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$pidf
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$logf
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$D/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=300
InactiveLimit=0
MailProg=/bin/true
SchedulerParameters=batch_sched_delay=0
${nodes%$'\n'}
PartitionName=main Nodes=$names Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$D/slurm.conf
  HOST_CMD=()
  [[ -z $HNAME ]] || host_cmd 0
  spawn "$D/log/slurmctld.log" ${HOST_CMD[@]+"${HOST_CMD[@]}"} slurmctld -c || fail "slurmctld did not start" "$D/log/slurmctld.log"
  wait_for 15 slurmctld "$D/log/slurmctld.log" bash -c "$(declare -f client); HNAME='$HNAME' HOSTS='$HOSTS'; client scontrol ping | grep -q UP"
  if [[ -z $HNAME ]]; then
    spawn "$D/log/slurmd.log" slurmd -N "$NODE" || fail "slurmd did not start" "$D/log/slurmd.log"
  else
    for ((i = 0; i < HN; i++)); do
      host_cmd "$i"
      spawn "$D/log/slurmd-$HNAME-h$i.log" "${HOST_CMD[@]}" slurmd -N "$HNAME-h$i" || fail "slurmd on $HNAME-h$i did not start" "$D/log/slurmd-$HNAME-h$i.log"
    done
  fi
  local end=$((SECONDS + 30)) state
  until state=$(client sinfo -h -o %t 2>&1) && [[ $state == idle ]]; do
    ((SECONDS < end)) || fail "nodes $names not idle after 30 s (sinfo: ${state:-no output})" "$(ls "$D"/log/slurmd*.log | tail -1)"
    sleep 0.1
  done

  echo "export SLURM_CONF=$SLURM_CONF" | tee "$D/env.sh"
}

case ${1:-} in
  check) check ;;
  start) [[ -n ${2:-} ]] || die "usage: $0 start DIR [NAME N]"; start "$2" "${3:-}" "${4:-}" ;;
  stop) [[ -n ${2:-} ]] || die "usage: $0 stop DIR"; stop "$(cd "$2" 2>/dev/null && pwd || echo "$2")" ;;
  *) die "usage: $0 check | start DIR [NAME N] | stop DIR" ;;
esac
