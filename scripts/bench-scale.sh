#!/usr/bin/env bash
# make bench-scale: a broker holding many partitions. Real processes on
# loopback, plaintext, no object store.
#
# One broker: topics up to REPLICAS (10,000) partition replicas; reports
# resident memory per idle replica (RSS after less RSS before, divided by
# the replicas), start to ready (/readyz answers 200) after a clean stop
# (SIGTERM) and after kill -9, the latency of a gRPC GetMetadata, a Kafka
# Metadata (kcat -L) and a topic describe at that size, acks=all produce
# throughput over a 1,000-partition topic against a one-partition topic
# (records keyed, so they spread) with the broker's and the producing
# client's CPU-seconds per GB of each, and the Raft snapshot size.
#
# Three brokers (CLUSTER=0 skips them): PARTITIONS3 (10,000) partitions at
# RF=3, so 30,000 replicas; RSS per replica on each broker, start to
# ready of one broker after a clean stop and after kill -9, idle CPU of
# each broker, and the metadata latencies.
set -euo pipefail
cd "$(dirname "$0")/.."
S=./bin/strata
G=./.tools/bin/grpcurl
REPLICAS=${REPLICAS:-10000}
PARTITIONS3=${PARTITIONS3:-10000}
RECORDS=${RECORDS:-20000}
CLUSTER=${CLUSTER:-1}
DIR=$(mktemp -d)
PIDS=""
cleanup() { for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT

echo "bench-scale $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, ulimit -n $(ulimit -n)"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in 27710 27711 27712 27713 27714 27720 27721 27722 27723 27724 27730 27731 27732 27733 27734; do
  port_free "$p" || { echo "port $p is in use; bench-scale needs 27710-27734" >&2; exit 1; }
done

ms() { date +%s%3N; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
# serve ID [extra flags...]: starts broker ID in the background; its pid in $SERVED.
serve() {
  local id=$1 b=$((27700 + $1 * 10))
  shift
  "$S" serve --node-id "$id" --data-dir "$DIR/b$id" --listen "127.0.0.1:$b" --raft-listen "127.0.0.1:$((b + 1))" \
    --gossip-listen "127.0.0.1:$((b + 2))" --admin-listen "127.0.0.1:$((b + 3))" --kafka-listen "127.0.0.1:$((b + 4))" \
    --admin-pprof --object-store-type none "$@" >>"$DIR/b$id.log" 2>&1 &
  SERVED=$!
}
# ready ID: waits (up to 10 min) until broker ID's /readyz answers 200.
ready() {
  local url="http://127.0.0.1:$((27700 + $1 * 10 + 3))/readyz"
  for _ in $(seq 6000); do
    curl -fs -m 5 "$url" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "broker $1 not ready after 10 minutes; its log:" >&2
  tail -20 "$DIR/b$1.log" >&2
  exit 1
}
# create BROKERS NAME PARTITIONS RF
create() {
  for _ in $(seq 100); do
    "$S" topic create "$2" --partitions "$3" --replication-factor "$4" --broker "$1" --timeout 5m >/dev/null 2>"$DIR/create.err" && return 0
    sleep 0.5
  done
  cat "$DIR/create.err" >&2
  exit 1
}
# lat NAME CMD...: runs CMD 5 times and prints the median milliseconds.
lat() {
  local name=$1 t0 i
  shift
  for i in 1 2 3 4 5; do
    t0=$(ms)
    "$@" >/dev/null 2>&1 || { echo "$name failed: $*" >&2; return 1; }
    echo $(($(ms) - t0))
  done | sort -n | sed -n 3p | xargs printf "  %s: median of 5 %s ms\n" "$name"
}
latencies() { # ID
  local b=$((27700 + $1 * 10))
  lat "gRPC GetMetadata (all topics)" "$G" -plaintext -max-msg-sz 268435456 -d '{}' "127.0.0.1:$b" strata.v1.MetadataService/GetMetadata
  lat "Kafka Metadata (kcat -L, all topics)" kcat -L -b "127.0.0.1:$((b + 4))" -m 30
  lat "topic describe (10,000 partitions)" "$S" topic describe big --broker "127.0.0.1:$b"
  lat "topic list" "$S" topic list --broker "127.0.0.1:$b"
}
# restart ID HOW: stops broker ID (TERM: clean, KILL: kill -9), starts it
# again and prints the time from the new process's start to ready.
restart() {
  local id=$1 how=$2 pidvar="PID$1" t0 stopped
  t0=$(ms)
  kill "-$how" "${!pidvar}"
  wait "${!pidvar}" 2>/dev/null || true
  stopped=$(($(ms) - t0))
  t0=$(ms)
  serve "$id" "${@:3}"
  printf -v "$pidvar" %s "$SERVED"
  PIDS="$PIDS $SERVED"
  ready "$id"
  echo "  broker $id start to ready after $( [ "$how" = TERM ] && echo "a clean stop (which took $stopped ms)" || echo 'kill -9'): $(($(ms) - t0)) ms (rss $(($(rss_kib "${!pidvar}") / 1024)) MiB)"
}
snapshot_size() { # ID
  local f
  f=$(find "$DIR/b$1" -path '*snapshots*' -name state.bin 2>/dev/null | sort | tail -1)
  if [ -n "$f" ]; then echo "  Raft snapshot of broker $1: $(stat -c %s "$f") bytes"; else echo "  Raft snapshot of broker $1: none taken yet; Raft log $(du -sb "$DIR/b$1/raft" 2>/dev/null | cut -f1) bytes"; fi
}

echo "== one broker, $REPLICAS partition replicas"
serve 1
PID1=$SERVED
PIDS="$PID1"
ready 1
sleep 2
rss0=$(rss_kib "$PID1")
t0=$(ms)
create 127.0.0.1:27710 big "$((REPLICAS - 1001))" 1
create 127.0.0.1:27710 spread 1000 1
create 127.0.0.1:27710 one 1 1
ready 1
echo "  created $REPLICAS partitions in $(($(ms) - t0)) ms"
sleep 5
rss1=$(rss_kib "$PID1")
echo "  RSS $((rss0 / 1024)) MiB before, $((rss1 / 1024)) MiB after: $(((rss1 - rss0) * 1024 / REPLICAS)) bytes per idle replica; goroutines: $(curl -fs "http://127.0.0.1:27713/debug/pprof/goroutine?debug=1" | awk 'NR == 1 {print $NF}')"
cpu_ticks() { awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$1/stat"; }
c0=$(cpu_ticks "$PID1")
sleep 10
echo "  idle CPU with $REPLICAS replicas: $(awk -v t=$(($(cpu_ticks "$PID1") - c0)) 'BEGIN {printf "%.1f", t / 10}')% of a core"
latencies 1
bench() { # topic [flags] -> "records/s broker-CPU-s-per-GB client-CPU-s-per-GB"
  # A run with failed records still reports what was acknowledged; the
  # failures are counted beside the figure. The CPU per GB (of payload
  # acknowledged) is the broker's from /proc and the producing client's
  # from /usr/bin/time: on a machine whose cores the two share, the
  # throughput ratio is as much the client's as the broker's.
  local c0 c1
  c0=$(cpu_ticks "$PID1")
  /usr/bin/time -f "%U %S" -o "$DIR/bench.time" "$S" bench produce --broker 127.0.0.1:27710 --topic "$@" --records "$RECORDS" --record-size 1024 --key-size 16 --acks all >"$DIR/bench.out" 2>&1 || true
  c1=$(cpu_ticks "$PID1")
  awk -v ticks=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v client="$(cat "$DIR/bench.time" | tail -1)" \
    '/^  throughput/ {v = $2} /^  errors/ {e = $2} /^  bytes/ {b = $2}
     END {
       split(client, c, " "); gb = b / 1e9
       if (gb <= 0) gb = 1e-9
       printf "%s %.1f %.1f", v, ticks / hz / gb, (c[1] + c[2]) / gb
       if (e > 0) printf " (%s failed)", e
     }' "$DIR/bench.out"
}
ratio() { awk -v a="${1%% *}" -v b="${2%% *}" 'BEGIN {printf "%.2f", a / b}'; }
field() { echo "$1" | awk -v i="$2" '{print $i}'; }
for how in grpc kafka; do
  flags=()
  [ "$how" = kafka ] && flags=(--kafka 127.0.0.1:27714)
  one=$(bench one "${flags[@]}")
  spread=$(bench spread "${flags[@]}")
  echo "  acks=all produce of $RECORDS 1 KiB keyed records ($how): one partition $(field "$one" 1) records/s, over 1,000 partitions $(field "$spread" 1) records/s, ratio $(ratio "$spread" "$one")"
  echo "    CPU-seconds per GB acknowledged: broker $(field "$one" 2) (one) against $(field "$spread" 2) (1,000), ratio $(ratio "$(field "$spread" 2)" "$(field "$one" 2)"); producing client $(field "$one" 3) against $(field "$spread" 3)"
done
restart 1 TERM
restart 1 KILL
snapshot_size 1
kill "$PID1"; wait "$PID1" 2>/dev/null || true
PIDS=""

[ "$CLUSTER" = 1 ] || exit 0
echo "== three brokers, $PARTITIONS3 partitions at RF=3 ($((PARTITIONS3 * 3)) replicas)"
JOIN=127.0.0.1:27712,127.0.0.1:27722,127.0.0.1:27732
rm -rf "$DIR/b1" "$DIR/b1.log"
for id in 1 2 3; do
  serve "$id" --gossip-join "$JOIN" --gossip-bootstrap-expect 3 --gossip-profile local
  printf -v "PID$id" %s "$SERVED"
  PIDS="$PIDS $SERVED"
done
for id in 1 2 3; do ready "$id"; done
sleep 2
declare -A before
for id in 1 2 3; do p="PID$id"; before[$id]=$(rss_kib "${!p}"); done
t0=$(ms)
create 127.0.0.1:27710,127.0.0.1:27720,127.0.0.1:27730 big "$PARTITIONS3" 3
for id in 1 2 3; do ready "$id"; done
echo "  created $PARTITIONS3 partitions x 3 in $(($(ms) - t0)) ms"
sleep 10
for id in 1 2 3; do
  p="PID$id"
  r=$(rss_kib "${!p}")
  echo "  broker $id: RSS $((before[$id] / 1024)) MiB before, $((r / 1024)) MiB after: $(((r - before[$id]) * 1024 / PARTITIONS3)) bytes per idle replica; goroutines: $(curl -fs "http://127.0.0.1:$((27700 + id * 10 + 3))/debug/pprof/goroutine?debug=1" | awk 'NR == 1 {print $NF}')"
done
declare -A c0
for id in 1 2 3; do p="PID$id"; c0[$id]=$(cpu_ticks "${!p}"); done
sleep 10
for id in 1 2 3; do
  p="PID$id"
  echo "  broker $id: idle CPU with $PARTITIONS3 replicas: $(awk -v t=$(($(cpu_ticks "${!p}") - c0[$id])) 'BEGIN {printf "%.1f", t / 10}')% of a core"
done
latencies 1
J=(--gossip-join "$JOIN" --gossip-bootstrap-expect 3 --gossip-profile local)
restart 2 TERM "${J[@]}"
restart 2 KILL "${J[@]}"
for id in 1 2 3; do snapshot_size "$id"; done
