#!/usr/bin/env bash
# make cluster: a MinIO server and three brokers that form one cluster by
# themselves through gossip, all on loopback; data and logs under ./.cluster.
# The brokers run with TLS, authenticated clients and ACLs, from a
# development CA and certificates in ./.cluster/certs (strata dev certs);
# User:admin is a superuser. Each broker also serves Kafka with TLS on
# 127.0.0.1:9092+N-1: a client certificate (mTLS) or SASL/SCRAM (users from
# strata user create). Ctrl-C (or any exit) stops exactly the processes
# started here, by pid.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=./.cluster
MINIO_ADDR=127.0.0.1:9000
BUCKET=strata
IDS="1 2 3"
JOIN=127.0.0.1:7402,127.0.0.1:7412,127.0.0.1:7422
WAIT=${CLUSTER_WAIT:-60} # seconds for all three brokers to answer /healthz
export MINIO_ROOT_USER=strata MINIO_ROOT_PASSWORD=strata-dev-secret
export MINIO_UPDATE=off MINIO_CALLHOME_ENABLE=off MINIO_BROWSER=off

CERTS=$DIR/certs
# Broker N listens on 7400+10(N-1): gRPC there, Raft +1, gossip +2, admin +3;
# Kafka on 9092+N-1.
base() { echo $((7390 + 10 * $1)); }
kafka_port() { echo $((9091 + $1)); }

# http_status HOST:PORT PATH: the status code of a GET, or nothing.
http_status() {
  (
    exec 3<>"/dev/tcp/${1%:*}/${1##*:}" || exit 1
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$1" >&3
    IFS=' ' read -r -t 2 _ code _ <&3 && echo "$code"
  ) 2>/dev/null || true
}
listening() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

for f in ./bin/strata ./.tools/bin/minio; do
  [ -x "$f" ] || { echo "$f is missing: start the cluster with make cluster" >&2; exit 1; }
done
for id in $IDS; do
  b=$(base "$id")
  for addr in "127.0.0.1:$b" "127.0.0.1:$((b + 1))" "127.0.0.1:$((b + 2))" "127.0.0.1:$((b + 3))" "127.0.0.1:$(kafka_port "$id")"; do
    if listening "$addr"; then echo "$addr is in use: is a cluster or make run already running?" >&2; exit 1; fi
  done
done
if listening "$MINIO_ADDR"; then echo "$MINIO_ADDR is in use: is make run-minio running?" >&2; exit 1; fi

MINIO_PID="" BROKER_PIDS=""
# stop_pids SECONDS PID...: SIGTERM, then SIGKILL whatever still runs after SECONDS.
stop_pids() {
  local grace=$1 pid alive=""
  shift
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null || true
  for _ in $(seq $((grace * 10))); do
    alive=""
    for pid in "$@"; do if kill -0 "$pid" 2>/dev/null; then alive="$alive $pid"; fi; done
    [ -n "$alive" ] || break
    sleep 0.1
  done
  if [ -n "$alive" ]; then
    echo "still running after ${grace}s, killing:$alive"
    kill -KILL $alive 2>/dev/null || true
  fi
}
stop() {
  trap - EXIT INT TERM HUP
  echo "stopping the brokers and MinIO..."
  # Brokers first (each drains its calls for up to 10s), MinIO last.
  stop_pids 15 $BROKER_PIDS
  stop_pids 10 $MINIO_PID
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# died NAME PID LOG: if PID is gone, say so with the end of LOG, and fail.
died() {
  if kill -0 "$2" 2>/dev/null; then return 1; fi
  echo "$1 (pid $2) exited; the end of $3:" >&2
  tail -n 30 "$3" >&2
  return 0
}

# A development CA (kept across runs), a certificate per broker and one for
# the admin client, and the gossip key.
./bin/strata dev certs --dir "$CERTS" --brokers 3 --client admin >/dev/null
GOSSIP_KEY=$(cat "$CERTS/gossip.key")

mkdir -p "$DIR/minio"
./.tools/bin/minio server "$DIR/minio" --address "$MINIO_ADDR" --console-address 127.0.0.1:9001 \
  >"$DIR/minio.log" 2>&1 &
MINIO_PID=$!
disown # no job notices: a broker killed to watch a failover is reported below
for _ in $(seq 300); do
  [ "$(http_status "$MINIO_ADDR" /minio/health/ready)" = 200 ] && break
  if died MinIO "$MINIO_PID" "$DIR/minio.log"; then exit 1; fi
  sleep 0.1
done
[ "$(http_status "$MINIO_ADDR" /minio/health/ready)" = 200 ] || { echo "MinIO not ready after 30s; see $DIR/minio.log" >&2; exit 1; }

# start_broker ID: run broker ID in the background, its pid in BROKER_PID_<ID>.
start_broker() {
  local id=$1 b
  b=$(base "$id")
  mkdir -p "$DIR/broker-$id"
  ./bin/strata serve --node-id "$id" --data-dir "$DIR/broker-$id" \
    --listen "127.0.0.1:$b" --raft-listen "127.0.0.1:$((b + 1))" \
    --gossip-listen "127.0.0.1:$((b + 2))" --admin-listen "127.0.0.1:$((b + 3))" \
    --gossip-join "$JOIN" --gossip-bootstrap-expect 3 --gossip-profile local \
    --object-store-type s3 --object-store-endpoint "http://$MINIO_ADDR" \
    --object-store-bucket "$BUCKET" --object-store-create-bucket \
    --object-store-access-key "$MINIO_ROOT_USER" --object-store-secret-key "$MINIO_ROOT_PASSWORD" \
    --security-tls-ca-file "$CERTS/ca.pem" --security-tls-cert-file "$CERTS/broker-$id.pem" \
    --security-tls-key-file "$CERTS/broker-$id-key.pem" --gossip-secret-key "$GOSSIP_KEY" \
    --security-superusers User:admin \
    --kafka-listen "127.0.0.1:$(kafka_port "$id")" --kafka-advertise "127.0.0.1:$(kafka_port "$id")" \
    --kafka-sasl-mechanisms SCRAM-SHA-256,SCRAM-SHA-512 \
    >"$DIR/broker-$id.log" 2>&1 &
  disown
  printf -v "BROKER_PID_$id" %s "$!"
  BROKER_PIDS="$BROKER_PIDS $!"
}
pid_of() { local v="BROKER_PID_$1"; echo "${!v}"; }

# Every broker may create the bucket; losing that race is not an error.
for id in $IDS; do start_broker "$id"; done

# The brokers answer once the cluster has formed: all three or none.
export STRATA_TLS_CA=$CERTS/ca.pem STRATA_TLS_CERT=$CERTS/client-admin.pem STRATA_TLS_KEY=$CERTS/client-admin-key.pem
answers() { ./bin/strata topic list --broker "127.0.0.1:$(base "$1")" --timeout 2s >/dev/null 2>&1; }
deadline=$((SECONDS + WAIT))
for id in $IDS; do
  until answers "$id"; do
    for other in $IDS; do
      if died "broker $other" "$(pid_of "$other")" "$DIR/broker-$other.log"; then exit 1; fi
    done
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "broker $id did not answer on 127.0.0.1:$(base "$id") within ${WAIT}s (CLUSTER_WAIT); the end of its log:" >&2
      tail -n 30 "$DIR/broker-$id.log" >&2
      exit 1
    fi
    sleep 0.2
  done
done

cat <<EOF

Three brokers form one cluster, with TLS: clients authenticate and are held to
ACLs. The certificates are in $CERTS; User:admin (client-admin.pem) is a
superuser. The cold tier is bucket $BUCKET in MinIO on http://$MINIO_ADDR
(user $MINIO_ROOT_USER, password $MINIO_ROOT_PASSWORD). In another terminal:

  export PATH=\$PWD/bin:\$PATH STRATA_BROKER=127.0.0.1:7400,127.0.0.1:7410,127.0.0.1:7420
  export STRATA_TLS_CA=$CERTS/ca.pem STRATA_TLS_CERT=$CERTS/client-admin.pem STRATA_TLS_KEY=$CERTS/client-admin-key.pem
  strata topic create orders --partitions 6 --replication-factor 3 --config min.insync.replicas=2
  strata topic describe orders
  printf 'a\nb\nc\n' | strata produce orders --acks all
  strata consume orders --from earliest
  strata topic create bench --partitions 3 --replication-factor 3
  strata bench produce --topic bench --records 200000 --acks all

Kafka clients (TLS, with the admin's certificate or a SCRAM user):

  kcat -b 127.0.0.1:9092 -L -X security.protocol=ssl -X ssl.ca.location=$CERTS/ca.pem \\
    -X ssl.certificate.location=$CERTS/client-admin.pem -X ssl.key.location=$CERTS/client-admin-key.pem
  printf 'app-secret\n' | strata user create app --password-file -
  strata acl add --principal User:app --topic orders -o read
  kcat -b 127.0.0.1:9092 -L -X security.protocol=sasl_ssl -X sasl.mechanisms=SCRAM-SHA-512 \\
    -X sasl.username=app -X sasl.password=app-secret -X ssl.ca.location=$CERTS/ca.pem

Failover: kill -9 one broker's pid, then strata topic describe orders shows
other leaders and a smaller ISR; produce and consume go on.

EOF
for id in $IDS; do
  b=$(base "$id")
  echo "  broker $id: pid $(pid_of "$id"), gRPC 127.0.0.1:$b, Kafka 127.0.0.1:$(kafka_port "$id"), metrics https://127.0.0.1:$((b + 3))/metrics (as admin), log $DIR/broker-$id.log"
done
echo "  MinIO: pid $MINIO_PID, log $DIR/minio.log"
echo
echo "Ctrl-C stops them all; the data stays in $DIR (rm -rf $DIR starts afresh)."

# Watch: a broker that exits (killed to watch a failover) is reported once;
# the others keep running until Ctrl-C, or until none is left.
reported=""
while :; do
  left=0
  for id in $IDS; do
    pid=$(pid_of "$id")
    if kill -0 "$pid" 2>/dev/null; then
      left=$((left + 1))
    elif [[ " $reported " != *" $id "* ]]; then
      echo "broker $id (pid $pid) has exited; its log: $DIR/broker-$id.log"
      reported="$reported $id"
    fi
  done
  [ "$left" -gt 0 ] || { echo "no broker is left"; exit 1; }
  if died MinIO "$MINIO_PID" "$DIR/minio.log"; then exit 1; fi
  sleep 1
done
