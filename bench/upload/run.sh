#!/usr/bin/env bash
# Bucket upload and download throughput through the API, `stoker storage cp`
# both ways, for one or more builds side by side (runs interleaved, so that
# a noisy machine hits every build alike).
#
#   bench/upload/run.sh [--mb 200] [--runs 3] BIN_DIR [BIN_DIR ...]
#
# Each BIN_DIR gets its own stokerd on a fresh data dir in /tmp. Prints one
# line per build: median seconds and MB/s up and down.
set -euo pipefail
mb=200
runs=3
dirs=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --mb) mb=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) dirs+=("$(cd "$1" && pwd)"); shift ;;
  esac
done
[[ ${#dirs[@]} -gt 0 ]] || { echo "usage: $0 [--mb N] [--runs N] BIN_DIR [BIN_DIR ...]" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
head -c $((mb * 1000 * 1000)) /dev/urandom >"$work/file.bin"

for i in "${!dirs[@]}"; do
  mkdir -p "$work/d$i"
  "${dirs[$i]}/stokerd" --data-dir "$work/d$i" --listen 127.0.0.1:0 >"$work/d$i.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do [[ -s $work/d$i/stokerd.addr ]] && break; sleep 0.05; done
  STOKER_HOME=$work/d$i "${dirs[$i]}/stoker" storage mb gs://bench >/dev/null
done

now() { date +%s.%N; }
for run in $(seq "$runs"); do
  for i in "${!dirs[@]}"; do
    export STOKER_HOME=$work/d$i
    t0=$(now)
    "${dirs[$i]}/stoker" storage cp "$work/file.bin" gs://bench/file.bin >/dev/null
    t1=$(now)
    rm -f "$work/back.bin"
    "${dirs[$i]}/stoker" storage cp gs://bench/file.bin "$work/back.bin" >/dev/null
    t2=$(now)
    cmp -s "$work/file.bin" "$work/back.bin" || { echo "download differs (${dirs[$i]})" >&2; exit 1; }
    echo "$i $(echo "$t1 - $t0" | bc) $(echo "$t2 - $t1" | bc)" >>"$work/times"
  done
done

echo "| build | upload s (median of $runs) | upload MB/s | download s | download MB/s |"
echo "|---|---:|---:|---:|---:|"
for i in "${!dirs[@]}"; do
  up=$(awk -v i="$i" '$1 == i {print $2}' "$work/times" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  down=$(awk -v i="$i" '$1 == i {print $3}' "$work/times" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf '| %s | %.2f | %.0f | %.2f | %.0f |\n' "${dirs[$i]}" "$up" "$(echo "$mb / $up" | bc -l)" \
    "$down" "$(echo "$mb / $down" | bc -l)"
done
