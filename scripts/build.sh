#!/usr/bin/env bash
# Configures and builds Stoker into build/ (binaries in build/bin).
#   scripts/build.sh                  every target (tests and benchmarks too)
#   scripts/build.sh TARGET...        only these (the quick start builds the
#                                     three programs a user runs)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" >/dev/null
if [ $# -gt 0 ]; then
  cmake --build build -j"$(nproc)" --target "$@"
else
  cmake --build build -j"$(nproc)"
fi
