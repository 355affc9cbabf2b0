#!/usr/bin/env bash
# A one-node Slurm cluster on this host, for CI (the executor contract suite)
# and bench/: munged, slurmctld and slurmd as root daemons, no cgroups, no
# accounting, Slurm's default scheduler settings.
#
#   scripts/slurm-localhost.sh [--cpus N] [--memory-mb M]   start (or restart afresh)
#   scripts/slurm-localhost.sh --stop [--purge-packages]     stop what a start started
#
# Start installs slurm-wlm and munge with apt-get when missing, writes
# /etc/slurm/slurm.conf for this host, clears slurmctld's state, starts the
# daemons and waits (at most 60 s) for the node to be idle. --cpus/--memory-mb
# declare a bigger node than the hardware (SlurmdParameters=config_overrides)
# so that multi-replica jobs fit on a small CI machine; without them the node
# is what `slurmd -C` sees. Idempotent: a second start stops the first (by pid
# files). Needs root.
set -euo pipefail

cpus="" memory_mb="" stop=0 purge=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --cpus) cpus=$2; shift ;;
    --memory-mb) memory_mb=$2; shift ;;
    --stop) stop=1 ;;
    --purge-packages) purge=1 ;;
    --keep-packages) ;;
    *) echo "slurm-localhost.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

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
  # Jobs first, so that no slurmstepd is left behind.
  if command -v scancel >/dev/null && [[ -s /run/slurmctld.pid ]]; then
    scancel --user=root >/dev/null 2>&1 || true
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

stop_all >/dev/null 2>&1 || true

host=$(hostname -s)
conf_dir=/etc/slurm
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
# Written by stoker scripts/slurm-localhost.sh: one node, defaults elsewhere.
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
$overrides
$node_line NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
# No cgroup.conf: slurmd 22.05 always loads a cgroup plugin (autodetected) and
# rejects CgroupPlugin=disabled (only newer releases know it); with
# proctrack/linuxproc and task/none nothing uses it.
if [[ -e $conf_dir/cgroup.conf ]] && grep -q '^CgroupPlugin=disabled' "$conf_dir/cgroup.conf"; then
  rm -f "$conf_dir/cgroup.conf"
fi

# -c: start with no jobs from an earlier run (and no cluster name either: a
# state dir left by another ClusterName would stop slurmctld).
rm -f /var/spool/slurmctld/clustername
slurmctld -c || { echo "slurm-localhost.sh: slurmctld did not start; see /var/log/slurm/slurmctld.log" >&2; exit 1; }
slurmd || { echo "slurm-localhost.sh: slurmd did not start; see /var/log/slurm/slurmd.log" >&2; exit 1; }

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
