#!/usr/bin/env bash
# A one-node Slurm on this host for bench/ (Slurm's default scheduler
# settings, the node as `slurmd -C` sees it): scripts/slurm-localhost.sh.
exec "$(cd "$(dirname "$0")/../.." && pwd)/scripts/slurm-localhost.sh" "$@"
