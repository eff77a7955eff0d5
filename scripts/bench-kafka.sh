#!/usr/bin/env bash
# make bench-kafka: the Kafka front end beside gRPC, in one sitting, on one
# broker (plaintext, loopback, no object store). strata bench produce and
# bench consume move the same 1 KiB records, acks=all, over gRPC (Strata's
# client) and with --kafka through the Kafka listener (franz-go's kgo),
# ROUNDS times in turn so that a busy machine hurts both alike. It prints
# each run's records/s and the broker's and the client's CPU seconds per
# 100,000 records, then the median Kafka/gRPC ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
S=./bin/strata
RECORDS=${RECORDS:-300000}
ROUNDS=${ROUNDS:-3}
PARTITIONS=${PARTITIONS:-4}
DIR=$(mktemp -d)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in 27700 27701 27702 27709; do
  port_free "$p" || { echo "port $p is in use; bench-kafka needs 27700-27702 and 27709" >&2; exit 1; }
done
GRPC=127.0.0.1:27700 KAFKA=127.0.0.1:27709

cpu() { awk '{sub(/^.*\) /, ""); print ($12 + $13) / 100}' "/proc/$1/stat"; } # USER_HZ 100
per100k() { awk -v s="$1" -v n="$2" 'BEGIN {printf "%.2f", s * 100000 / n}'; }

"$S" serve --node-id 1 --data-dir "$DIR/data" --listen "$GRPC" --raft-listen 127.0.0.1:27701 \
  --gossip-listen 127.0.0.1:27702 --admin-listen "" --object-store-type none --kafka-listen "$KAFKA" >"$DIR/broker.log" 2>&1 &
broker=$!
PIDS="$broker"
for _ in $(seq 150); do "$S" topic create kbench --partitions "$PARTITIONS" --broker "$GRPC" --timeout 2s >/dev/null 2>&1 && break; sleep 0.2; done

# run NAME ARGS... : one bench, its summary in $DIR/NAME.json; prints
# "records/s broker-cpu/100k client-cpu/100k".
run() {
  local name=$1; shift
  local b0 TIMEFORMAT=%U+%S
  b0=$(cpu "$broker")
  { time "$S" "$@" --broker "$GRPC" --json >"$DIR/$name.json" 2>"$DIR/$name.err"; } 2>"$DIR/$name.time"
  local n rate bcpu ccpu
  n=$(sed -n 's/.*"records": *\([0-9]*\).*/\1/p' "$DIR/$name.json" | head -1)
  rate=$(sed -n 's/.*"records_per_s": *\([0-9.]*\).*/\1/p' "$DIR/$name.json" | head -1)
  bcpu=$(awk -v a="$(cpu "$broker")" -v b="$b0" 'BEGIN {print a - b}')
  ccpu=$(awk '{split($0, t, "+"); print t[1] + t[2]}' "$DIR/$name.time")
  echo "$rate $(per100k "$bcpu" "$n") $(per100k "$ccpu" "$n")"
}

printf '%-22s %12s %22s %22s\n' run records/s "broker CPU-s/100k" "client CPU-s/100k"
: >"$DIR/ratios"
for r in $(seq "$ROUNDS"); do
  for fe in grpc kafka; do
    k=""; [ "$fe" = kafka ] && k="--kafka $KAFKA"
    # shellcheck disable=SC2086
    set -- $(run "p-$fe-$r" bench produce --topic kbench --records "$RECORDS" --record-size 1024 --acks all $k)
    printf '%-22s %12s %22s %22s\n' "produce $fe #$r" "$1" "$2" "$3"
    echo "produce $fe $1" >>"$DIR/ratios"
  done
  for fe in grpc kafka; do
    k=""; [ "$fe" = kafka ] && k="--kafka $KAFKA"
    # shellcheck disable=SC2086
    set -- $(run "c-$fe-$r" bench consume --topic kbench --records "$RECORDS" $k)
    printf '%-22s %12s %22s %22s\n' "consume $fe #$r" "$1" "$2" "$3"
    echo "consume $fe $1" >>"$DIR/ratios"
  done
done
for what in produce consume; do
  g=$(awk -v w="$what" '$1 == w && $2 == "grpc" {print $3}' "$DIR/ratios" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
  k=$(awk -v w="$what" '$1 == w && $2 == "kafka" {print $3}' "$DIR/ratios" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
  awk -v w="$what" -v g="$g" -v k="$k" 'BEGIN {printf "%s: median Kafka %.0f records/s, gRPC %.0f records/s: Kafka/gRPC %.2fx\n", w, k, g, k / g}'
done
