#!/usr/bin/env bash
# Stops what bench/slurm/setup.sh started: scripts/slurm-localhost.sh --stop.
exec "$(cd "$(dirname "$0")/../.." && pwd)/scripts/slurm-localhost.sh" --stop "$@"
