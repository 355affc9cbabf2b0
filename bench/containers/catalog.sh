#!/usr/bin/env bash
# What the image catalog (issue #29, docs/decisions/0037) saves on the
# submit path with podman installed: the issue #2 start-latency benchmark
# (stoker-bench start-latency --trainer-clock, one job at a time, a Vertex
# prebuilt PyTorch image name, which an images: rule maps to the local
# interpreter) against two builds of stokerd/stoker-run, each daemon fresh
# on its own data dir with the default config (containers.engine: auto, so
# podman), in alternating rounds so that both share the machine's load.
# Each run starts once the daemon answers /healthz and, for a daemon with a
# catalog, once its log says the catalog's first list was read. Then the
# first job after a start: submitted as soon as a daemon answers, on a new
# data dir and again after a restart on the same one (interpreter checks
# remembered on disk).
#
#   bench/containers/catalog.sh --before DIR --after DIR [--jobs 25] [--rounds 2]
#
# DIR: a bin dir with stokerd and stoker-run (e.g. a build of the commit
# before the catalog). Needs root and podman.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
jobs=25
rounds=2
before=
after=$repo/build/bin
bench=$repo/build/bin/stoker-bench
while [[ $# -gt 0 ]]; do
  case $1 in
    --before) before=$2; shift ;;
    --after) after=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "catalog.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ -n $before ]] || { echo "catalog.sh: --before DIR is required" >&2; exit 2; }
image=us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.2-1.py310:latest
tmp=$(mktemp -d /tmp/stoker-catalog-bench.XXXXXX)
chmod 711 "$tmp"
out=${BENCH_OUT:-$tmp/results}
mkdir -p "$out"
pid=
cleanup() {
  [[ -n $pid ]] && { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  echo "results in $out"
}
trap cleanup EXIT

run() {  # NAME BINDIR ROUND
  local dir=$tmp/$1-$3
  mkdir -p "$dir"
  chmod 711 "$dir"
  printf 'cpu_oversubscription: 64\n' >"$dir/config.yaml"
  "$2/stokerd" --data-dir "$dir" --listen 127.0.0.1:0 --runner "$2/stoker-run" >"$dir/stokerd.log" 2>&1 &
  pid=$!
  for _ in $(seq 400); do [[ -s $dir/stokerd.addr ]] && break; sleep 0.05; done
  [[ -s $dir/stokerd.addr ]] || { echo "stokerd did not start; see $dir/stokerd.log" >&2; exit 1; }
  if grep -aq "image catalog: read" "$2/stokerd"; then  # a build with the catalog
    for _ in $(seq 400); do grep -q "image catalog: read" "$dir/stokerd.log" && break; sleep 0.05; done
  fi
  STOKER_TOKEN=$(cat "$dir/token") "$bench" start-latency --server "$(cat "$dir/stokerd.addr")" \
    --data-dir "$dir" --jobs "$jobs" --trainer-clock --image "$image" --out "$out/$1-$3.json" >/dev/null
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
  rm -rf "$dir"
}
start() {  # BINDIR DIR: a daemon on DIR, once it answers
  "$1/stokerd" --data-dir "$2" --listen 127.0.0.1:0 --runner "$1/stoker-run" >>"$2/stokerd.log" 2>&1 &
  pid=$!
  for _ in $(seq 400); do [[ -s $2/stokerd.addr ]] && break; sleep 0.05; done
  [[ -s $2/stokerd.addr ]] || { echo "stokerd did not start; see $2/stokerd.log" >&2; exit 1; }
}
stop() { kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
first() {  # NAME BINDIR ROUND: one job as soon as a fresh daemon answers, then after a restart
  local dir=$tmp/first-$1-$3
  mkdir -p "$dir"
  chmod 711 "$dir"
  printf 'cpu_oversubscription: 64
' >"$dir/config.yaml"
  for when in fresh restart; do
    rm -f "$dir/stokerd.addr"
    start "$2" "$dir"
    STOKER_TOKEN=$(cat "$dir/token") "$bench" start-latency --server "$(cat "$dir/stokerd.addr")" \
      --data-dir "$dir" --jobs 1 --trainer-clock --image "$image" --out "$out/first-$1-$when-$3.json" >/dev/null
    stop
  done
  rm -rf "$dir"
}
for r in $(seq "$rounds"); do
  echo "== round $r: $jobs jobs on the build before, then $jobs on the build after"
  run before "$before" "$r"
  run after "$after" "$r"
  echo "== round $r: the first job after a start, before then after"
  first before "$before" "$r"
  first after "$after" "$r"
done

python3 - "$out" "$rounds" <<'PY' | tee "$out/summary.md"
import json, os, sys
out, rounds = sys.argv[1], int(sys.argv[2])
keys = [("submit_rtt", None, "submit round trip"),
        ("start_latency_trainer_clock", None, "submit -> trainer's command"),
        ("phases", "create_to_launch_json", "createTime -> launch.json")]
def get(j, k, sub):
    return j[k][sub] if sub else j[k]
print("| run | failures | " + " | ".join(l + " p50 (ms)" for _, _, l in keys) + " |")
print("|---|---:|" + "---:|" * len(keys))
p50 = {"before": [[] for _ in keys], "after": [[] for _ in keys]}
for r in range(1, rounds + 1):
    for name in ("before", "after"):
        j = json.load(open(os.path.join(out, "%s-%d.json" % (name, r))))
        row = []
        for i, (k, sub, _) in enumerate(keys):
            v = get(j, k, sub)["p50_ms"]
            p50[name][i].append(v)
            row.append("%.1f" % v)
        print("| %s, round %d | %d | %s |" % (name, r, j["failures"], " | ".join(row)))
ratio = []
for i in range(len(keys)):
    b = sorted(p50["before"][i])[len(p50["before"][i]) // 2]
    a = sorted(p50["after"][i])[len(p50["after"][i]) // 2]
    ratio.append("%.1fx" % (b / a) if a else "-")
print("| before / after (median of rounds) | | " + " | ".join(ratio) + " |")
print()
print("| the first job after a start | submit round trip, each round (ms) |")
print("|---|---|")
for name in ("before", "after"):
    for when in ("fresh", "restart"):
        v = [json.load(open(os.path.join(out, "first-%s-%s-%d.json" % (name, when, r))))
             ["submit_rtt"]["p50_ms"] for r in range(1, rounds + 1)]
        print("| %s, %s | %s |" % (name, "a new data dir" if when == "fresh" else "restarted",
                                  ", ".join("%.0f" % x for x in v)))
PY
