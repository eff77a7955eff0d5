#!/usr/bin/env bash
# make bench-latency: end-to-end latency (produce to consume) at a fixed
# rate, by default 50 MiB/s of 1 KiB records (strata bench e2e), acks=all,
# for flush.policy interval and always, on one broker (RF=1) and on three
# brokers of this machine (RF=3), plaintext, no object store. It prints
# p50, p99, p99.9 and max of each run, the machine's load before each run,
# and the CPU seconds the brokers and the client used in it. DURATION
# (default 20s) sets each run's length; BENCH_FLAGS adds flags to every
# run, such as BENCH_FLAGS="--rate 10000"; STRATA_BIN picks another
# binary (one without the default rate needs BENCH_FLAGS="--rate 51200").
# Each broker setup first runs WARMUP (10s) unreported, and each run leaves
# the records due in its first RUN_WARMUP (1s) out of the latency figures
# (strata bench e2e --warmup): every run is a new client process, whose
# start is not what a steady rate costs.
set -euo pipefail
cd "$(dirname "$0")/.."
S=${STRATA_BIN:-./bin/strata}
DURATION=${DURATION:-20s}
RUN_WARMUP=${RUN_WARMUP:-1s}
DIR=$(mktemp -d)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in 27700 27701 27702 27810 27811 27812 27820 27821 27822 27830 27831 27832; do
  port_free "$p" || { echo "port $p is in use; bench-latency needs 27700-27702 and 27810-27832" >&2; exit 1; }
done

cpu() { # pids... -> CPU seconds (user and system) they used so far, from /proc (USER_HZ 100)
  local total=0 p
  for p in "$@"; do
    total=$(awk -v t="$total" '{sub(/^.*\) /, ""); print t + ($12 + $13) / 100}' "/proc/$p/stat")
  done
  echo "$total"
}

run() { # label brokers topic pids...
  local label=$1 brokers=$2 topic=$3; shift 3
  local before out TIMEFORMAT=%U+%S
  before=$(cpu "$@")
  echo "$label: load $(cut -d' ' -f1-3 /proc/loadavg)"
  { time "$S" bench e2e --broker "$brokers" --topic "$topic" --duration "$DURATION" --warmup "$RUN_WARMUP" --size 1024 --acks all ${BENCH_FLAGS:-} \
    >"$DIR/out" 2>&1; } 2>"$DIR/client.time" || true
  out=$(cat "$DIR/out")
  awk '/latency|throughput|error|late/ {print "  " $0}' <<<"$out"
  awk -v b="$(cpu "$@")" -v a="$before" -v c="$(awk '{split($0, t, "+"); print t[1] + t[2]}' "$DIR/client.time")" \
    'BEGIN {printf "  CPU seconds: brokers %.1f, client %.1f\n", b - a, c}'
}

# warmup BROKERS RF: an unreported run of WARMUP (default 10s) at the same
# rate to a topic of its own, so that the first measured run does not pay
# for a broker (or cluster) just started: without it the RF=3 run that came
# first showed a p99 3-5 times that of the same policy run second.
warmup() {
  local brokers=$1 rf=$2
  for _ in $(seq 300); do "$S" topic create "warmup-rf$rf" --partitions 3 --replication-factor "$rf" \
    --broker "$brokers" --timeout 2s >/dev/null 2>&1 && break; sleep 0.3; done
  "$S" bench e2e --broker "$brokers" --topic "warmup-rf$rf" --duration "${WARMUP:-10s}" --size 1024 --acks all ${BENCH_FLAGS:-} \
    >/dev/null 2>&1 || true
}

"$S" serve --node-id 1 --data-dir "$DIR/single" --listen 127.0.0.1:27700 --raft-listen 127.0.0.1:27701 \
  --gossip-listen 127.0.0.1:27702 --admin-listen "" --object-store-type none >"$DIR/single.log" 2>&1 &
single=$!
PIDS="$single"
warmup 127.0.0.1:27700 1
for policy in interval always; do
  for _ in $(seq 150); do "$S" topic create "rf1-$policy" --partitions 3 --config "flush.policy=$policy" \
    --broker 127.0.0.1:27700 --timeout 2s >/dev/null 2>&1 && break; sleep 0.2; done
  run "RF=1 flush.policy=$policy" 127.0.0.1:27700 "rf1-$policy" "$single"
done
kill "$single"; wait "$single" 2>/dev/null || true
PIDS=""

JOIN=127.0.0.1:27812,127.0.0.1:27822,127.0.0.1:27832
for id in 1 2 3; do
  b=$((27800 + id * 10))
  "$S" serve --node-id "$id" --data-dir "$DIR/b$id" --listen "127.0.0.1:$b" --raft-listen "127.0.0.1:$((b + 1))" \
    --gossip-listen "127.0.0.1:$((b + 2))" --admin-listen "" --gossip-join "$JOIN" --gossip-bootstrap-expect 3 \
    --gossip-profile local --object-store-type none >"$DIR/b$id.log" 2>&1 &
  PIDS="$PIDS $!"
done
BROKERS=127.0.0.1:27810,127.0.0.1:27820,127.0.0.1:27830
warmup "$BROKERS" 3
for policy in interval always; do
  for _ in $(seq 300); do "$S" topic create "rf3-$policy" --partitions 3 --replication-factor 3 --config "flush.policy=$policy" \
    --broker "$BROKERS" --timeout 2s >/dev/null 2>&1 && break; sleep 0.3; done
  run "RF=3 flush.policy=$policy" "$BROKERS" "rf3-$policy" $PIDS
done
