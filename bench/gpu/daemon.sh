# Sourced by bench/gpu/run.sh and telemetry.sh: starts the carried stokerd.
#   start_stokerd DATA OUT   stokerd on DATA (its config.yaml already written),
#                            log in OUT/stokerd.log; stopped, and DATA removed,
#                            when the script exits. Sets $stoker, exports
#                            STOKER_SERVER and STOKER_TOKEN for the CLI, and
#                            writes OUT/nodes.txt.
#   first_gpu_type PY        the Vertex type of the node's first GPU (NVML).
# Needs $carry (build-gpu/ made by pack.sh).
start_stokerd() {
  local data=$1 out=$2
  "$carry/bin/stokerd" --data-dir "$data" --listen 127.0.0.1:0 >"$out/stokerd.log" 2>&1 &
  stokerd_pid=$!
  trap 'kill "$stokerd_pid" 2>/dev/null; wait "$stokerd_pid" 2>/dev/null; rm -rf "'"$data"'"' EXIT
  for _ in $(seq 200); do
    [[ -s $data/stokerd.addr && -s $data/token ]] && break
    kill -0 "$stokerd_pid" 2>/dev/null || { cat "$out/stokerd.log" >&2; exit 1; }
    sleep 0.05
  done
  export STOKER_SERVER STOKER_TOKEN
  STOKER_SERVER=$(cat "$data/stokerd.addr")
  STOKER_TOKEN=$(cat "$data/token")
  stoker=$carry/bin/stoker
  "$stoker" nodes | tee "$out/nodes.txt"
}

first_gpu_type() {
  "$stoker" --format json nodes | "$1" -c \
    'import json,sys; print(json.load(sys.stdin)["nodes"][0]["gpus"][0]["type"])'
}
