#!/bin/sh
# Long form of the crash test (issue #7): the same code as
# tests/e2e/test_crash.py with bigger numbers.
#
#   bench/crash/run.sh [--minutes N] [--seed S]
#
# Binaries come from $STOKER_BIN_DIR (default build/bin). The run prints its
# seed first and its counts last (kills by kind and by daemon-kill mode,
# jobs, studies, checks, violations); exit status 0 means no violation.
# Recorded runs: bench/crash/RESULTS.md.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export STOKER_BIN_DIR="${STOKER_BIN_DIR:-$root/build/bin}"
export STOKER_SOURCE_DIR="$root"
export PYTHONDONTWRITEBYTECODE=1 PYTHONWARNINGS=ignore::ResourceWarning
minutes=20
seed=""
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (use --minutes N, --seed S)" >&2; exit 2 ;;
  esac
done
cd "$root/tests/e2e"
exec python3 test_crash.py --minutes "$minutes" ${seed:+--seed "$seed"}
