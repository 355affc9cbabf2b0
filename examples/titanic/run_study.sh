#!/usr/bin/env bash
# Tunes the Titanic trainer with Stoker: data and package into buckets, then
# the study in study.yaml, followed until it ends. Needs `stoker` on PATH
# (build/bin) and Debian's python3-torch.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
/usr/bin/python3 "$here/make_data.py" --out "$work/data" >/dev/null
stoker storage cp "$work/data" gs://titanic/data >/dev/null
# An sdist by hand: titanic-trainer-0.1/{setup.py,trainer/}.
mkdir -p "$work/titanic-trainer-0.1"
cp -r "$here/setup.py" "$here/trainer" "$work/titanic-trainer-0.1/"
find "$work/titanic-trainer-0.1" -name __pycache__ -prune -exec rm -rf {} +
tar -C "$work" -czf "$work/titanic-trainer.tar.gz" titanic-trainer-0.1
stoker storage cp "$work/titanic-trainer.tar.gz" gs://titanic/trainer/titanic-trainer.tar.gz >/dev/null
stoker hptuning submit --config "$here/study.yaml" --follow "$@"
