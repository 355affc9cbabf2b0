#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test (unit and end-to-end).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --test
scripts/build.sh
# The container tests' base image (made once, offline; needs root).
if [ "$(id -u)" -eq 0 ]; then scripts/container-base-image.sh; fi
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600
