#!/usr/bin/env bash
# make bench-rf: acks=all produce throughput of one broker (RF=1) against
# three brokers on this machine (RF=3), in one sitting, plaintext, no object
# store. All replicas share this machine's disk and cores, so RF=3 writes
# three times the bytes to the same disk: the ratio is a floor for what
# separate machines give.
#
# Both runs write one partition, so that at RF=3 one broker is the leader
# and the other two only follow it: the CPU time of each process (user and
# system, from /proc/<pid>/stat around the run) is then the cost of its
# role. The script prints it per GB of record values acknowledged (10^9
# bytes): the leader, each follower, the client, and the whole RF=3 cluster
# against the RF=1 broker. Where they share the cores, the ratio of the CPU
# sums is about the throughput ratio the CPU alone allows. It also prints
# the kernel's share (system CPU) and, last, what the kernel spends here to
# put a GB of writes into the page cache (dd), which each replica's copy
# pays.
#
# RECORDS sets the records per run (1 KiB each); BENCH_FLAGS adds flags to
# both runs of strata bench produce, such as BENCH_FLAGS="--in-flight 5";
# PROFILE_DIR=dir also saves a 10 s CPU profile of the RF=3 leader and of
# one follower taken during the run (admin listeners with pprof on).
set -euo pipefail
cd "$(dirname "$0")/.."
S=./bin/strata
RECORDS=${RECORDS:-400000}
SIZE=1024
DIR=$(mktemp -d)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in 27500 27501 27502 27610 27611 27612 27613 27620 27621 27622 27623 27630 27631 27632 27633; do
  port_free "$p" || { echo "port $p is in use; bench-rf needs 27500-27502 and 27610-27633" >&2; exit 1; }
done

bench() { # brokers topic -> records/s; the client's CPU seconds go to $DIR/client.cpu
  local TIMEFORMAT=%U+%S
  { time "$S" bench produce --broker "$1" --topic "$2" --records "$RECORDS" --record-size "$SIZE" --acks all ${BENCH_FLAGS:-} \
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
sys() { # pids... -> system CPU seconds they used so far (the kernel's share of cpu)
  local total=0 p
  for p in "$@"; do
    total=$(awk -v t="$total" '{sub(/^.*\) /, ""); print t + $13 / 100}' "/proc/$p/stat")
  done
  echo "$total"
}
sub() { awk -v a="$1" -v b="$2" 'BEGIN {print a - b}'; }
perGB() { awk -v s="$1" -v n="$RECORDS" -v z="$SIZE" 'BEGIN {printf "%.1f", s * 1e9 / (n * z)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

"$S" serve --node-id 1 --data-dir "$DIR/single" --listen 127.0.0.1:27500 --raft-listen 127.0.0.1:27501 \
  --gossip-listen 127.0.0.1:27502 --admin-listen "" --object-store-type none >"$DIR/single.log" 2>&1 &
single=$!
PIDS="$single"
for _ in $(seq 150); do "$S" topic create rf1 --partitions 1 --broker 127.0.0.1:27500 --timeout 2s >/dev/null 2>&1 && break; sleep 0.2; done
before=$(cpu "$single")
before_sys=$(sys "$single")
rf1=$(bench 127.0.0.1:27500 rf1)
rf1_broker=$(sub "$(cpu "$single")" "$before")
rf1_sys=$(sub "$(sys "$single")" "$before_sys")
rf1_client=$(cat "$DIR/client.cpu")
kill "$single"; wait "$single" 2>/dev/null || true
PIDS=""

JOIN=127.0.0.1:27612,127.0.0.1:27622,127.0.0.1:27632
declare -A PID
for id in 1 2 3; do
  b=$((27600 + id * 10))
  admin=(--admin-listen "")
  [ -n "${PROFILE_DIR:-}" ] && admin=(--admin-listen "127.0.0.1:$((b + 3))" --admin-pprof)
  "$S" serve --node-id "$id" --data-dir "$DIR/b$id" --listen "127.0.0.1:$b" --raft-listen "127.0.0.1:$((b + 1))" \
    --gossip-listen "127.0.0.1:$((b + 2))" "${admin[@]}" --gossip-join "$JOIN" --gossip-bootstrap-expect 3 \
    --gossip-profile local --object-store-type none >"$DIR/b$id.log" 2>&1 &
  PID[$id]=$!
  PIDS="$PIDS $!"
done
BROKERS=127.0.0.1:27610,127.0.0.1:27620,127.0.0.1:27630
for _ in $(seq 300); do
  "$S" topic create rf3 --partitions 1 --replication-factor 3 --broker "$BROKERS" --timeout 2s >"$DIR/create.out" 2>&1 && break
  sleep 0.3
done
# The row of partition 0 under the PARTITION LEADER ... header names the leader.
leader=$(awk '$1 == "PARTITION" {t = 1; next} t && $1 == "0" {print $2; exit}' "$DIR/create.out")
case "$leader" in 1 | 2 | 3) ;; *) echo "no leader for rf3 in:" >&2; cat "$DIR/create.out" >&2; exit 1 ;; esac
followers=""
for id in 1 2 3; do [ "$id" = "$leader" ] || followers="$followers $id"; done

# What the brokers spend with nothing to do (Raft, gossip, housekeeping),
# over IDLE seconds: a cost per second, not per byte, in the figures below.
IDLE=${IDLE:-5}
declare -A BEFORE
for id in 1 2 3; do BEFORE[$id]=$(cpu "${PID[$id]}"); done
sleep "$IDLE"
idle=0
for id in 1 2 3; do idle=$(awk -v t="$idle" -v a="$(cpu "${PID[$id]}")" -v b="${BEFORE[$id]}" 'BEGIN {print t + a - b}'); done
for id in 1 2 3; do BEFORE[$id]=$(cpu "${PID[$id]}"); done
before_sys=$(sys "${PID[1]}" "${PID[2]}" "${PID[3]}")
start=$(date +%s.%N)
profiling=""
if [ -n "${PROFILE_DIR:-}" ]; then
  mkdir -p "$PROFILE_DIR"
  f1=${followers# }; f1=${f1%% *}
  (sleep 3
   curl -s -o "$PROFILE_DIR/leader.pprof" "http://127.0.0.1:$((27603 + leader * 10))/debug/pprof/profile?seconds=10" &
   curl -s -o "$PROFILE_DIR/follower.pprof" "http://127.0.0.1:$((27603 + f1 * 10))/debug/pprof/profile?seconds=10"
   wait) &
  profiling=$!
fi
rf3=$(bench "$BROKERS" rf3)
secs=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN {print a - b}')
rf3_client=$(cat "$DIR/client.cpu")
rf3_sys=$(sub "$(sys "${PID[1]}" "${PID[2]}" "${PID[3]}")" "$before_sys")
lead_cpu=$(sub "$(cpu "${PID[$leader]}")" "${BEFORE[$leader]}")
rf3_brokers=$lead_cpu
fline=""
worst=0
for id in $followers; do
  c=$(sub "$(cpu "${PID[$id]}")" "${BEFORE[$id]}")
  rf3_brokers=$(awk -v a="$rf3_brokers" -v b="$c" 'BEGIN {print a + b}')
  worst=$(awk -v a="$worst" -v b="$c" 'BEGIN {print (b > a) ? b : a}')
  fline="$fline follower (broker $id) $(perGB "$c"),"
done
[ -z "$profiling" ] || wait "$profiling"

echo "CPU seconds per GB acknowledged (load $(cut -d' ' -f1-3 /proc/loadavg)):"
echo "  RF=1: broker $(perGB "$rf1_broker"), client $(perGB "$rf1_client")"
echo "  RF=3: leader (broker $leader) $(perGB "$lead_cpu"),$fline client $(perGB "$rf3_client")"
echo "  follower/leader $(ratio "$worst" "$lead_cpu") (the busier follower); RF=3 cluster/RF=1 broker $(ratio "$rf3_brokers" "$rf1_broker");" \
  "with the client, the CPU alone gives a throughput ratio of $(ratio "$(awk -v a="$rf1_broker" -v b="$rf1_client" 'BEGIN {print a + b}')" "$(awk -v a="$rf3_brokers" -v b="$rf3_client" 'BEGIN {print a + b}')")"
echo "  idle, the three RF=3 brokers together use $(awk -v c="$idle" -v s="$IDLE" 'BEGIN {printf "%.1f", c * 100 / s}')% of a core:" \
  "$(perGB "$(awk -v c="$idle" -v s="$IDLE" -v t="$secs" 'BEGIN {print c / s * t}')") of the RF=3 cluster's CPU per GB in this run"
echo "  in the kernel (system CPU): RF=1 broker $(perGB "$rf1_sys"), RF=3 brokers together $(perGB "$rf3_sys")"
echo "RF=1 acks=all: $rf1 records/s; RF=3 acks=all: $rf3 records/s; ratio $(ratio "$rf3" "$rf1")"

# What the kernel of this machine spends, now, to put a GB of writes into
# the page cache of the data dir's file system (dd, no fsync): every
# replica pays about that for its copy. On some virtual machines memory the
# guest has not used lately (or gave back to the host) costs ten times
# memory just freed, so this varies from run to run and bounds what RF=3
# can cost against RF=1 here.
probe_mib=$((RECORDS * SIZE / 1048576))
probe_sys=$( { TIMEFORMAT=%S; time dd if=/dev/zero of="$DIR/probe" bs=1M count="$probe_mib" status=none; } 2>&1 )
rm -f "$DIR/probe"
echo "page cache: writing $probe_mib MiB with dd took $(awk -v s="$probe_sys" -v m="$probe_mib" 'BEGIN {printf "%.1f", s * 1e9 / (m * 1048576)}') system CPU-s per GB"
