#!/usr/bin/env bash
# From a fresh machine to a trained model: installs dependencies, builds,
# starts the local daemon (the CLI does that on first use), and runs the
# Titanic example, a PyTorch trainer written for Vertex AI, to completion.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Only what the quick start runs: the daemon, the CLI and the supervisor
# (scripts/test.sh builds everything, tests and benchmarks too; in the same
# build dir, so neither recompiles what the other built).
scripts/build.sh stokerd stoker stoker-run
export PATH="$PWD/build/bin:$PATH"
data=$(mktemp -d)
/usr/bin/python3 examples/titanic/make_data.py --out "$data"
stoker storage cp "$data" gs://titanic/data
stoker jobs submit --config examples/titanic/job.yaml \
  --package-path examples/titanic/trainer --module-name trainer.task --follow
echo
echo "The model is in gs://titanic/output/model/:"
stoker storage ls gs://titanic/output/model/
home=${STOKER_HOME:-$HOME/.local/share/stoker}
[ -z "${STOKER_HOME:-}" ] && [ "$(id -u)" -eq 0 ] && home=/var/lib/stoker
echo "(on disk: $home/buckets/titanic/output/model/)"
