#!/usr/bin/env bash
# What running a job in a container costs at its start (issue #16): the
# issue #2 start-latency benchmark (stoker-bench start-latency
# --trainer-clock, one job at a time, `sh -c date`) against one daemon, with
# the job's image mapped to a local interpreter (`bench/trivial`, an
# images: rule) and with a real image in podman's store (the base image of
# scripts/container-base-image.sh), in alternating rounds so that both share
# the machine's load. Then the engine alone: `podman run --rm IMAGE true`
# with the flags Stoker gives, against the same command without podman.
#
#   bench/containers/run.sh [--jobs 50] [--rounds 2] [--bin-dir build/bin]
#
# Needs root (trainers run as nobody in both paths), podman and the image.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
jobs=50
rounds=2
bin=$repo/build/bin
image=localhost/stoker-base:bookworm
while [[ $# -gt 0 ]]; do
  case $1 in
    --jobs) jobs=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --bin-dir) bin=$2; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ $bin = /* ]] || bin=$repo/$bin
for b in stokerd stoker-run stoker-bench; do
  [[ -x $bin/$b ]] || { echo "run.sh: no $bin/$b (cmake --build ... --target $b)" >&2; exit 1; }
done
podman image exists "$image" || { echo "run.sh: no $image (scripts/container-base-image.sh)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/stoker-container-bench.XXXXXX)
chmod 711 "$tmp"
out=${BENCH_OUT:-$tmp/results}
mkdir -p "$out"
dir=$tmp/data
mkdir -p "$dir"
chmod 711 "$dir"
printf 'images: [{match: "bench/*", python: /usr/bin/python3}]\ncpu_oversubscription: 64\n' >"$dir/config.yaml"
"$bin/stokerd" --data-dir "$dir" --listen 127.0.0.1:0 --runner "$bin/stoker-run" >"$dir/stokerd.log" 2>&1 &
pid=$!
cleanup() {
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
  echo "results in $out"
}
trap cleanup EXIT
for _ in $(seq 200); do [[ -s $dir/stokerd.addr ]] && break; sleep 0.05; done
[[ -s $dir/stokerd.addr ]] || { echo "stokerd did not start; see $dir/stokerd.log" >&2; exit 1; }
grep -h "containers:" "$dir/stokerd.log" | sed 's/^/  /'

run() {  # NAME IMAGE ROUND
  STOKER_TOKEN=$(cat "$dir/token") "$bin/stoker-bench" start-latency --server "$(cat "$dir/stokerd.addr")" \
    --data-dir "$dir" --jobs "$jobs" --trainer-clock --image "$2" --out "$out/$1-$3.json" >/dev/null
}
for r in $(seq "$rounds"); do
  echo "== round $r: $jobs jobs with an interpreter, then $jobs in a container"
  run interpreter bench/trivial "$r"
  run container "$image" "$r"
done

# The engine alone, 20 times each: podman's run of `true` with Stoker's flags
# against exec'ing it directly.
python3 - "$image" "$out" <<'PY' >"$out/engine.json"
import json, resource, statistics, subprocess, sys, time
image, out = sys.argv[1], sys.argv[2]
nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
nproc = [min(v, 32768) for v in resource.getrlimit(resource.RLIMIT_NPROC)]
flags = ["--rm", "--network=host", "--pull=never", "--log-driver=passthrough",
         "--ulimit=nofile=%d:%d" % nofile, "--ulimit=nproc=%d:%d" % tuple(nproc)]
def times(cmd):
    t = []
    for _ in range(20):
        s = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        t.append((time.perf_counter() - s) * 1000)
    t.sort()
    return {"p50_ms": statistics.median(t), "max_ms": t[-1]}
print(json.dumps({"podman_run_true": times(["podman", "run"] + flags + [image, "true"]),
                  "exec_true": times(["/bin/true"])}))
PY

python3 - "$out" "$rounds" <<'PY' | tee "$out/summary.md"
import json, os, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print("| run | failures | start latency p50 / p90 / p99 (ms) |")
print("|---|---:|---:|")
p50 = {"interpreter": [], "container": []}
for r in range(1, rounds + 1):
    for name in ("interpreter", "container"):
        j = json.load(open(os.path.join(out, "%s-%d.json" % (name, r))))
        s = j["start_latency_trainer_clock"]
        p50[name].append(s["p50_ms"])
        print("| %s, round %d | %d | %s |" % (name, r, j["failures"],
              " / ".join("%.1f" % s[p + "_ms"] for p in ("p50", "p90", "p99"))))
print()
for r in range(rounds):
    print("round %d: container start overhead at p50 = %.1f ms" % (
        r + 1, p50["container"][r] - p50["interpreter"][r]))
e = json.load(open(os.path.join(out, "engine.json")))
print("engine alone: `podman run --rm IMAGE true` p50 %.1f ms (max %.1f); exec of true p50 %.2f ms" % (
    e["podman_run_true"]["p50_ms"], e["podman_run_true"]["max_ms"], e["exec_true"]["p50_ms"]))
PY
