#!/usr/bin/env bash
# Replica telemetry on a real GPU (docs/telemetry.md): two jobs share one GPU
# (acceleratorCount 0.5 each); one trains bench/gpu/cnn.py, the other holds
# CUDA memory and sleeps. NVML's per-process figures must tell them apart:
# `jobs top` while they run, `jobs describe` (resource table, idle-GPU flag)
# after, /metrics and the usage ledger. Run on a GPU machine from the
# repository root after bench/gpu/pack.sh made build-gpu/ here (carried).
#   OUT=/tmp/x bench/gpu/telemetry.sh      env: PYTHON, STEPS (12000)
set -euo pipefail
cd "$(dirname "$0")/../.."
carry=$PWD/build-gpu
export LD_LIBRARY_PATH=$carry/lib:/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
py=${PYTHON:-$(command -v python3)}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
data=$(mktemp -d)
chmod 0755 "$data"
mkdir -p "$data/buckets/bench"
cp bench/gpu/cnn.py "$data/buckets/bench/cnn.py"
cat >"$data/buckets/bench/idle.py" <<'PY'
import time, torch
x = torch.zeros(64 << 20, device="cuda")  # 256 MiB held, no kernels after this
print("idle holds", x.numel() * 4 >> 20, "MiB", flush=True)
time.sleep(float(__import__("sys").argv[1]))
PY
chmod -R a+rX "$data/buckets"
printf 'images:\n  - {match: "local/*", python: %s}\ntelemetry_seconds: 1\ngpu_telemetry_seconds: 1\n' \
  "$py" >"$data/config.yaml"
. bench/gpu/daemon.sh
start_stokerd "$data" "$out"
gpu_type=$(first_gpu_type "$py")
job() {  # name, command...
  local name=$1; shift
  local cmd; cmd=$(printf '"%s", ' "$@"); cmd=${cmd%, }
  cat >"$out/$name.yaml" <<YAML
displayName: $name
jobSpec:
  workerPoolSpecs:
  - machineSpec: {machineType: n1-standard-8, acceleratorType: $gpu_type, acceleratorCount: 0.5}
    replicaCount: 1
    containerSpec: {imageUri: local/torch, command: [$cmd]}
YAML
  "$stoker" jobs submit --config "$out/$name.yaml" | grep -o 'Submitted job [0-9]*' | grep -o '[0-9]*$'
}
busy=$(job busy python3 gs://bench/cnn.py --steps "${STEPS:-12000}")
idle=$(job idle python3 gs://bench/idle.py 30)
echo "busy=$busy idle=$idle" | tee "$out/jobs.txt"
sleep 15
"$stoker" jobs top --once | tee "$out/top.txt"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv | tee "$out/nvidia-smi.txt"
for j in "$busy" "$idle"; do
  for _ in $(seq 120); do
    s=$("$stoker" --format json jobs describe "$j" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["state"])')
    [[ $s == JOB_STATE_SUCCEEDED || $s == JOB_STATE_FAILED ]] && break
    sleep 1
  done
  "$stoker" jobs describe "$j" | tee "$out/describe-$j.txt"
  curl -s -H "authorization: Bearer $STOKER_TOKEN" \
    "$STOKER_SERVER/v1/projects/local/locations/local/customJobs/$j/telemetry" >"$out/telemetry-$j.json" || true
done
curl -s -H "authorization: Bearer $STOKER_TOKEN" "$STOKER_SERVER/metrics" | grep -i gpu | tee "$out/metrics-gpu.txt" | head -40
"$stoker" usage --days 1 | tee "$out/usage.txt" || true
grep -h 'gpu-bench:' "$data"/jobs/"$busy"/*/output.log | tee "$out/busy-bench.txt" || true
