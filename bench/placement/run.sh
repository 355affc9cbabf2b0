#!/usr/bin/env bash
# Jobs placed per second end to end (issue #4): the same queue of N one-CPU
# `true` jobs through a fresh stokerd and through the local one-node Slurm,
# both declaring 16 CPUs, submitted from the same number of client threads.
#
#   bench/placement/run.sh [--jobs 300] [--threads 4] [--bin-dir build/bin]
#                          [--no-slurm] [--keep]
#
# Builds nothing. The daemon declares `inventory: {cpus: 16, memory_gb: 64,
# gpus: []}` and `cpu_oversubscription: 1` (no oversubscription), so
# n1-standard-1 jobs get 16 slots like Slurm's node. Slurm must be up (`sinfo`); if it is not and we are root, this
# starts it with scripts/slurm-localhost.sh --cpus 16 --memory-mb 32000.
# Prints a markdown table (bench/placement/drive.py); appends nothing.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
bin_dir=$repo/build/bin
jobs=300
threads=4
slurm=1
keep=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --jobs) jobs=$2; shift ;;
    --threads) threads=$2; shift ;;
    --bin-dir) bin_dir=$2; shift ;;
    --no-slurm) slurm=0 ;;
    --keep) keep=1 ;;
    *) echo "usage: $0 [--jobs N] [--threads N] [--bin-dir DIR] [--no-slurm] [--keep]" >&2; exit 2 ;;
  esac
  shift
done
[[ -x $bin_dir/stokerd ]] || { echo "run.sh: no stokerd in $bin_dir (build it, or pass --bin-dir)" >&2; exit 1; }

if [[ $slurm == 1 ]] && ! sinfo -h -o %a 2>/dev/null | grep -q up; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "run.sh: Slurm is not up and starting it needs root; run scripts/slurm-localhost.sh --cpus 16 --memory-mb 32000, or pass --no-slurm" >&2
    exit 1
  fi
  "$repo/scripts/slurm-localhost.sh" --cpus 16 --memory-mb 32000
fi

data=$(mktemp -d /tmp/stoker-placement-bench.XXXXXX)
# As root, stokerd would run replicas as `nobody`, which cannot enter the
# private temp dir: keep the daemon's account, as the e2e suite does.
cat > "$data/config.yaml" <<YAML
default_unix_user: root
allow_root_trainers: true
images:
  - match: "local/sh"
    python: /bin/sh
inventory: {cpus: 16, memory_gb: 64, gpus: []}
cpu_oversubscription: 1
YAML

# shellcheck source=../lib/stokerd.sh
source "$repo/bench/lib/stokerd.sh"
start_stokerd "$bin_dir" "$data" "$keep"
echo "stokerd $pid at $url, data in $data" >&2
args=(--url "$url" --jobs "$jobs" --threads "$threads")
[[ -f $data/token ]] && args+=(--token-file "$data/token")
[[ $slurm == 1 ]] && args+=(--slurm)
python3 "$repo/bench/placement/drive.py" "${args[@]}"
