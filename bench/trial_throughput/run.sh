#!/usr/bin/env bash
# Trial throughput (issue #29): N_STUDIES studies x N_TRIALS trials of a
# trivial hypertune trainer end to end through a real stokerd, in trials per
# second, next to the same studies run by Optuna in one process.
#
#   bench/trial_throughput/run.sh                        # 30 x 30 (the benchmark)
#   N_STUDIES=3 N_TRIALS=3 bench/trial_throughput/run.sh # smoke check
#
# Environment (defaults in brackets):
#   STOKER_BIN_DIR  [build/bin]  stokerd and stoker-run to run; nothing is built
#   N_STUDIES [30]  N_TRIALS [30]  PARALLEL [3] (each study's parallelTrialCount)
#   ALGORITHM [ALGORITHM_UNSPECIFIED]  (Stoker's GP-BO; or RANDOM_SEARCH)
#   MACHINE [n1-standard-1]  CPU_OVERSUB [16]  POLL_MS [20]
#   WARM [1]  (0: warm_starts: false)   PRELOAD [the daemon's: torch,numpy; "" = none]
#   WARMUP [1] (0: no 1-trial study before the clock starts)
#   SKIP_OPTUNA [0]  OPTUNA_ROWS [inproc-tpe,inproc-random,subproc-tpe]
#   OPTUNA_WORKERS [nproc]  PYTHON [/usr/bin/python3]
#   OUT [a new temp dir]  KEEP [0] (1: keep the daemon's data dir and traces)
# Extra arguments go to stoker_side.py (see its --help).
#
# Needs Debian's python3-optuna for the Optuna rows (apt-get install -y
# python3-optuna); runs as root (the trainers run as root:
# default_unix_user: root, allow_root_trainers: true).
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=bench/trial_throughput
PY=${PYTHON:-/usr/bin/python3}
BIN=${STOKER_BIN_DIR:-build/bin}
N_STUDIES=${N_STUDIES:-30}
N_TRIALS=${N_TRIALS:-30}
OUT=${OUT:-$(mktemp -d /tmp/trial-throughput.XXXXXX)}
mkdir -p "$OUT"
[[ -x "$BIN/stokerd" && -x "$BIN/stoker-run" ]] || { echo "no stokerd/stoker-run in $BIN" >&2; exit 2; }

args=(--bin-dir "$BIN" --studies "$N_STUDIES" --trials "$N_TRIALS"
      --parallel "${PARALLEL:-3}" --algorithm "${ALGORITHM:-ALGORITHM_UNSPECIFIED}"
      --machine "${MACHINE:-n1-standard-1}" --cpu-oversubscription "${CPU_OVERSUB:-16}"
      --poll-ms "${POLL_MS:-20}" --python "$PY" --out "$OUT/stoker.json")
[[ "${WARM:-1}" == 0 ]] && args+=(--no-warm)
[[ "${WARMUP:-1}" == 0 ]] && args+=(--no-warmup)
[[ -n "${PRELOAD+set}" ]] && args+=(--preload "$PRELOAD")
[[ "${KEEP:-0}" == 1 ]] && args+=(--keep)

echo "== Stoker: $N_STUDIES studies x $N_TRIALS trials (results in $OUT)" >&2
start=$(date +%s%N)
rc=0
"$PY" "$HERE/stoker_side.py" "${args[@]}" "$@" >/dev/null || rc=$?
echo "== Stoker side took $(( ($(date +%s%N) - start) / 1000000 )) ms, rc $rc" >&2
[[ -f "$OUT/stoker.json" ]] || exit 1

if [[ "${SKIP_OPTUNA:-0}" != 1 ]]; then
  echo "== Optuna in one process: the same studies" >&2
  "$PY" "$HERE/optuna_ceiling.py" --studies "$N_STUDIES" --trials "$N_TRIALS" \
    --rows "${OPTUNA_ROWS:-inproc-tpe,inproc-random,subproc-tpe}" \
    --workers "${OPTUNA_WORKERS:-$(nproc)}" --python "$PY" --out "$OUT/optuna.json" >/dev/null
  "$PY" "$HERE/report.py" "$OUT/stoker.json" "$OUT/optuna.json" | tee "$OUT/summary.md"
else
  "$PY" "$HERE/report.py" "$OUT/stoker.json" | tee "$OUT/summary.md"
fi
exit "$rc"
