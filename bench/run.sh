#!/usr/bin/env bash
# One command for the issue #2 benchmarks (see bench/README.md): builds
# Release, starts fresh stokerd daemons in a temp dir, measures submit-to-start
# latency and durable submissions/s, optionally does the same with Slurm on
# this host, prints a side-by-side table and stops everything it started.
#
#   bench/run.sh [--with-slurm] [--jobs 200] [--rate-jobs 5000] [--clients 8]
#                [--slurm-jobs 50] [--slurm-rate-jobs 1000] [--build-dir build-bench] [--keep]
#                [--no-build]   (use the binaries already in the build dir)
#                [--budget-gpu-hours N]  (give each daemon a monthly budget of N GPU hours
#                                         for its admin user before measuring: issue #18)
#
# --slurm-jobs is smaller than --jobs by default: with Slurm's default
# scheduler settings each sequential job waits for a periodic scheduling pass
# (about 3 s here), so 200 jobs would take 10 minutes.
#
# Results (JSON per run, summary.md) go to $BENCH_OUT or a new temp dir.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=build-bench
jobs=200
rate_jobs=5000
clients=8
slurm_rate_jobs=1000
slurm_jobs=50
with_slurm=0
keep=0
no_build=0
budget_gpu_hours=
while [[ $# -gt 0 ]]; do
  case $1 in
    --with-slurm) with_slurm=1 ;;
    --jobs) jobs=$2; shift ;;
    --rate-jobs) rate_jobs=$2; shift ;;
    --clients) clients=$2; shift ;;
    --slurm-rate-jobs) slurm_rate_jobs=$2; shift ;;
    --slurm-jobs) slurm_jobs=$2; shift ;;
    --build-dir) build=$2; shift ;;
    --keep) keep=1 ;;
    --no-build) no_build=1 ;;
    --budget-gpu-hours) budget_gpu_hours=$2; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
cd "$repo"
[[ $build = /* ]] || build=$repo/$build

tmp=$(mktemp -d /tmp/stoker-bench.XXXXXX)
out=${BENCH_OUT:-$tmp/results}
mkdir -p "$out"
daemons=()        # data dirs of the stokerd daemons we started
slurm_started=0

# Stops a stokerd (by its pid file) and every replica supervisor under its
# data dir that is still alive (the GPU holder job), nothing else.
stop_stokerd() {
  local d=$1 pid r
  if [[ -s $d/stokerd.pid ]]; then
    pid=$(cat "$d/stokerd.pid")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  fi
  for r in "$d"/jobs/*/*/runner.json; do
    [[ -e $r ]] || continue
    pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$r" 2>/dev/null || true)
    [[ -n $pid ]] || continue
    # Only a stoker-run that supervises this very replica dir.
    if tr "\0" " " 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$(dirname "$r")"; then
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
}

cleanup() {
  local d
  for d in "${daemons[@]}"; do stop_stokerd "$d"; done
  if [[ $slurm_started == 1 ]]; then "$repo/bench/slurm/teardown.sh" >/dev/null 2>&1 || true; fi
  if [[ $keep == 0 ]]; then
    # The daemons' data dirs go; the results stay.
    find "$tmp" -mindepth 1 -maxdepth 1 ! -name results -exec rm -rf {} +
    [[ -n ${BENCH_OUT:-} ]] && rmdir "$tmp" 2>/dev/null
  fi
  echo "results in $out"
}
trap cleanup EXIT

newest() { ls -t "$@" 2>/dev/null | head -1 || true; }

# ---- build -----------------------------------------------------------------
if [[ $no_build == 1 ]]; then
  bench_bin=$(newest "$build/bin/stoker-bench" "$build/bench/stoker-bench")
else
echo "== build (Release, -j2) in $build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
if grep -q 'add_subdirectory(bench)' CMakeLists.txt; then
  cmake --build "$build" -j2 --target stokerd stoker-run stoker-bench >/dev/null
  bench_bin=$(newest "$build/bin/stoker-bench" "$build/bench/stoker-bench")
else
  # Not wired into the top-level build yet: compile the driver by hand.
  cmake --build "$build" -j2 --target stokerd stoker-run stoker_http stoker_common >/dev/null
  bench_bin=$build/bench/stoker-bench
  mkdir -p "$build/bench"
  if [[ ! -x $bench_bin || bench/submit_bench.cc -nt $bench_bin ]]; then
    g++ -O2 -std=c++20 -Wall -Wextra -Isrc bench/submit_bench.cc \
      "$build/src/http/libstoker_http.a" "$build/src/common/libstoker_common.a" \
      -lyaml-cpp -lpthread -o "$bench_bin"
  fi
fi
fi
# Binaries sit in $build/bin (CMAKE_RUNTIME_OUTPUT_DIRECTORY) or, in older
# trees, beside their sources; take the newest.
stokerd=$(newest "$build/bin/stokerd" "$build/src/server/stokerd")
runner=$(newest "$build/bin/stoker-run" "$build/src/runner/stoker-run")
[[ -x $stokerd && -x $runner && -x $bench_bin ]] || {
  echo "run.sh: build did not produce stokerd, stoker-run and stoker-bench" >&2; exit 1; }

# A root daemon runs trainers as `nobody` (the default account), which must be
# able to enter the data dirs below $tmp (mktemp makes it 0700).
chmod 711 "$tmp"

# start_stokerd NAME EXTRA_CONFIG: a fresh daemon in $tmp/NAME; sets url, dir.
start_stokerd() {
  dir=$tmp/$1
  mkdir -p "$dir"
  printf 'images: [{match: "bench/*", python: /usr/bin/python3}]\ncpu_oversubscription: 64\n%s\n' "$2" \
    >"$dir/config.yaml"
  "$stokerd" --data-dir "$dir" --listen 127.0.0.1:0 --config "$dir/config.yaml" --runner "$runner" \
    >"$dir/stokerd.log" 2>&1 &
  daemons+=("$dir")
  for _ in $(seq 100); do [[ -s $dir/stokerd.addr ]] && break; sleep 0.05; done
  [[ -s $dir/stokerd.addr ]] || { echo "stokerd did not start; see $dir/stokerd.log" >&2; exit 1; }
  url=$(cat "$dir/stokerd.addr")
  # The API needs the daemon's local admin token (stoker-bench sends $STOKER_TOKEN).
  export STOKER_TOKEN
  STOKER_TOKEN=$(cat "$dir/token")
  [[ -z $budget_gpu_hours ]] || set_budget
}

# --budget-gpu-hours: a budget on the admin user (the one stoker-bench submits
# as), so that every submission goes through the budget check and, at most
# every 5 s, a scan of the month's ledger. Set through the API before the
# first job; fails the run if the daemon has no budgets (older builds).
set_budget() {
  local user
  user=$(curl -sf -H "authorization: Bearer $STOKER_TOKEN" "$url/v1/whoami" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["user"])') || {
    echo "run.sh: GET /v1/whoami failed" >&2; exit 1; }
  curl -sf -X PUT -H "authorization: Bearer $STOKER_TOKEN" -H 'content-type: application/json' \
    --data "{\"monthlyGpuHours\": $budget_gpu_hours}" "$url/v1/budgets/user:$user" >/dev/null || {
    echo "run.sh: PUT /v1/budgets/user:$user failed (does this stokerd have budgets?)" >&2; exit 1; }
  echo "   budget: user:$user, $budget_gpu_hours GPU hours a month"
}

# ---- Stoker ------------------------------------------------------------------
echo "== stoker: start latency, $jobs jobs one at a time"
start_stokerd latency ""
"$bench_bin" start-latency --server "$url" --data-dir "$dir" --jobs "$jobs" --out "$out/stoker-latency.json"
"$bench_bin" start-latency --server "$url" --data-dir "$dir" --jobs "$jobs" --trainer-clock \
  --out "$out/stoker-latency-sh.json"
stop_stokerd "$dir"

echo "== stoker: durable submissions, $rate_jobs jobs that queue behind a GPU holder"
start_stokerd rate "inventory: {cpus: 2, memory_gb: 8, gpus: [{type: NVIDIA_TESLA_T4, memory_gb: 16}]}"
"$bench_bin" submit-rate --server "$url" --jobs "$rate_jobs" --clients "$clients" --gpu-queue \
  --out "$out/stoker-rate.json"
stop_stokerd "$dir"
start_stokerd rate1 "inventory: {cpus: 2, memory_gb: 8, gpus: [{type: NVIDIA_TESLA_T4, memory_gb: 16}]}"
"$bench_bin" submit-rate --server "$url" --jobs "$rate_jobs" --clients 1 --gpu-queue \
  --out "$out/stoker-rate-1.json"
stop_stokerd "$dir"

# ---- Slurm -------------------------------------------------------------------
if [[ $with_slurm == 1 ]]; then
  echo "== slurm: setup (default scheduler parameters)"
  slurm_started=1
  "$repo/bench/slurm/setup.sh"
  echo "== slurm: sbatch start latency, $slurm_jobs jobs one at a time"
  "$bench_bin" sbatch-latency --work-dir "$tmp/slurm" --jobs "$slurm_jobs" --out "$out/slurm-latency.json"
  echo "== slurm: sbatch submissions, $slurm_rate_jobs held jobs"
  "$bench_bin" sbatch-rate --jobs "$slurm_rate_jobs" --clients "$clients" --out "$out/slurm-rate.json"
  "$bench_bin" sbatch-rate --jobs "$slurm_rate_jobs" --clients 1 --out "$out/slurm-rate-1.json"
fi

# ---- table -------------------------------------------------------------------
python3 - "$out" "$clients" <<'PY' | tee "$out/summary.md"
import json, os, sys
out, clients = sys.argv[1], sys.argv[2]
def load(name):
    p = os.path.join(out, name)
    return json.load(open(p)) if os.path.exists(p) else None
sl, ss, sr, sr1 = (load(n) for n in ("stoker-latency.json", "stoker-latency-sh.json",
                                      "stoker-rate.json", "stoker-rate-1.json"))
ql, qr, qr1 = (load(n) for n in ("slurm-latency.json", "slurm-rate.json", "slurm-rate-1.json"))
rows = []
def lat(name, s, q, key):
    for p in ("p50", "p90", "p99", "max"):
        a = s[key][p + "_ms"] if s else None
        b = q[key][p + "_ms"] if q and key in q else None
        rows.append((f"{name} {p} (ms)", a, b, "lower"))
lat("start latency, supervisor clock (/bin/true)", sl, None, "start_latency_supervisor_clock")
lat("start latency, trainer clock (sh -c date)", ss, ql, "start_latency_trainer_clock")
for p in ("p50", "p99"):
    rows.append((f"submit RTT, idle {p} (ms)", sl["submit_rtt"][p + "_ms"],
                 ql["submit_rtt"][p + "_ms"] if ql else None, "lower"))
rows.append((f"submissions/s, {clients} clients (sustained)", sr["sustained_per_s"],
             qr["sustained_per_s"] if qr else None, "higher"))
rows.append(("submissions/s, 1 client (sustained)", sr1["sustained_per_s"],
             qr1["sustained_per_s"] if qr1 else None, "higher"))
rows.append((f"submit latency p99 under load, {clients} clients (ms)", sr["submit_latency"]["p99_ms"],
             qr["submit_latency"]["p99_ms"] if qr else None, "lower"))
def f(x):
    return "—" if x is None else (f"{x:,.0f}" if abs(x) >= 100 else f"{x:.2f}")
print("| metric | Stoker | Slurm (sbatch) | Stoker advantage |")
print("|---|---:|---:|---:|")
for name, a, b, better in rows:
    ratio = "—"
    if a is not None and b is not None and a > 0 and b > 0:
        r = b / a if better == "lower" else a / b
        ratio = f"{r:.1f}x"
    print(f"| {name} | {f(a)} | {f(b)} | {ratio} |")
print()
p50, p99 = sl["start_latency_supervisor_clock"]["p50_ms"], sl["start_latency_supervisor_clock"]["p99_ms"]
t50, t99 = ss["start_latency_trainer_clock"]["p50_ms"], ss["start_latency_trainer_clock"]["p99_ms"]
rate = sr["sustained_per_s"]
print(f"target start p50 <= 10 ms: supervisor clock {p50} ms, trainer clock {t50} ms -> "
      f"{'MET' if max(p50, t50) <= 10 else 'MISSED'}")
print(f"target start p99 <= 50 ms: supervisor clock {p99} ms, trainer clock {t99} ms -> "
      f"{'MET' if max(p99, t99) <= 50 else 'MISSED'}")
print(f"target >= 1,000 durable submissions/s ({clients} clients): {rate:,.0f}/s -> "
      f"{'MET' if rate >= 1000 else 'MISSED'} (1 client: {sr1['sustained_per_s']:,.0f}/s)")
PY
