#!/usr/bin/env bash
# Issue #29's start path, phase by phase: stoker-bench start-latency
# --trainer-clock (one job at a time, `sh -c date` as the command) against
# two builds of stokerd/stoker-run, each a fresh daemon on its own data dir
# with the default config (containers.engine: auto, so podman where it is
# installed), the image catalog warm, in alternating rounds so that both
# share the machine's load. Then, with the second build, the same jobs on a
# real container image: the container start path as its own row.
#
#   bench/start_path/run.sh --before DIR --after DIR [--jobs 25] [--rounds 3]
#                           [--container-image IMAGE] [--container-jobs 10]
#   (SUMMARY_ONLY=1 BENCH_OUT=DIR: only the table of an earlier run in DIR)
#
# DIR: a bin dir with stokerd and stoker-run. The phases (stoker-bench's
# names): submit round trip (HTTP, admission, the record's commit);
# createTime -> launch.json (the control loop wakes, places, commits
# PENDING, writes the launch); launch.json -> supervisor running (its start:
# exec and libraries, or a standby's read); supervisor -> trainer forked
# (claim, cgroup, directories, isolation); trainer fork -> exec'd command.
# The issue's figure is createTime -> trainer forked.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
jobs=25
rounds=3
before=
after=$repo/build/bin
container_image=localhost/stoker-base:bookworm
container_jobs=10
bench=$repo/build/bin/stoker-bench
while [[ $# -gt 0 ]]; do
  case $1 in
    --before) before=$2; shift ;;
    --after) after=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --container-image) container_image=$2; shift ;;
    --container-jobs) container_jobs=$2; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "start_path/run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ -n $before ]] || { echo "start_path/run.sh: --before DIR is required" >&2; exit 2; }
image=us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.2-1.py310:latest
tmp=$(mktemp -d /tmp/stoker-start-path.XXXXXX)
chmod 711 "$tmp"
out=${BENCH_OUT:-$tmp/results}
mkdir -p "$out"
pid=
cleanup() {
  [[ -n $pid ]] && { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  rm -rf "$tmp"/before-* "$tmp"/after-* "$tmp"/container-*
  echo "results in $out"
}
trap cleanup EXIT

run() {  # NAME BINDIR ROUND IMAGE JOBS
  local dir=$tmp/$1-$3
  mkdir -p "$dir"
  chmod 711 "$dir"
  printf 'cpu_oversubscription: 64\n' >"$dir/config.yaml"
  "$2/stokerd" --data-dir "$dir" --listen 127.0.0.1:0 --runner "$2/stoker-run" >"$dir/stokerd.log" 2>&1 &
  pid=$!
  for _ in $(seq 400); do [[ -s $dir/stokerd.addr ]] && break; sleep 0.05; done
  [[ -s $dir/stokerd.addr ]] || { echo "stokerd did not start; see $dir/stokerd.log" >&2; exit 1; }
  for _ in $(seq 400); do grep -q "image catalog: read" "$dir/stokerd.log" && break; sleep 0.05; done
  sleep 1  # the interpreter checks and the standbys, started with the daemon
  # A container's clock file is inside the container: not waited for (each
  # job would wait the bench's whole timeout for it).
  local clock=--trainer-clock
  [[ $1 == container ]] && clock=
  STOKER_TOKEN=$(cat "$dir/token") "$bench" start-latency --server "$(cat "$dir/stokerd.addr")" \
    --data-dir "$dir" --jobs "$5" $clock --image "$4" --out "$out/$1-$3.json" >/dev/null
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
  # The data dir stays until the end: removing it here (ext4 with `discard`
  # on this VM) slowed every file creation of the next runs, 0.15 -> 1.2 ms
  # for a mkdir + create, and the start path with them, 2.3 -> 12 ms over
  # a few runs (bench/RESULTS.md, "a drift that was the bench's own").
}
[[ -n ${SUMMARY_ONLY:-} ]] && rounds_done=1 || rounds_done=
for r in $(seq "$rounds"); do
  [[ -n $rounds_done ]] && break
  # Which build goes first alternates, so that neither always runs on a
  # machine the other has just warmed (or loaded).
  if ((r % 2)); then
    echo "== round $r: $jobs jobs on the build before, then on the build after"
    run before "$before" "$r" "$image" "$jobs"
    run after "$after" "$r" "$image" "$jobs"
  else
    echo "== round $r: $jobs jobs on the build after, then on the build before"
    run after "$after" "$r" "$image" "$jobs"
    run before "$before" "$r" "$image" "$jobs"
  fi
done
if [[ -z $rounds_done ]] && podman image exists "$container_image" 2>/dev/null; then
  echo "== $container_jobs jobs in containers of $container_image, the build after"
  run container "$after" 1 "$container_image" "$container_jobs"
fi

python3 - "$out" "$rounds" <<'PY' | tee "$out/summary.md"
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
cols = [("submit_rtt", "submit round trip"),
        ("phases.create_to_launch_json", "createTime -> launch.json"),
        ("phases.launch_json_to_supervisor", "launch.json -> supervisor"),
        ("phases.supervisor_to_trainer_fork", "supervisor -> trainer fork"),
        ("create_to_trainer_fork", "**createTime -> trainer forked**"),
        ("phases.trainer_fork_to_exec", "trainer fork -> exec'd"),
        ("start_latency_trainer_clock", "submit -> trainer's command")]
def get(j, key):  # None where nothing was measured (a container's clock file)
    for k in key.split("."):
        j = j.get(k, {})
    return j.get("p50_ms")
print("| run (p50, ms) | failures | " + " | ".join(l for _, l in cols) + " |")
print("|---|---:|" + "---:|" * len(cols))
p50 = {"before": [[] for _ in cols], "after": [[] for _ in cols]}
rows = [(n, r) for r in range(1, rounds + 1) for n in ("before", "after")]
if os.path.exists(os.path.join(out, "container-1.json")):
    rows.append(("container", 1))
for name, r in rows:
    j = json.load(open(os.path.join(out, "%s-%d.json" % (name, r))))
    vals = [get(j, k) for k, _ in cols]
    if name in p50:
        for i, v in enumerate(vals):
            p50[name][i].append(v)
    label = "%s, round %d" % (name, r) if name in p50 else "after, in a container"
    cells = ["-" if v is None else "%.2f" % v for v in vals]
    print("| %s | %d | %s |" % (label, j["failures"], " | ".join(cells)))
ratio = [statistics.median(b) / max(statistics.median(a), 1e-9)
         for b, a in zip(p50["before"], p50["after"])]
print("| **before / after** (median of rounds) | | " + " | ".join("%.2fx" % x for x in ratio) + " |")
PY
