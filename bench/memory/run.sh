#!/usr/bin/env bash
# Memory of a long-lived stokerd (issue #7): pushes tens of thousands of tiny
# jobs (`true` under /bin/sh) through a fresh daemon and samples its VmRSS
# every 1,000 finished jobs. Flat = no growth proportional to jobs finished.
#
#   bench/memory/run.sh [--jobs 20000] [--every 1000] [--window 256]
#                       [--max-dirs 10000] [--bin-dir build/bin] [--keep]
#
# The daemon declares 64 CPUs with cpu_oversubscription 16 so that the whole
# window runs at once; retention keeps at most --max-dirs finished replica
# directories (the default limit, 10,000), so the run also exercises removal.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
bin_dir=$repo/build/bin
jobs=20000
every=1000
window=256
max_dirs=10000
keep=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --jobs) jobs=$2; shift ;;
    --every) every=$2; shift ;;
    --window) window=$2; shift ;;
    --max-dirs) max_dirs=$2; shift ;;
    --bin-dir) bin_dir=$2; shift ;;
    --keep) keep=1 ;;
    *) echo "usage: $0 [--jobs N] [--every N] [--window N] [--max-dirs N] [--bin-dir DIR] [--keep]" >&2; exit 2 ;;
  esac
  shift
done

data=$(mktemp -d /tmp/stoker-memory-bench.XXXXXX)
# As root, stokerd would run replicas as `nobody`, which cannot enter the
# private temp dir: keep the daemon's account, as the e2e suite does.
cat > "$data/config.yaml" <<YAML
default_unix_user: root
allow_root_trainers: true
images:
  - match: "local/sh"
    python: /bin/sh
inventory: {cpus: 64, memory_gb: 512}
cpu_oversubscription: 16
poll_interval_ms: 20
retention: {max_finished_replica_dirs: $max_dirs}
YAML

# shellcheck source=../lib/stokerd.sh
source "$repo/bench/lib/stokerd.sh"
start_stokerd "$bin_dir" "$data" "$keep"
echo "stokerd $pid at $url, data in $data; $jobs jobs, sampling every $every" >&2
token=()
[[ -f $data/token ]] && token=(--token-file "$data/token")
python3 "$repo/bench/memory/drive.py" --url "$url" --pid "$pid" --jobs "$jobs" \
  --every "$every" --window "$window" "${token[@]}"
echo "replica directories left: $(ls "$data/jobs" | wc -l) (retention keeps $max_dirs finished ones; past that it scans every 2 s)"
