#!/usr/bin/env bash
# A one-node Slurm cluster on this host, for CI (the executor contract suite)
# and bench/: munged, slurmctld and slurmd as root daemons, no cgroup
# confinement (proctrack/linuxproc, task/none), no accounting, Slurm's
# default scheduler settings. Four partitions on the node: `debug` (default)
# and `second` (for tests that choose a partition with a job label), and for
# preemption (PreemptType=preempt/partition_prio) `low` (PriorityTier=1,
# PreemptMode=REQUEUE, GraceTime=30: its jobs get SIGTERM, then SIGKILL 30 s
# later, when a job of a higher tier needs their resources; of those still
# running then, Slurm requeues the ones that allow it and kills the
# --no-requeue ones such as Stoker's) and
# `high` (PriorityTier=2). Jobs in debug, second and high are never preempted
# (PreemptMode=OFF), so only what runs in `low` can be.
#
#   scripts/slurm-localhost.sh [--cpus N] [--memory-mb M] [--force]   start (or restart afresh)
#   scripts/slurm-localhost.sh --stop [--force] [--purge-packages]    stop what a start started
#
# Start installs slurm-wlm and munge with apt-get when missing, writes
# /etc/slurm/slurm.conf and cgroup.conf for this host and the installed Slurm
# version, clears slurmctld's state, starts the daemons and waits (at most
# 60 s) for the node to be idle. --cpus/--memory-mb declare a bigger node than
# the hardware (SlurmdParameters=config_overrides) so that multi-replica jobs
# fit on a small CI machine; without them the node is what `slurmd -C` sees.
# Idempotent: a second start stops the first (by pid files).
#
# It manages only a cluster it set up: a slurm.conf or cgroup.conf it did not
# write (no "Written by stoker" first line) is neither overwritten nor are its
# daemons stopped, unless --force. Stop cancels every job squeue lists (any
# user) and waits for them to leave before it stops the daemons. Needs root
# (run it with sudo otherwise).
set -euo pipefail

cpus="" memory_mb="" stop=0 purge=0 force=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --cpus) cpus=$2; shift ;;
    --memory-mb) memory_mb=$2; shift ;;
    --stop) stop=1 ;;
    --force) force=1 ;;
    --purge-packages) purge=1 ;;
    --keep-packages) ;;
    *) echo "slurm-localhost.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

conf_dir=/etc/slurm
marker="# Written by stoker scripts/slurm-localhost.sh"

# ours FILE: true when FILE is missing or was written by this script.
ours() { [[ ! -e $1 ]] || [[ $(head -1 "$1") == "$marker"* ]]; }

refuse_foreign() {  # refuse_foreign WHAT: stop unless the config files are ours or --force
  local f
  [[ $force == 1 ]] && return 0
  for f in "$conf_dir/slurm.conf" "$conf_dir/cgroup.conf"; do
    if ! ours "$f"; then
      echo "slurm-localhost.sh: $f was not written by this script (it may belong to a real" \
        "cluster); refusing to $1. Move it away, or pass --force." >&2
      exit 1
    fi
  done
}

stop_pidfile() {  # stop_pidfile FILE: SIGTERM the pid in FILE, wait up to 10s
  local file=$1 pid
  [[ -s $file ]] || return 0
  pid=$(cat "$file")
  [[ $pid =~ ^[0-9]+$ ]] || return 0
  kill -TERM "$pid" 2>/dev/null || { rm -f "$file"; return 0; }
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  rm -f "$file"
}

stop_all() {
  # Jobs first, every user's, so that no slurmstepd is left behind; then wait
  # (at most 30 s) until squeue lists none.
  if command -v scancel >/dev/null && [[ -s /run/slurmctld.pid ]]; then
    local ids
    ids=$(squeue -h -o %A 2>/dev/null || true)
    if [[ -n $ids ]]; then
      # shellcheck disable=SC2086
      scancel $ids >/dev/null 2>&1 || true
      for _ in $(seq 300); do
        [[ -z $(squeue -h -o %A 2>/dev/null || true) ]] && break
        sleep 0.1
      done
    fi
  fi
  stop_pidfile /run/slurmd.pid
  stop_pidfile /run/slurmctld.pid
  stop_pidfile /run/munge/munged.pid
}

if [[ $(id -u) -ne 0 ]]; then
  echo "slurm-localhost.sh: must run as root (it installs packages and starts daemons)" >&2
  exit 1
fi

if [[ $stop == 1 ]]; then
  refuse_foreign "stop its daemons"
  stop_all
  if [[ $purge == 1 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq slurm-wlm slurmctld slurmd slurm-client munge >/dev/null
  fi
  echo "slurm stopped"
  exit 0
fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

refuse_foreign "overwrite it"
stop_all >/dev/null 2>&1 || true

host=$(hostname -s)
mkdir -p "$conf_dir" /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge

# munge: a key if missing, then the daemon as the munge user.
if [[ ! -s /etc/munge/munge.key ]]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
munge_user=munge
id munge >/dev/null 2>&1 || munge_user=root
chown -R "$munge_user:" /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0700 /etc/munge
chmod 0400 /etc/munge/munge.key
if [[ $munge_user == root ]]; then
  munged --force
else
  runuser -u munge -- munged
fi
for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
munge -n | unmunge >/dev/null

# The node line as slurmd sees this machine (real CPUs, sockets, RealMemory),
# or a declared size.
node_line=$(slurmd -C | head -1 | sed -E "s/^NodeName=[^ ]+/NodeName=$host/")
overrides=""
if [[ -n $cpus || -n $memory_mb ]]; then
  real_mem=$(sed -nE 's/.*RealMemory=([0-9]+).*/\1/p' <<<"$node_line")
  node_line="NodeName=$host CPUs=${cpus:-$(nproc)} RealMemory=${memory_mb:-$real_mem}"
  overrides="SlurmdParameters=config_overrides"
fi

cat >"$conf_dir/slurm.conf" <<CONF
$marker: one node, defaults elsewhere.
ClusterName=localhost
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
MaxJobCount=100000
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
$overrides
$node_line NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=OFF
PartitionName=second Nodes=$host Default=NO MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=OFF
PartitionName=low Nodes=$host Default=NO MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE GraceTime=30
PartitionName=high Nodes=$host Default=NO MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
CONF

# cgroup.conf: with proctrack/linuxproc and task/none no job is confined, but
# slurmd still initialises a cgroup plugin. Slurm 24.05 and later can turn it
# off (CgroupPlugin=disabled). Older releases reject that value: there the
# plugin must match the host. cgroup v1 or hybrid hosts get cgroup/v1; a pure
# cgroup v2 host gets cgroup/v2 with IgnoreSystemd, since slurmd is started
# here by hand, not as a systemd unit, and must not ask systemd (dbus) for
# a scope.
version=$(slurmd -V | sed -nE 's/^slurm[^0-9]*([0-9]+)\.([0-9]+).*/\1 \2/p')
read -r major minor <<<"${version:-0 0}"
cgroup_fs=$(stat -fc %T /sys/fs/cgroup 2>/dev/null || echo none)
if ((major > 24 || (major == 24 && minor >= 5))); then
  cgroup_lines="CgroupPlugin=disabled"
elif [[ $cgroup_fs == cgroup2fs ]]; then
  cgroup_lines=$'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes'
  # 22.05 enables the controllers it needs with CgroupAutomount (man cgroup.conf).
  ((major == 22)) && cgroup_lines+=$'\nCgroupAutomount=yes'
else
  cgroup_lines="CgroupPlugin=cgroup/v1"
fi
cat >"$conf_dir/cgroup.conf" <<CONF
$marker for slurm $major.$minor on a $cgroup_fs /sys/fs/cgroup.
$cgroup_lines
CONF

# -c: start with no jobs from an earlier run (and no cluster name either: a
# state dir left by another ClusterName would stop slurmctld).
rm -f /var/spool/slurmctld/clustername
slurmctld -c || { echo "slurm-localhost.sh: slurmctld did not start; see /var/log/slurm/slurmctld.log" >&2; exit 1; }
slurmd || {
  echo "slurm-localhost.sh: slurmd did not start; the end of /var/log/slurm/slurmd.log:" >&2
  tail -n 15 /var/log/slurm/slurmd.log >&2 || true
  echo "(cgroup.conf says: $(tail -n +2 "$conf_dir/cgroup.conf" | tr '\n' ' '))" >&2
  exit 1
}

state=""
for _ in $(seq 600); do
  state=$(sinfo -h -N -o %t 2>/dev/null | head -1 || true)
  if [[ $state == idle ]]; then
    echo "slurm ready: node $host idle ($(sinfo -V))"
    exit 0
  fi
  sleep 0.1
done
echo "slurm-localhost.sh: node $host did not become idle within 60s (state '${state:-?}');" \
  "see /var/log/slurm/slurmctld.log and slurmd.log" >&2
sinfo -N -l >&2 || true
exit 1
