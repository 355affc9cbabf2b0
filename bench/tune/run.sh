#!/usr/bin/env bash
# The tuning benchmark: Stoker's samplers and Optuna's on the same test
# functions, then a report (Markdown tables on stdout).
#   bench/tune/run.sh                 # 20 seeds, budgets 25/50/100
#   SEEDS=5 bench/tune/run.sh         # quicker
# Needs Debian's python3-optuna (apt-get install -y python3-optuna); always
# runs /usr/bin/python3. Takes about 10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
SEEDS=${SEEDS:-20}
BUILD=${BUILD:-build-tune}
OUT=${OUT:-$BUILD/bench-tune}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target tune-bench -j2
mkdir -p "$OUT"
# Regret runs: Stoker and Optuna side by side, one core each.
"$BUILD/bin/tune-bench" regret --seeds "$SEEDS" --budget 100 --out "$OUT/stoker.jsonl" &
stoker_pid=$!
/usr/bin/python3 -W ignore bench/tune/optuna_bench.py --seeds "$SEEDS" --budget 100 \
  --out "$OUT/optuna.jsonl"
wait "$stoker_pid"
# Latency alone, so that the timings are not disturbed by the regret runs.
"$BUILD/bin/tune-bench" latency --reps 5 --out "$OUT/latency.jsonl"
/usr/bin/python3 bench/tune/report.py "$OUT/stoker.jsonl" "$OUT/optuna.jsonl" \
  --latency "$OUT/latency.jsonl"
