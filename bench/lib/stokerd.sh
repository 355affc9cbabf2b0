# Sourced by bench scripts: starts a stokerd on a data dir that already holds
# its config.yaml, stops it (and removes the dir unless keep=1) on exit, and
# sets `pid` and `url`.
#   start_stokerd BIN_DIR DATA_DIR KEEP
start_stokerd() {
  local bin_dir=$1
  bench_data=$2
  bench_keep=$3
  "$bin_dir/stokerd" --data-dir "$bench_data" --listen 127.0.0.1:0 >"$bench_data/stokerd.log" 2>&1 &
  pid=$!
  trap stop_stokerd EXIT
  for _ in $(seq 200); do
    [[ -s $bench_data/stokerd.addr ]] && break
    kill -0 "$pid" 2>/dev/null || { cat "$bench_data/stokerd.log" >&2; exit 1; }
    sleep 0.05
  done
  url=$(cat "$bench_data/stokerd.addr")
}

stop_stokerd() {
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [[ $bench_keep == 0 ]]; then rm -rf "$bench_data"; else echo "data kept in $bench_data" >&2; fi
}
