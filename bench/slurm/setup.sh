#!/usr/bin/env bash
# Installs (if needed) and (re)starts a one-node Slurm cluster on this host for
# bench/: munged, slurmctld and slurmd as root daemons, no cgroups, no
# accounting. Idempotent: running it again stops what an earlier run started
# (by the pid files below), clears slurmctld's state and starts afresh.
# Scheduler settings are Slurm's defaults (sched/backfill, default
# SchedulerParameters), so the numbers are what an untuned install gives.
# Needs root. Undo with bench/slurm/teardown.sh.
set -euo pipefail

if [[ $(id -u) -ne 0 ]]; then
  echo "setup.sh: must run as root (it installs packages and starts daemons)" >&2
  exit 1
fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

here=$(cd "$(dirname "$0")" && pwd)
"$here/teardown.sh" --keep-packages >/dev/null 2>&1 || true

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

# The node line as slurmd sees this machine (real CPUs, sockets, RealMemory).
node_line=$(slurmd -C | head -1 | sed -E "s/^NodeName=[^ ]+/NodeName=$host/")

cat >"$conf_dir/slurm.conf" <<CONF
# Written by stoker bench/slurm/setup.sh: one node, defaults elsewhere.
ClusterName=bench
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
$node_line NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=bench Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
# No cgroup.conf: slurmd 22.05 always loads a cgroup plugin (autodetected) and
# rejects CgroupPlugin=disabled (only newer releases know it); with
# proctrack/linuxproc and task/none nothing uses it.
if [[ -e $conf_dir/cgroup.conf ]] && grep -q '^CgroupPlugin=disabled' "$conf_dir/cgroup.conf"; then
  rm -f "$conf_dir/cgroup.conf"
fi

# -c: start with no jobs from an earlier run.
slurmctld -c
slurmd

for _ in $(seq 300); do
  state=$(sinfo -h -N -o %t 2>/dev/null | head -1 || true)
  if [[ $state == idle ]]; then
    echo "slurm ready: node $host idle ($(sinfo -V))"
    exit 0
  fi
  sleep 0.1
done
echo "setup.sh: node $host did not become idle within 30s (state '${state:-?}'); see /var/log/slurm/" >&2
sinfo -N -l >&2 || true
exit 1
