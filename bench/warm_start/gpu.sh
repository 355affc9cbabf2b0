#!/bin/bash
# Warm vs cold trial starts on a GPU machine (bench/RESULTS.md, "Warm trial
# starts"). Runs on the device machine from the repository root, with the
# stripped binaries, their Debian libraries and the Python helpers carried
# in .gpucarry/ (bin/, lib/, share/stoker/python/), made by:
#   mkdir -p .gpucarry/{bin,lib,share/stoker/python}
#   strip -o .gpucarry/bin/X build/bin/X   # stokerd stoker stoker-run
#   cp -L <each non-libc library ldd lists> .gpucarry/lib/
#   cp -r src/python/{hypertune,stoker_zygote.py} .gpucarry/share/stoker/python/
# Writes $OUT/gpu.json, $OUT/gpu.log and $OUT/machine.txt.
set -u
OUT=${OUT:-/tmp/warm-gpu-out}
mkdir -p "$OUT"
PY=${PY:-/opt/torch/.venv/bin/python3}
export LD_LIBRARY_PATH=$PWD/.gpucarry/lib
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  nproc
  "$PY" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'
  ls -ld "$PY" "$(dirname "$PY")" "$(dirname "$(dirname "$PY")")"
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
# stoker-run forks trainers from a zygote only with an interpreter whose
# directories no other account may change; say so if this image's do not.
for d in "$(dirname "$PY")" "$(dirname "$(dirname "$PY")")"; do
  if [ -n "$(find "$d" -maxdepth 0 -perm /022)" ] || [ "$(stat -c %u "$d")" != 0 ]; then
    echo "note: $d may be changed by another account; making it root's 0755 for this run" | tee -a "$OUT/machine.txt"
    chown root "$d" && chmod go-w "$d"
  fi
done
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*) ACC=NVIDIA_H200_141GB ;;
  *) ACC=NVIDIA_H100_80GB ;;
esac
timeout 380 "$PY" bench/warm_start/bench.py --bin-dir .gpucarry/bin --python "$PY" --gpu \
  --accelerator "$ACC" --gpu-share 0.25 --runs "${RUNS:-8}" --trials 16 --parallel 4 \
  --out "$OUT/gpu.json" >"$OUT/gpu.log" 2>&1
rc=$?
tail -c 6000 "$OUT/gpu.log"
exit $rc
