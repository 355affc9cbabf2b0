#!/usr/bin/env bash
# Configures and builds Stoker into build/ (binaries in build/bin).
#   scripts/build.sh                  every target (tests and benchmarks too)
#   scripts/build.sh TARGET...        only these (the quick start builds the
#                                     three programs a user runs)
# A unity build: CMake compiles each library's files 16 at a time as one
# translation unit (each test file stays its own), with Ninja for a new
# build dir when it is installed. Every target builds in about half the
# time of one translation unit per file (bench/RESULTS.md, "Quick start
# build: a unity build" and "Whole build: a unity build";
# docs/decisions/0044, 0047).
# STOKER_UNITY_BUILD=0: one translation unit per file, for a developer who
# rebuilds after editing one file (a unity batch recompiles all 16).
set -euo pipefail
cd "$(dirname "$0")/.."
args=(-DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}")
if [ "${STOKER_UNITY_BUILD:-1}" = 1 ]; then
  args+=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16)
else
  args+=(-DCMAKE_UNITY_BUILD=OFF)
fi
if [ ! -f build/CMakeCache.txt ] && command -v ninja >/dev/null; then args+=(-G Ninja); fi
cmake -S . -B build "${args[@]}" >/dev/null
if [ $# -gt 0 ]; then
  cmake --build build -j"$(nproc)" --target "$@"
else
  cmake --build build -j"$(nproc)"
fi
