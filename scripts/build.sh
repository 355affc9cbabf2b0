#!/usr/bin/env bash
# Configures and builds Stoker into build/ (binaries in build/bin).
#   scripts/build.sh                  every target (tests and benchmarks too)
#   scripts/build.sh TARGET...        only these (the quick start builds the
#                                     three programs a user runs)
# STOKER_QUICK_BUILD=1 (the quick start sets it) compiles each target's files
# 16 at a time as one translation unit (CMake's unity build) and, for a new
# build dir, with Ninja when it is installed: about half the time of the
# three programs (bench/RESULTS.md, "Quick start build: a unity build";
# docs/decisions/0044). Without it every file is its own translation unit,
# as tests and sanitizers want.
set -euo pipefail
cd "$(dirname "$0")/.."
args=(-DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}")
if [ "${STOKER_QUICK_BUILD:-0}" = 1 ]; then
  args+=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16)
  if [ ! -f build/CMakeCache.txt ] && command -v ninja >/dev/null; then args+=(-G Ninja); fi
else
  args+=(-DCMAKE_UNITY_BUILD=OFF)
fi
cmake -S . -B build "${args[@]}" >/dev/null
if [ $# -gt 0 ]; then
  cmake --build build -j"$(nproc)" --target "$@"
else
  cmake --build build -j"$(nproc)"
fi
