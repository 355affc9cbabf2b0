#!/usr/bin/env bash
# Issue #5 measure: the time from the first replica's trainer starting to the
# PyTorch process group being formed, for the DDP example (examples/ddp) run
# as 1 chief + W workers through a real stokerd and CLI.
#
#   bench/distributed/run.sh [--runs 5] [--workers "1 3"] [--epochs 1]
#                            [--bin-dir build/bin] [--keep]
#
# Starts one fresh stokerd in a temp dir (127.0.0.1:0), runs the job --runs
# times for each worker count, one job at a time, and prints a markdown table
# (report.py: p50 / max of start-to-group, launch spread, torch import and the
# rendezvous itself). Results (per-job JSON, summary.md) go to $BENCH_OUT or a
# temp dir it names. Stops the daemon and every replica it started.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
runs=5
workers="1 3"
epochs=1
bin_dir=$repo/build/bin
keep=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=$2; shift ;;
    --workers) workers=$2; shift ;;
    --epochs) epochs=$2; shift ;;
    --bin-dir) bin_dir=$2; shift ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
for b in stokerd stoker stoker-run; do
  [[ -x $bin_dir/$b ]] || { echo "run.sh: no $bin_dir/$b; build it or pass --bin-dir" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/stoker-ddp-bench.XXXXXX)
chmod 755 "$tmp"  # trainers may run as another account; they must reach their dirs
out=${BENCH_OUT:-$tmp/results}
data=$tmp/data
mkdir -p "$out" "$data"
# The CLI reads the local admin token that stokerd writes into its data dir.
export STOKER_HOME=$data

stop() {
  if [[ -s $data/stokerd.pid ]]; then
    kill -TERM "$(cat "$data/stokerd.pid")" 2>/dev/null || true
  elif [[ -n ${daemon_pid:-} ]]; then
    kill -TERM "$daemon_pid" 2>/dev/null || true
  fi
  # Supervisors of replicas still running (a failed run): SIGTERM stops their trainers.
  for f in "$data"/jobs/*/*/runner.json; do
    [[ -e $f ]] || continue
    [[ -e ${f%/runner.json}/status.json ]] && continue
    kill -TERM "$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' "$f")" 2>/dev/null || true
  done
  if [[ $keep = 0 && -z ${BENCH_OUT:-} ]]; then
    echo "results kept in $out" >&2
  fi
}
trap stop EXIT

printf 'cpu_oversubscription: 64\ncancel_grace_seconds: 2\n' >"$data/config.yaml"
"$bin_dir/stokerd" --data-dir "$data" --listen 127.0.0.1:0 --config "$data/config.yaml" \
  --runner "$bin_dir/stoker-run" >"$data/stokerd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 200); do [[ -s $data/stokerd.addr ]] && break; sleep 0.05; done
[[ -s $data/stokerd.addr ]] || { echo "stokerd did not start; see $data/stokerd.log" >&2; exit 1; }
url=$(cat "$data/stokerd.addr")
stoker() { "$bin_dir/stoker" --server "$url" --project bench --region local "$@"; }

stoker storage mb gs://ddp >/dev/null
pairs=()
for w in $workers; do
  # job.yaml with W workers instead of 2; everything else as shipped.
  sed "s/replicaCount: 2/replicaCount: $w/" "$repo/examples/ddp/job.yaml" >"$tmp/job-$w.yaml"
  for k in $(seq "$runs"); do
    log=$tmp/job-$w-$k.log
    if ! stoker jobs submit --config "$tmp/job-$w.yaml" --display-name "ddp-bench-1+$w-$k" \
        --package-path "$repo/examples/ddp/trainer" --module-name trainer.task \
        --args="--epochs=$epochs" --follow >"$log" 2>&1; then
      echo "run.sh: job 1+$w run $k did not succeed; see $log" >&2; tail -20 "$log" >&2; exit 1
    fi
    id=$(sed -n 's/.*Submitted job \([0-9]*\).*/\1/p' "$log" | head -1)
    pairs+=("$id:1+$w")
    echo "1+$w run $k: job $id done" >&2
  done
done

{
  echo "DDP example, start of the first replica's trainer to process group formed"
  echo "($(nproc) CPUs, $(uname -r), torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), $(date -u +%Y-%m-%d))"
  echo
  /usr/bin/python3 "$repo/bench/distributed/report.py" "$data" "${pairs[@]}" --json "$out/runs.json"
} | tee "$out/summary.md"
