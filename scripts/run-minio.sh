#!/usr/bin/env bash
# make run-minio: a MinIO server and one broker using it as the cold tier,
# both on loopback, data under ./data. Ctrl-C stops both (by pid).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=./data
MINIO_ADDR=127.0.0.1:9000
mkdir -p "$DATA/minio"
export MINIO_ROOT_USER=strata MINIO_ROOT_PASSWORD=strata-dev-secret
export MINIO_UPDATE=off MINIO_CALLHOME_ENABLE=off MINIO_BROWSER=off
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
./bin/strata serve --data-dir "$DATA/broker" \
  --object-store-type s3 --object-store-endpoint "http://$MINIO_ADDR" \
  --object-store-bucket strata --object-store-create-bucket \
  --object-store-access-key "$MINIO_ROOT_USER" --object-store-secret-key "$MINIO_ROOT_PASSWORD"
