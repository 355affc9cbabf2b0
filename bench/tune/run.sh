#!/usr/bin/env bash
# The tuning benchmark (issue #33): Stoker's samplers and Optuna's on the
# suite of bench/tune/suite.cc, then a report (Markdown tables on stdout).
#   bench/tune/run.sh                 # 20 seeds, budgets 20/30/50/100
#   SEEDS=5 bench/tune/run.sh         # quicker
#   METHODS=stoker-gp-notr,stoker-gp bench/tune/run.sh   # before/after the trust region
# Needs Debian's python3-optuna and python3-scipy (for QMC); always runs
# /usr/bin/python3. About 20 minutes on 2 idle cores (RESULTS.md, 2026-11-30).
set -euo pipefail
cd "$(dirname "$0")/../.."
SEEDS=${SEEDS:-20}
BUILD=${BUILD:-build-tune}
OUT=${OUT:-$BUILD/bench-tune}
METHODS=${METHODS:-stoker-random,stoker-gp}  # the full table is for the last
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target tune-bench -j2
mkdir -p "$OUT"
BENCH="$BUILD/bin/tune-bench"
# Stoker: the suite in two shards, one per core.
"$BENCH" regret --seeds "$SEEDS" --methods "$METHODS" --shard 0/2 --out "$OUT/stoker0.jsonl" &
shard0=$!
"$BENCH" regret --seeds "$SEEDS" --methods "$METHODS" --shard 1/2 --out "$OUT/stoker1.jsonl"
wait "$shard0"
# Optuna: every sampler of Optuna 3.1 (TPE, multivariate TPE, CMA-ES, QMC,
# random; constant-liar TPE on the parallel entries), two worker processes.
/usr/bin/python3 -W ignore bench/tune/optuna_bench.py --bench "$BENCH" --seeds "$SEEDS" \
  --jobs 2 --out "$OUT/optuna.jsonl"
# Latency alone, so that the timings are not disturbed by the regret runs.
"$BENCH" latency --reps 5 --out "$OUT/latency.jsonl"
/usr/bin/python3 bench/tune/report.py "$OUT/stoker0.jsonl" "$OUT/stoker1.jsonl" \
  "$OUT/optuna.jsonl" --stoker "$METHODS" --latency "$OUT/latency.jsonl"
