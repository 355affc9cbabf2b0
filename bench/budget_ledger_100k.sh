#!/usr/bin/env bash
# Submit RTT and start latency (100 jobs, supervisor clock) on a daemon whose month's
# ledger has 100,000 rows, with a budget kept and without, interleaved (issue #18).
# Ledger rows: the rows of 5 real jobs copied 20,000 times with new job ids by
# sqlite3 while the daemon is stopped. Needs curl, sqlite3 and build/bin.
set -eu
base=$(mktemp -d /tmp/bench18b-bl.XXXXXX); chmod 711 $base
printf 'images: [{match: "bench/*", python: /usr/bin/python3}]\ncpu_oversubscription: 64\n' >$base/config.yaml
start() {
  local d=$1 b=$2; rm -f $d/stokerd.addr
  $b/stokerd --data-dir $d --listen 127.0.0.1:0 --config $base/config.yaml --runner $b/stoker-run >>$d/stokerd.log 2>&1 &
  pid=$!
  for _ in $(seq 200); do [[ -s $d/stokerd.addr ]] && break; sleep 0.05; done
  url=$(cat $d/stokerd.addr); export STOKER_TOKEN=$(cat $d/token); H="authorization: Bearer $STOKER_TOKEN"
}
stop() { kill -TERM $pid; wait $pid || true; }
for v in budget nobudget; do
  b=${STOKER_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/bin}; tpl=$base/tpl-$v; mkdir $tpl
  start $tpl $b
  [[ $v == budget ]] && curl -sf -X PUT -H "$H" --data '{"monthlyGpuHours": 1000000}' $url/v1/budgets/user:$(curl -sf -H "$H" $url/v1/whoami | python3 -c "import json,sys; print(json.load(sys.stdin)[\"user\"])") >/dev/null
  $b/stoker-bench start-latency --server $url --data-dir $tpl --jobs 5 --out $base/warm.json >/dev/null
  stop
  cols=$(sqlite3 $tpl/stoker.db "SELECT group_concat(name, ', ') FROM pragma_table_info('usage')")
  sel=$(sed 's/\bjob_id\b/job_id + 1000000*k.i/' <<<"$cols")
  sqlite3 $tpl/stoker.db "CREATE TABLE tmpl AS SELECT * FROM usage; DELETE FROM usage;
    WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM k WHERE i < 20000)
    INSERT INTO usage ($cols) SELECT $sel FROM tmpl, k; DROP TABLE tmpl;"
  echo "$v ledger rows: $(sqlite3 $tpl/stoker.db 'select count(*) from usage')"
done
n=0
for v in budget nobudget nobudget budget budget nobudget; do
  n=$((n+1)); d=$base/run$n; cp -a $base/tpl-$v $d; b=${STOKER_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/bin}
  start $d $b
  nb=$(curl -sf -H "$H" $url/v1/budgets | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["budgets"]))')
  t0=$(date +%s.%N)
  $b/stoker-bench start-latency --server $url --data-dir $d --jobs 100 --out ${BENCH_OUT:-/tmp}/budget-ledger-$n-$v.json | grep -E 'supervisor clock|submit RTT'
  echo "  run $n $v (budgets: $nb) wall $(python3 -c "import time; print(round(time.time()-$t0,1))") s  $(uptime)"
  stop; rm -rf $d
done
rm -rf $base
