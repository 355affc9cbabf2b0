#!/usr/bin/env bash
# What job isolation (config job_isolation) costs a trainer's start: the
# issue #2 start-latency benchmark (stoker-bench start-latency
# --trainer-clock, one job at a time, `sh -c date`) against two fresh daemons
# that differ only in job_isolation: off and auto, run alternately in the
# same session so that they share the machine's load.
#
#   bench/isolation/run.sh [--jobs 100] [--rounds 2] [--bin-dir build-iso/bin]
#
# Then isolation-micro (bench/isolation/enter_micro.cc) times the isolation
# alone, 200 times, as root and as nobody.
#
# As root, trainers run as nobody (the default account), so the temp dir is
# made enterable by it. The "trainer fork -> exec" phase is where isolation
# happens (namespaces, mounts, then exec); "start latency" is submit to the
# trainer's own first clock reading. Results: JSON per run and summary.md in
# $BENCH_OUT or a new temp dir.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
jobs=100
rounds=2
bin=$repo/build-iso/bin
while [[ $# -gt 0 ]]; do
  case $1 in
    --jobs) jobs=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --bin-dir) bin=$2; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ $bin = /* ]] || bin=$repo/$bin
for b in stokerd stoker-run stoker-bench isolation-micro; do
  [[ -x $bin/$b ]] || { echo "run.sh: no $bin/$b (cmake --build ... --target $b)" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/stoker-isolation-bench.XXXXXX)
chmod 711 "$tmp"
out=${BENCH_OUT:-$tmp/results}
mkdir -p "$out"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  done
  find "$tmp" -mindepth 1 -maxdepth 1 ! -name results -exec rm -rf {} +
  echo "results in $out"
}
trap cleanup EXIT

# run MODE ROUND: a fresh daemon with job_isolation MODE, then the benchmark.
run() {
  local dir=$tmp/$1-$2
  mkdir -p "$dir"
  chmod 711 "$dir"
  printf 'images: [{match: "bench/*", python: /usr/bin/python3}]\ncpu_oversubscription: 64\njob_isolation: %s\n' \
    "$1" >"$dir/config.yaml"
  "$bin/stokerd" --data-dir "$dir" --listen 127.0.0.1:0 --runner "$bin/stoker-run" \
    >"$dir/stokerd.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 200); do [[ -s $dir/stokerd.addr ]] && break; sleep 0.05; done
  [[ -s $dir/stokerd.addr ]] || { echo "stokerd did not start; see $dir/stokerd.log" >&2; exit 1; }
  grep -h "job_isolation" "$dir/stokerd.log" | sed 's/^/  /'
  STOKER_TOKEN=$(cat "$dir/token") "$bin/stoker-bench" start-latency --server "$(cat "$dir/stokerd.addr")" \
    --data-dir "$dir" --jobs "$jobs" --trainer-clock --out "$out/$1-$2.json" >/dev/null
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
}

for r in $(seq "$rounds"); do
  echo "== round $r: job_isolation off, then auto ($jobs jobs each)"
  run off "$r"
  run auto "$r"
done

{
python3 - "$out" "$rounds" <<'PY'
import json, os, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print("| run | failures | fork -> exec p50 / p90 / p99 (ms) | start latency p50 / p90 / p99 (ms) |")
print("|---|---:|---:|---:|")
def cell(s):
    return " / ".join("%.2f" % s[p + "_ms"] for p in ("p50", "p90", "p99"))
for r in range(1, rounds + 1):
    for mode in ("off", "auto"):
        j = json.load(open(os.path.join(out, "%s-%d.json" % (mode, r))))
        print("| %s, round %d | %d | %s | %s |" % (mode, r, j["failures"],
              cell(j["phases"]["trainer_fork_to_exec"]), cell(j["start_latency_trainer_clock"])))
PY
echo
echo "| as | what | p50 (ms) | p90 (ms) | p99 (ms) |"
echo "|---|---|---:|---:|---:|"
micro=$tmp/micro
mkdir -p "$micro/jobs/2" "$micro/buckets" "$micro/envs"
chmod -R 755 "$micro"
"$bin/isolation-micro" "$micro"
if [[ $(id -u) == 0 ]]; then "$bin/isolation-micro" "$micro" --as-nobody; fi
} | tee "$out/summary.md"
