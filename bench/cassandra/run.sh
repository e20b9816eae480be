#!/bin/sh
# bench/cassandra/run.sh - what a write costs on the cassandra store
# (LWTs, SERIAL reads, round trips, latency), written to
# bench/results/cassandra.json and printed as a table.
#
#   sh bench/cassandra/run.sh [BUILD_DIR]
#
# Against UNICO_TEST_CASSANDRA=host:port when set (keyspace unico_bench,
# replication 1 with allow_weak=1: set UNICO_BENCH_CASSANDRA_OPTS for a
# cluster); otherwise against tests/support/cql_fake_server.py on loopback, where
# the counts are the store's real ones and the latencies are not
# Cassandra's (no Paxos, no replicas).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
bin=$build/bench/cass-bench
[ -x "$bin" ] || { echo "run.sh: build first ($bin missing)" >&2; exit 1; }
mkdir -p "$root/bench/results"
out=$root/bench/results/cassandra.json
n=${CASS_BENCH_N:-200}
opts=${UNICO_BENCH_CASSANDRA_OPTS:-replication=1&allow_weak=1}
if [ -n "${UNICO_TEST_CASSANDRA:-}" ]; then
  echo "cass-bench against $UNICO_TEST_CASSANDRA"
  exec "$bin" --store "cassandra://$UNICO_TEST_CASSANDRA/unico_bench?$opts" --n "$n" --json "$out"
fi
echo "cass-bench against the stand-in server (tests/support/cql_fake_server.py): counts are real, latencies are loopback"
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
UNICO_TEST_CASSANDRA_OPTS="$opts" sh "$root/tests/support/cassandra_run.sh" fake "$state" \
  sh -c 'exec "$0" --store "${UNICO_TEST_STORE_BASE%&table=}" --n "$1" --json "$2"' "$bin" "$n" "$out"
