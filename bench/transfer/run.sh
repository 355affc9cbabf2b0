#!/usr/bin/env bash
# Object transfer throughput against cp(1) on the same disk, side by side in
# one run: one big file (default 5 GB) and many small files (default 10,000
# of 4-64 KiB), up (`stoker gsutil cp`) and down, with the ratio to cp and
# the daemon's peak memory (VmHWM). Deletes its data at the end.
#
#   bench/transfer/run.sh [--big-mb 5000] [--files 10000] [--dir DIR] BIN_DIR
#
# Disk: about twice the big file at peak (the source is deleted before the
# download). The cp timings include `sync` as well as without it, since
# stokerd fsyncs every object before it answers.
set -euo pipefail
big_mb=5000
files=10000
base=${TMPDIR:-/tmp}
while [[ $# -gt 0 ]]; do
  case $1 in
    --big-mb) big_mb=$2; shift 2 ;;
    --files) files=$2; shift 2 ;;
    --dir) base=$2; shift 2 ;;
    *) bin=$(cd "$1" && pwd); shift ;;
  esac
done
[[ -n ${bin:-} ]] || { echo "usage: $0 [--big-mb N] [--files N] [--dir DIR] BIN_DIR" >&2; exit 2; }

work=$(mktemp -d "$base/stoker-transfer.XXXXXX")
pid=
cleanup() {
  [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/d"
"$bin/stokerd" --data-dir "$work/d" --listen 127.0.0.1:0 >"$work/d.log" 2>&1 &
pid=$!
for _ in $(seq 200); do [[ -s $work/d/stokerd.addr ]] && break; sleep 0.05; done
export STOKER_HOME=$work/d
st() { "$bin/stoker" gsutil -q "$@"; }
st mb gs://bench >/dev/null
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc -l; }
mbps() { echo "scale=1; $1 / 1000000 / $2" | bc -l; }
hwm() { awk '/VmHWM/ {print int($2/1024)}' /proc/$pid/status; }
row() {  # name bytes stoker_secs cp_secs cp_sync_secs
  printf "| %-28s | %8.1f MB/s | %8.1f MB/s | %8.1f MB/s | %5.0f%% | %5.0f%% |\n" "$1" \
    "$(mbps "$2" "$3")" "$(mbps "$2" "$4")" "$(mbps "$2" "$5")" \
    "$(echo "100 * $4 / $3" | bc -l)" "$(echo "100 * $5 / $3" | bc -l)"
}

# ---- one big file
bytes=$((big_mb * 1000 * 1000))
head -c "$bytes" /dev/urandom >"$work/big.bin"
sync
t0=$(now); cp "$work/big.bin" "$work/copy.bin"; t1=$(now); sync; t2=$(now)
cp_s=$(secs "$t0" "$t1"); cp_sync_s=$(secs "$t0" "$t2")
rm -f "$work/copy.bin"; sync
t0=$(now); st cp "$work/big.bin" gs://bench/big.bin; t1=$(now)
up_s=$(secs "$t0" "$t1")
hwm_up=$(hwm)
rm -f "$work/big.bin"; sync
t0=$(now); st cp gs://bench/big.bin "$work/back.bin"; t1=$(now)
down_s=$(secs "$t0" "$t1")
hwm_down=$(hwm)
rm -f "$work/back.bin"
st rm gs://bench/big.bin 2>/dev/null

# ---- many small files
mkdir -p "$work/small"
python3 - "$work/small" "$files" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(1)
for i in range(n):
    d = os.path.join(root, "d%02d" % (i % 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d.bin" % i), "wb") as f:
        f.write(os.urandom(rnd.randint(4 << 10, 64 << 10)))
PY
sync
small_bytes=$(du -sb "$work/small" | cut -f1)
t0=$(now); cp -r "$work/small" "$work/small-copy"; t1=$(now); sync; t2=$(now)
scp_s=$(secs "$t0" "$t1"); scp_sync_s=$(secs "$t0" "$t2")
rm -rf "$work/small-copy"; sync
t0=$(now); st -m cp -r "$work/small" gs://bench/small; t1=$(now)
sup_s=$(secs "$t0" "$t1")
t0=$(now); st -m cp -r gs://bench/small "$work/small-back"; t1=$(now)
sdown_s=$(secs "$t0" "$t1")
hwm_small=$(hwm)
diff -r "$work/small" "$work/small-back" >/dev/null && same=yes || same=NO

echo "| transfer | stoker | cp | cp + sync | stoker / cp | stoker / (cp + sync) |"
echo "|---|---|---|---|---|---|"
row "upload ${big_mb} MB file" "$bytes" "$up_s" "$cp_s" "$cp_sync_s"
row "download ${big_mb} MB file" "$bytes" "$down_s" "$cp_s" "$cp_sync_s"
row "upload $files small files" "$small_bytes" "$sup_s" "$scp_s" "$scp_sync_s"
row "download $files small files" "$small_bytes" "$sdown_s" "$scp_s" "$scp_sync_s"
echo
echo "seconds: big up $up_s down $down_s cp $cp_s cp+sync $cp_sync_s; small ($small_bytes bytes) up $sup_s down $sdown_s cp -r $scp_s cp -r+sync $scp_sync_s; small round trip identical: $same"
echo "stokerd VmHWM: after the big upload ${hwm_up} MiB, after the big download ${hwm_down} MiB, after the small files ${hwm_small} MiB"
