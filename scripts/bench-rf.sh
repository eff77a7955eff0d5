#!/usr/bin/env bash
# make bench-rf: acks=all produce throughput of one broker (RF=1) against
# three brokers on this machine (RF=3), in one sitting, plaintext, no object
# store. All replicas share this machine's disk and cores, so RF=3 writes
# three times the bytes to the same disk: the ratio is a floor for what
# separate machines give. It also prints the CPU time the brokers and the
# client used per 100,000 records in each run: where they share the cores,
# the ratio of their sums is about what the CPU alone allows. BENCH_FLAGS
# adds flags to both runs of strata bench produce, such as
# BENCH_FLAGS="--in-flight 5".
set -euo pipefail
cd "$(dirname "$0")/.."
S=./bin/strata
RECORDS=${RECORDS:-400000}
DIR=$(mktemp -d)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in 27500 27501 27502 27610 27611 27612 27620 27621 27622 27630 27631 27632; do
  port_free "$p" || { echo "port $p is in use; bench-rf needs 27500-27502 and 27610-27632" >&2; exit 1; }
done

bench() { # brokers topic -> records/s; the client's CPU seconds go to $DIR/client.cpu
  local TIMEFORMAT=%U+%S
  { time "$S" bench produce --broker "$1" --topic "$2" --records "$RECORDS" --record-size 1024 --acks all ${BENCH_FLAGS:-} \
    >>"$DIR/bench.out" 2>&1; } 2>"$DIR/client.time"
  awk '{split($0, t, "+"); print t[1] + t[2]}' "$DIR/client.time" >"$DIR/client.cpu"
  awk '/^  throughput/ {v = $2} END {print v}' "$DIR/bench.out"
}

cpu() { # pids... -> CPU seconds (user and system) they used so far, from /proc (USER_HZ 100)
  local total=0 p
  for p in "$@"; do
    total=$(awk -v t="$total" '{sub(/^.*\) /, ""); print t + ($12 + $13) / 100}' "/proc/$p/stat")
  done
  echo "$total"
}
per100k() { awk -v s="$1" -v n="$RECORDS" 'BEGIN {printf "%.2f", s * 100000 / n}'; }

"$S" serve --node-id 1 --data-dir "$DIR/single" --listen 127.0.0.1:27500 --raft-listen 127.0.0.1:27501 \
  --gossip-listen 127.0.0.1:27502 --admin-listen "" --object-store-type none >"$DIR/single.log" 2>&1 &
single=$!
PIDS="$single"
for _ in $(seq 150); do "$S" topic create rf1 --partitions 3 --broker 127.0.0.1:27500 --timeout 2s >/dev/null 2>&1 && break; sleep 0.2; done
before=$(cpu "$single")
rf1=$(bench 127.0.0.1:27500 rf1)
rf1_brokers=$(awk -v a="$(cpu "$single")" -v b="$before" 'BEGIN {print a - b}')
rf1_client=$(cat "$DIR/client.cpu")
kill "$single"; wait "$single" 2>/dev/null || true
PIDS=""

JOIN=127.0.0.1:27612,127.0.0.1:27622,127.0.0.1:27632
for id in 1 2 3; do
  b=$((27600 + id * 10))
  "$S" serve --node-id "$id" --data-dir "$DIR/b$id" --listen "127.0.0.1:$b" --raft-listen "127.0.0.1:$((b + 1))" \
    --gossip-listen "127.0.0.1:$((b + 2))" --admin-listen "" --gossip-join "$JOIN" --gossip-bootstrap-expect 3 \
    --gossip-profile local --object-store-type none >"$DIR/b$id.log" 2>&1 &
  PIDS="$PIDS $!"
done
BROKERS=127.0.0.1:27610,127.0.0.1:27620,127.0.0.1:27630
for _ in $(seq 300); do "$S" topic create rf3 --partitions 3 --replication-factor 3 --broker "$BROKERS" --timeout 2s >/dev/null 2>&1 && break; sleep 0.3; done
before=$(cpu $PIDS)
rf3=$(bench "$BROKERS" rf3)
rf3_brokers=$(awk -v a="$(cpu $PIDS)" -v b="$before" 'BEGIN {print a - b}')
rf3_client=$(cat "$DIR/client.cpu")

echo "CPU seconds per 100,000 records: RF=1 broker $(per100k "$rf1_brokers"), client $(per100k "$rf1_client");" \
  "RF=3 brokers $(per100k "$rf3_brokers"), client $(per100k "$rf3_client");" \
  "with the same cores busy in both runs, the CPU alone gives a ratio of $(awk -v a="$rf1_brokers" -v b="$rf1_client" -v c="$rf3_brokers" -v d="$rf3_client" 'BEGIN {printf "%.2f", (a + b) / (c + d)}')"
echo "RF=1 acks=all: $rf1 records/s; RF=3 acks=all: $rf3 records/s; ratio $(awk -v a="$rf3" -v b="$rf1" 'BEGIN {printf "%.2f", a / b}')"
