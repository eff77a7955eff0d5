#!/usr/bin/env bash
# make bench-peers: Strata beside NATS JetStream and Redis Streams, in one
# sitting on this machine's loopback. Each round runs the peer benchmark
# (peerbench's run.sh: JetStream with file storage, Redis Streams with the
# AOF) and then the same phases on one Strata broker, ROUNDS times in turn,
# so that a busy machine hurts every system alike:
#
#   sync     one record at a time, the next sent when the last is
#            acknowledged (NATS js.Publish, one XADD per round trip,
#            strata bench produce --sync)
#   async    WINDOW records awaiting acknowledgement (NATS PublishAsync,
#            pipelined XADD batches of WINDOW, Strata batches of WINDOW
#            records with one batch in flight)
#   consume  read back everything both publish phases wrote, BATCH records
#            a request (NATS pull, XRANGE COUNT, Strata fetches of BATCH
#            records' bytes)
#
# for each record size in SIZES, and for Strata under each flush.policy in
# POLICIES (always: fsync before the acknowledgement; interval: fsync
# within FLUSH_MS, as Redis's appendfsync everysec). Strata writes with
# acks=all to a topic of one partition on one broker, and with RF3=1 (the
# default) also on three brokers of this machine with replication factor 3
# (rows strata-rf3/<policy>: acknowledged once all three replicas hold the
# record; the peers keep one copy).
#
# Each row carries the 1-minute load average when the phase began and the
# server's CPU seconds (user and system, /proc/<pid>/stat) per GB of payload
# (10^9 bytes): around each strata bench run for the broker (the three
# brokers' sum at RF=3), and for the
# peers from /proc samples every 50 ms interpolated at each phase's start
# and end. The summary gives each figure's median over the rounds and the
# Strata/JetStream and Strata/Redis ratios of those medians.
#
# PEERBENCH is peerbench's run.sh (default ../shared/peerbench/run.sh, it
# installs nats-server and redis-server from Debian if missing); OUT=dir
# keeps the raw rows and logs. run.sh's own settings pass through the
# environment: REDIS_FSYNC=always makes Redis fsync before each reply.
set -euo pipefail
cd "$(dirname "$0")/.."
S=./bin/strata
PEERBENCH=${PEERBENCH:-../shared/peerbench/run.sh}
ROUNDS=${ROUNDS:-3}
N=${N:-200000}
SYNC_N=${SYNC_N:-50000}
SIZES=${SIZES:-1024 100}
WINDOW=${WINDOW:-256}
BATCH=${BATCH:-1000}
CAP=${CAP:-20s} # a publish phase stops after this long (peers: PHASE_TIMEOUT; Strata: --duration)
POLICIES=${POLICIES:-always interval}
FLUSH_MS=${FLUSH_MS:-1000}
RF3=${RF3:-1}
[ -x "$PEERBENCH" ] || { echo "peerbench not found at $PEERBENCH; set PEERBENCH" >&2; exit 1; }
[ -x "$S" ] || { echo "$S not built; run make build" >&2; exit 1; }

DIR=$(mktemp -d)
OUT=${OUT:-$DIR}
mkdir -p "$OUT"
ROWS="$OUT/rows"
: >"$ROWS"
BROKERS="" # the PIDs of the brokers this script runs now
cleanup() {
  local p
  for p in $BROKERS; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$DIR/data"
  [ "$OUT" != "$DIR" ] && rm -rf "$DIR"
  return 0
}
trap cleanup EXIT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in 27800 27801 27802 27810 27811 27812 27820 27821 27822 27830 27831 27832 14222 16379; do
  port_free "$p" || { echo "port $p is in use; bench-peers needs 27800-27832, 14222 and 16379" >&2; exit 1; }
done
GRPC="" # the brokers' gRPC addresses, comma-separated

load1() { cut -d' ' -f1 /proc/loadavg; }
# ticks PID: the process's user and system CPU so far in clock ticks (USER_HZ
# 100), into $TICKS, without forking: the sampler runs every 50 ms.
ticks() {
  local l
  TICKS=NaN
  { read -r l <"/proc/$1/stat"; } 2>/dev/null || return 0
  l=${l##*) }
  # shellcheck disable=SC2086
  set -- $l
  TICKS=$((${12} + ${13}))
}
exec {NAP}<> <(:) # read -t on this never returns data: a sleep without a process

# stamp: prefix each line with the time it arrived.
stamp() { local l; while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; }

# sample RUNPID LOG SAMPLES: once run.sh has printed its servers' PIDs in
# LOG, append "time nats-ticks redis-ticks load1" to SAMPLES every 50 ms
# while RUNPID lives.
sample() {
  local np="" rp="" nt rt la
  while kill -0 "$1" 2>/dev/null; do
    [ -n "$np" ] || np=$(sed -n 's/.* # nats-server.* pid=\([0-9]*\) .*/\1/p' "$2")
    [ -n "$rp" ] || rp=$(sed -n 's/.* # Redis server.* pid=\([0-9]*\) .*/\1/p' "$2")
    if [ -n "$np" ] && [ -n "$rp" ]; then
      ticks "$np"; nt=$TICKS
      ticks "$rp"; rt=$TICKS
      [ "$nt" != NaN ] && [ "$rt" != NaN ] || break # a server has stopped: run.sh is done
      read -r la _ </proc/loadavg
      printf '%s %s %s %s\n' "$EPOCHREALTIME" "$nt" "$rt" "$la" >>"$3"
    fi
    read -rt 0.05 -u "$NAP" _ || true
  done
}

# peers ROUND: one run.sh, its phase rows appended to $ROWS with the
# server's CPU over each phase.
peers() {
  local log="$OUT/peers-$1.log" samples="$OUT/peers-$1.cpu"
  : >"$samples"
  PHASE_TIMEOUT=$CAP SYNC_N=$SYNC_N WINDOW=$WINDOW BATCH=$BATCH "$PEERBENCH" "$N" "$SIZES" 2>"$OUT/peers-$1.err" | stamp >"$log" &
  local run=$!
  sample "$run" "$log" "$samples"
  wait "$run" || { echo "peerbench failed:" >&2; cat "$OUT/peers-$1.err" "$log" >&2; exit 1; }
  # A phase row: stamp system size phase msgs secs rate rec/s mbps MB/s [p50=.. p99=..].
  awk -v round="$1" -v samples="$samples" '
    BEGIN { while ((getline l < samples) > 0) { split(l, f, " "); n++; T[n] = f[1]; C["nats-js/file", n] = f[2]; C["redis-stream", n] = f[3]; L[n] = f[4] } }
    function at(sys, t,   i) { # interpolated CPU ticks of sys at time t
      for (i = 1; i < n && T[i + 1] < t; i++) ;
      if (i >= n || T[i] >= t) return C[sys, i]
      return C[sys, i] + (C[sys, i + 1] - C[sys, i]) * (t - T[i]) / (T[i + 1] - T[i])
    }
    function loadAt(t,   i) { for (i = 1; i < n && T[i + 1] < t; i++) ; return L[i] }
    function us2ms(s) { sub(/^p[0-9.]+=/, "", s); sub(/us$/, "", s); return s / 1000 }
    $2 == "nats-js/file" || $2 == "redis-stream" {
      phase = $4 ~ /async|pipeline/ ? "async" : ($4 ~ /sync/ ? "sync" : "consume")
      secs = $6; sub(/s$/, "", secs)
      t1 = $1; t0 = t1 - secs
      cpu = (at($2, t1) - at($2, t0)) / 100
      p50 = "-"; p99 = "-"
      if ($11 ~ /^p50=/) { p50 = us2ms($11); p99 = us2ms($12) }
      sys = $2 == "nats-js/file" ? "jetstream" : "redis"
      note = $0 ~ /capped/ ? "capped" : "-"
      printf "%s %s - %s %s %s %s %s %s %s %s %.3f %s %s\n", round, sys, $3, phase, $5, secs, $7, $9, p50, p99, cpu, loadAt(t0), note
    }' "$log" >>"$ROWS"
}

# brokerTicks: the CPU ticks of every broker running, summed, into $TICKS.
brokerTicks() {
  local p sum=0
  for p in $BROKERS; do ticks "$p"; sum=$((sum + TICKS)); done
  TICKS=$sum
}

# strata ROUND SYSTEM POLICY SIZE PHASE ARGS...: one strata bench run, its
# row appended to $ROWS with the brokers' CPU around it.
strata() {
  local round=$1 sys=$2 policy=$3 size=$4 phase=$5 f="$OUT/$2-$1-$3-$4-$5.json"
  shift 5
  local la b0 b1
  la=$(load1)
  brokerTicks; b0=$TICKS
  "$S" bench "$@" --broker "$GRPC" --json >"$f" 2>"${f%.json}.err" || { echo "strata bench $* failed:" >&2; cat "${f%.json}.err" >&2; exit 1; }
  brokerTicks; b1=$TICKS
  local get='s/.*"KEY": *\([0-9.e+-]*\).*/\1/p'
  local n secs rate mbps p50="-" p99="-"
  n=$(tr -d '\n' <"$f" | sed -n "${get/KEY/records}")
  secs=$(tr -d '\n' <"$f" | sed -n "${get/KEY/elapsed_s}")
  rate=$(tr -d '\n' <"$f" | sed -n "${get/KEY/records_per_s}")
  mbps=$(tr -d '\n' <"$f" | sed -n "${get/KEY/mb_per_s}")
  if [ "$phase" = sync ]; then
    p50=$(tr -d '\n' <"$f" | sed -n "${get/KEY/p50}")
    p99=$(tr -d '\n' <"$f" | sed -n "${get/KEY/p99}")
  fi
  local note=-
  [ "$phase" != consume ] && [ "$n" -lt "$([ "$phase" = sync ] && echo "$SYNC_N" || echo "$N")" ] && note=capped
  echo "$round $sys $policy $size $phase $n $secs $rate $mbps $p50 $p99 $(awk -v a="$b1" -v b="$b0" 'BEGIN {printf "%.3f", (a - b) / 100}') $la $note" >>"$ROWS"
}

# startBrokers ROUND RF: one broker on 27800-27802 (RF 1) or three on
# 27810-27832 (RF 3), with fresh data directories and no object store.
startBrokers() {
  local r=$1 rf=$2 id b
  rm -rf "$DIR/data"
  if [ "$rf" = 1 ]; then
    "$S" serve --node-id 1 --data-dir "$DIR/data/b1" --listen 127.0.0.1:27800 --raft-listen 127.0.0.1:27801 \
      --gossip-listen 127.0.0.1:27802 --admin-listen "" --object-store-type none >"$OUT/broker-$r-rf1.log" 2>&1 &
    BROKERS=$!
    GRPC=127.0.0.1:27800
    return
  fi
  local join=127.0.0.1:27812,127.0.0.1:27822,127.0.0.1:27832
  for id in 1 2 3; do
    b=$((27800 + id * 10))
    "$S" serve --node-id "$id" --data-dir "$DIR/data/b$id" --listen "127.0.0.1:$b" --raft-listen "127.0.0.1:$((b + 1))" \
      --gossip-listen "127.0.0.1:$((b + 2))" --admin-listen "" --gossip-join "$join" --gossip-bootstrap-expect 3 \
      --gossip-profile local --object-store-type none >"$OUT/broker-$r-rf3-b$id.log" 2>&1 &
    BROKERS="$BROKERS $!"
  done
  GRPC=127.0.0.1:27810,127.0.0.1:27820,127.0.0.1:27830
}

stopBrokers() {
  local p
  for p in $BROKERS; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  BROKERS=""
}

# strataRound ROUND RF: the three phases for every size and flush policy.
strataRound() {
  local r=$1 rf=$2 sys=strata
  [ "$rf" = 3 ] && sys=strata-rf3
  startBrokers "$r" "$rf"
  local size policy t cfg
  for size in $SIZES; do
    for policy in $POLICIES; do
      t="peers-$policy-$size"
      cfg="flush.policy=$policy"
      [ "$policy" = interval ] && cfg="$cfg,flush.ms=$FLUSH_MS"
      local made=""
      for _ in $(seq 300); do
        "$S" topic create "$t" --partitions 1 --replication-factor "$rf" --config "$cfg" --broker "$GRPC" --timeout 2s \
          >"$OUT/create.out" 2>&1 && { made=1; break; }
        sleep 0.2
      done
      [ -n "$made" ] || { echo "could not create topic $t:" >&2; cat "$OUT/create.out" >&2; exit 1; }
      strata "$r" "$sys" "$policy" "$size" sync produce --topic "$t" --sync --records "$SYNC_N" --duration "$CAP" --record-size "$size" --acks all
      strata "$r" "$sys" "$policy" "$size" async produce --topic "$t" --records "$N" --duration "$CAP" --record-size "$size" --acks all \
        --batch-bytes "$((WINDOW * size))" --in-flight 1
      strata "$r" "$sys" "$policy" "$size" consume consume --topic "$t" --fetch-max-bytes "$((BATCH * size))"
    done
  done
  stopBrokers
}

echo "# $(nproc) cpus; N=$N SYNC_N=$SYNC_N SIZES=\"$SIZES\" WINDOW=$WINDOW BATCH=$BATCH CAP=$CAP POLICIES=\"$POLICIES\" flush.ms=$FLUSH_MS; rows in $ROWS" >&2
for r in $(seq "$ROUNDS"); do
  echo "# round $r: peers (load $(load1))" >&2
  peers "$r"
  echo "# round $r: strata (load $(load1))" >&2
  strataRound "$r" 1
  if [ "$RF3" = 1 ]; then
    echo "# round $r: strata RF=3 (load $(load1))" >&2
    strataRound "$r" 3
  fi
done

# One line per system and phase: medians over the rounds, the load range,
# then the ratios of Strata's medians to the peers'.
awk '
  function med(k,   n, a, i, j, t) {
    n = split(V[k], a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function add(k, v) { V[k] = V[k] (V[k] == "" ? "" : " ") v }
  {
    sys = $2 ~ /^strata/ ? $2 "/" $3 : $2
    g = $4 " " $5; key = g SUBSEP sys
    if (!(g in seenG)) { seenG[g] = 1; G[++ng] = g }
    if (!(key in seenS)) { seenS[key] = 1; Sys[g, ++ns[g]] = sys }
    gb = $6 * $4 / 1e9
    add(key SUBSEP "rate", $8); add(key SUBSEP "mbps", $9); add(key SUBSEP "cpu", gb > 0 ? $12 / gb : 0)
    if ($10 != "-") { add(key SUBSEP "p50", $10); add(key SUBSEP "p99", $11) }
    if (!(key in lo) || $13 + 0 < lo[key] + 0) lo[key] = $13
    if (!(key in hi) || $13 + 0 > hi[key] + 0) hi[key] = $13
    if ($14 == "capped") capped[key] = 1
  }
  END {
    for (i = 1; i <= ng; i++) {
      g = G[i]; split(g, gs, " ")
      printf "\n%s B, %s\n%-18s %10s %8s %9s %9s %9s %11s %14s %14s\n", gs[1], gs[2], "system", "msgs/s", "MB/s", "p50 ms", "p99 ms", "CPU-s/GB", "load", "msgs/s ratio", "CPU/GB ratio"
      for (j = 1; j <= ns[g]; j++) {
        sys = Sys[g, j]; key = g SUBSEP sys
        rate[sys] = med(key SUBSEP "rate"); cpu[sys] = med(key SUBSEP "cpu")
        p50 = V[key SUBSEP "p50"] == "" ? "-" : sprintf("%.3f", med(key SUBSEP "p50"))
        p99 = V[key SUBSEP "p99"] == "" ? "-" : sprintf("%.3f", med(key SUBSEP "p99"))
        ratio = ""
        if (sys ~ /^strata/) ratio = sprintf("JS %.2fx R %.2fx", rate[sys] / rate["jetstream"], rate[sys] / rate["redis"])
        cratio = ""
        if (sys ~ /^strata/) cratio = sprintf("JS %.2fx R %.2fx", cpu[sys] / cpu["jetstream"], cpu[sys] / cpu["redis"])
        printf "%-18s %10.0f %8.1f %9s %9s %9.2f %11s %14s %14s%s\n", sys, rate[sys], med(key SUBSEP "mbps"), p50, p99, cpu[sys], lo[key] "-" hi[key], ratio, cratio, (key in capped) ? "  (capped in a round)" : ""
      }
    }
  }' "$ROWS"
