#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test (unit and end-to-end).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600
