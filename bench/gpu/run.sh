#!/usr/bin/env bash
# GPU training throughput through Stoker against bare Python on the same GPU,
# interleaved (bare, stoker, bare, stoker, ...) so that both see the same
# machine. Run on a GPU machine from the repository root after
# bench/gpu/pack.sh made build-gpu/ here (carry it to the machine).
#   bench/gpu/run.sh            env: PYTHON (default: python3 on PATH, which
#                               must import torch with CUDA), ROUNDS (3),
#                               STEPS (300), OUT (where logs and results go),
#                               EXTRA_CONFIG (lines added to stokerd's config)
# Prints the nodes Stoker found (NVML), each run's gpu-bench line and the
# medians with the ratio stoker/bare.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
carry=$root/build-gpu
export LD_LIBRARY_PATH=$carry/lib:/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
py=${PYTHON:-$(command -v python3)}
rounds=${ROUNDS:-3}
steps=${STEPS:-300}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
data=$(mktemp -d)
chmod 0755 "$data"
mkdir -p "$data/buckets/bench"
cp bench/gpu/cnn.py "$data/buckets/bench/cnn.py"
chmod -R a+rX "$data/buckets"
printf 'images:\n  - {match: "local/*", python: %s}\n%s\n' "$py" "${EXTRA_CONFIG:-}" >"$data/config.yaml"
. bench/gpu/daemon.sh
start_stokerd "$data" "$out"
gpu_type=$(first_gpu_type "$py")
cat >"$out/job.yaml" <<YAML
displayName: gpu-bench
jobSpec:
  workerPoolSpecs:
  - machineSpec: {machineType: n1-standard-8, acceleratorType: $gpu_type, acceleratorCount: 1}
    replicaCount: 1
    containerSpec:
      imageUri: local/torch
      command: [python3, gs://bench/cnn.py, --steps, "$steps"]
YAML
for r in $(seq "$rounds"); do
  "$py" bench/gpu/cnn.py --steps "$steps" | grep '^gpu-bench:' | tee -a "$out/bare.txt"
  "$stoker" jobs submit --config "$out/job.yaml" --follow >"$out/stoker-$r.log" 2>&1 ||
    { cat "$out/stoker-$r.log" >&2; exit 1; }
  grep -o 'gpu-bench: .*' "$out/stoker-$r.log" | tee -a "$out/stoker.txt"
done
"$py" - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def load(name):
    return [json.loads(l.split('gpu-bench: ', 1)[1]) for l in open(f'{out}/{name}.txt')]
bare, stoker = load('bare'), load('stoker')
for key in ('images_per_s', 'first_step_s'):
    b = statistics.median(x[key] for x in bare)
    s = statistics.median(x[key] for x in stoker)
    print(f'{key}: bare {b} stoker {s} ratio stoker/bare {s / b:.4f}')
print('device:', bare[0]['device'], '| CUDA_VISIBLE_DEVICES in the job:',
      stoker[0]['cuda_visible_devices'])
PY
