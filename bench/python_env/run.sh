#!/bin/sh
# Requirement environments: build once vs reuse through the real stoker-run
# (issue #16: reuse < 50 ms). See bench.py; results in bench/RESULTS.md.
#   bench/python_env/run.sh [--build-dir build] [bench.py flags: --runs 30 --builds 3 --at-once 8]
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=build
if [ "$1" = "--build-dir" ]; then build=$2; shift 2; fi
case $build in /*) ;; *) build=$root/$build ;; esac
cmake --build "$build" --target stoker-run >/dev/null
exec /usr/bin/python3 "$here/bench.py" --bin-dir "$build/bin" "$@"
