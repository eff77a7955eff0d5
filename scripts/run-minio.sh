#!/usr/bin/env bash
# make run-minio: a MinIO server and one broker using it as the cold tier,
# both on loopback, data under ./data-minio (apart from make run's ./data).
# Ctrl-C stops both (by pid).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=./data-minio
MINIO_ADDR=127.0.0.1:9000
mkdir -p "$DATA/minio"
export MINIO_ROOT_USER=strata MINIO_ROOT_PASSWORD=strata-dev-secret
export MINIO_UPDATE=off MINIO_CALLHOME_ENABLE=off MINIO_BROWSER=off
# The broker's settings in a file, so that strata bucket reads the same
# store with --config.
CONFIG="$DATA/strata.yaml"
cat >"$CONFIG" <<YAML
data_dir: $DATA/broker
object_store:
  type: s3
  endpoint: http://$MINIO_ADDR
  bucket: strata
  create_bucket: true
  access_key: $MINIO_ROOT_USER
  secret_key: $MINIO_ROOT_PASSWORD
YAML
./.tools/bin/minio server "$DATA/minio" --address "$MINIO_ADDR" --console-address 127.0.0.1:9001 \
  >"$DATA/minio.log" 2>&1 &
MINIO_PID=$!
stop() { kill "$MINIO_PID" 2>/dev/null || true; wait "$MINIO_PID" 2>/dev/null || true; }
trap stop EXIT
for _ in $(seq 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/9000") 2>/dev/null; then break; fi
  sleep 0.1
done
echo "MinIO on http://$MINIO_ADDR (user $MINIO_ROOT_USER, password $MINIO_ROOT_PASSWORD), log in $DATA/minio.log"
echo "Inspect its bucket with: ./bin/strata bucket ls --config $CONFIG (or bucket verify --config $CONFIG)"
./bin/strata serve --config "$CONFIG"
