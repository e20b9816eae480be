#!/bin/sh
# cassandra_run.sh - run a test program against a Cassandra store.
#
#   cassandra_run.sh live STATEDIR COMMAND [ARG...]
#       against the server named by UNICO_TEST_CASSANDRA=HOST:PORT (a real
#       Apache Cassandra or ScyllaDB; UNICO_CASSANDRA_USER and
#       UNICO_CASSANDRA_PASSWORD when it wants a login). Without it: prints
#       one "skipped: no Cassandra" line and exits 77 (ctest: skipped).
#   cassandra_run.sh fake STATEDIR COMMAND [ARG...]
#       against tests/support/cql_fake_server.py, a stand-in CQL v4 server started on
#       a free loopback port and stopped by its pid afterwards (faults from
#       UNICO_FAKE_CQL_FLAGS, e.g. "--drop 0.01 --reorder"). With
#       UNICO_FAKE_CQL_TLS=1 the server serves TLS with a certificate made
#       in STATEDIR/certs by tests/support/tls_certs.sh (the openssl command), and
#       the URL is cassandras://127.0.0.1:PORT/...&tls_ca=... (the address
#       verified against the certificate's).
#
# COMMAND runs with UNICO_TEST_STORE_BASE set to a URL ending in "table=",
# so the conformance suite and torture append a table name; the keyspace
# is unico_test (created with replication 1 and allow_weak=1 on a fake or
# single-node server; set UNICO_TEST_CASSANDRA_OPTS to change the options).
# Exits with COMMAND's code.
set -eu

mode=${1:?usage: cassandra_run.sh live|fake STATEDIR COMMAND [ARG...]}
state=${2:?statedir}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$state"
opts=${UNICO_TEST_CASSANDRA_OPTS:-replication=1&allow_weak=1&request_timeout_ms=5000}

case $mode in
live)
  if [ -z "${UNICO_TEST_CASSANDRA:-}" ]; then
    echo "skipped: no Cassandra (set UNICO_TEST_CASSANDRA=host:port to run this test against a live server)"
    exit 77
  fi
  UNICO_TEST_STORE_BASE="cassandra://$UNICO_TEST_CASSANDRA/unico_test?$opts&table="
  export UNICO_TEST_STORE_BASE
  exec "$@"
  ;;
fake)
  command -v python3 >/dev/null 2>&1 || { echo "cassandra_run: python3 is needed" >&2; exit 1; }
  rm -f "$state/port"
  scheme=cassandra
  tls_flags=""
  if [ "${UNICO_FAKE_CQL_TLS:-0}" = 1 ]; then
    sh "$here/tls_certs.sh" "$state/certs" || exit 1
    scheme=cassandras
    tls_flags="--tls-cert $state/certs/server.pem --tls-key $state/certs/server.key"
    opts="$opts&tls_ca=$state/certs/ca.pem"
  fi
  # shellcheck disable=SC2086
  python3 "$here/cql_fake_server.py" --port 0 --port-file "$state/port" \
    $tls_flags ${UNICO_FAKE_CQL_FLAGS:-} 2>"$state/server.log" &
  pid=$!
  trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT INT TERM
  i=0
  while [ ! -s "$state/port" ]; do
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
      echo "cassandra_run: the fake server did not start:" >&2
      cat "$state/server.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  port=$(cat "$state/port")
  UNICO_TEST_STORE_BASE="$scheme://127.0.0.1:$port/unico_test?$opts&table="
  export UNICO_TEST_STORE_BASE
  set +e
  "$@"
  rc=$?
  set -e
  if [ $rc -ne 0 ]; then
    echo "cassandra_run: server log (last lines):" >&2
    tail -20 "$state/server.log" >&2
  fi
  exit $rc
  ;;
*)
  echo "usage: cassandra_run.sh live|fake STATEDIR COMMAND [ARG...]" >&2
  exit 2
  ;;
esac
