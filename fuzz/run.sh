#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a while.
#
#   fuzz/run.sh [SECONDS] [TARGET...]      (default: 30 s, every target)
#
# Env: STOKER_FUZZ_BUILD (build dir, default build-fuzz), STOKER_FUZZ_JOBS
# (build parallelism, default 2). New corpus entries go to
# $STOKER_FUZZ_BUILD/corpus/<target>/ (fuzz/corpus/ holds the seeds and is only
# read); crashing inputs to $STOKER_FUZZ_BUILD/artifacts/. Exits non-zero when
# any target crashed, leaked, hit a sanitizer error or timed out on an input.
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-30}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(fuzz_custom_job fuzz_study fuzz_gcloud_flags fuzz_archive fuzz_http_target
  fuzz_legacy_job fuzz_list_filter fuzz_tfevents)
BUILD=${STOKER_FUZZ_BUILD:-build-fuzz}
JOBS=${STOKER_FUZZ_JOBS:-2}

# A unity build, with Ninja for a new build dir, as scripts/build.sh makes
# build/ (decision 0047).
gen=()
[ ! -f "$BUILD/CMakeCache.txt" ] && command -v ninja >/dev/null && gen=(-G Ninja)
CC=clang CXX=clang++ cmake -S . -B "$BUILD" "${gen[@]}" -DSTOKER_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 >/dev/null ||
  { echo "run.sh: configuring $BUILD with clang failed" >&2; exit 2; }
cmake --build "$BUILD" -j"$JOBS" --target "${TARGETS[@]}" ||
  { echo "run.sh: building the fuzz targets failed" >&2; exit 2; }

failed=0
printf '\n%-18s %12s %8s %s\n' TARGET EXECS SECONDS RESULT
summary=()
for t in "${TARGETS[@]}"; do
  work="$BUILD/corpus/$t"
  art="$BUILD/artifacts/$t/"
  mkdir -p "$work" "$art"
  log="$BUILD/$t.log"
  start=$(date +%s)
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    "$BUILD/bin/$t" "$work" "fuzz/corpus/$t" -max_total_time="$SECONDS_PER_TARGET" \
    -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$art" >"$log" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ $rc -eq 0 ]; then
    result=ok
  else
    failed=1
    crash=$(ls -t "$art" 2>/dev/null | head -1)
    result="FAILED (rc=$rc${crash:+, input: $art$crash}; log: $log)"
  fi
  summary+=("$(printf '%-18s %12s %8s %s' "$t" "${execs:-?}" "$elapsed" "$result")")
  echo "${summary[-1]}"
  if [ $rc -ne 0 ]; then
    grep -m1 -E 'ERROR: |runtime error|fuzz_[a-z_]+: ' "$log" | sed 's/^/    /'
  fi
done
exit $failed
