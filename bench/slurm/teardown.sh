#!/usr/bin/env bash
# Stops the daemons bench/slurm/setup.sh started (slurmd, slurmctld, munged),
# found by their pid files, and waits until they are gone. With
# --purge-packages also removes the packages. Safe to run when nothing runs.
set -uo pipefail

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

# Jobs first, so that no slurmstepd is left behind.
if command -v scancel >/dev/null && [[ -s /run/slurmctld.pid ]]; then
  scancel --user=root >/dev/null 2>&1 || true
fi
stop_pidfile /run/slurmd.pid
stop_pidfile /run/slurmctld.pid
stop_pidfile /run/munge/munged.pid

if [[ ${1:-} == --purge-packages ]]; then
  DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq slurm-wlm slurmctld slurmd slurm-client munge >/dev/null
fi
echo "slurm stopped"
