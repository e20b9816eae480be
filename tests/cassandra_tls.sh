#!/usr/bin/env bash
# cassandra_tls.sh UNICO SCRATCHDIR - the Cassandra store over TLS, through
# the unico binary, against tests/support/cql_fake_server.py serving TLS with
# certificates made here by tests/support/tls_certs.sh (the openssl command):
#
#   - a verified connection works end to end (schema, insert, conflict,
#     get, check), by name (SNI sent, name verified) and by address (IP
#     verified, no SNI), with nothing on stderr;
#   - a certificate from an untrusted CA, an expired one, one for another
#     host, and the system's store instead of the test CA are refused
#     (exit 7, unavailable) naming the host and the verification failure;
#   - tls_verify_host=0 accepts the other host's certificate and warns on
#     stderr that host name verification is off, yet still refuses an
#     untrusted CA; tls_server_name= accepts it without a warning;
#   - a server demanding a client certificate (TLS 1.3, and 1.2 where the
#     handshake itself fails) refuses us without one, and with one from
#     another CA (the message says the node refused the certificate of
#     tls_cert=FILE), and accepts tls_cert/tls_key, also with an encrypted key and its
#     passphrase (URL or environment), which no output shows; a wrong
#     passphrase is a bad option (exit 1) that does not show it either;
#   - failover passes over nodes that fail TLS to one that verifies;
#   - plaintext to the TLS port and TLS to a plaintext port fail cleanly
#     (exit 7, a message saying what to use) instead of hanging;
#   - TLS options without TLS, a missing CA file: exit 1 naming the option;
#   - a server dropping connections after writes: every write completes
#     (retried with its op id), and every connection, reconnections
#     included, was a TLS handshake.
# Fails (never skips) when python3 or openssl is missing.
set -u
if [ $# -ne 2 ]; then
  echo "usage: cassandra_tls.sh UNICO SCRATCHDIR" >&2
  exit 2
fi
UNICO=$1
D=$2
here=$(cd "$(dirname "$0")" && pwd)
case $D in /*) ;; *) D=$PWD/$D ;; esac
for tool in python3 openssl timeout; do
  command -v $tool >/dev/null 2>&1 || { echo "cassandra_tls: $tool is needed" >&2; exit 1; }
done
rm -rf "$D"
mkdir -p "$D"
PASS=0
FAIL=0
PW="tls-pass-$$-$RANDOM"
UPW="user-pass-$$-$RANDOM"
sh "$here/support/tls_certs.sh" "$D/certs" "$PW" || { echo "cassandra_tls: certificates not made" >&2; exit 1; }
C=$D/certs

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# start NAME ARGS...: a stand-in server on a free port; port in $D/NAME.port
start() {
  local name=$1
  shift
  python3 "$here/support/cql_fake_server.py" --port 0 --port-file "$D/$name.port" --seed 7 \
    --stats-file "$D/$name.stats" "$@" 2>"$D/$name.log" &
  pids+=($!)
  echo $! >"$D/$name.pid"
}
start good --tls-cert "$C/server.pem" --tls-key "$C/server.key"
start wrong --tls-cert "$C/wronghost.pem" --tls-key "$C/wronghost.key"
start rogue --tls-cert "$C/rogue.pem" --tls-key "$C/rogue.key"
start expired --tls-cert "$C/expired.pem" --tls-key "$C/expired.key"
start mtls --tls-cert "$C/server.pem" --tls-key "$C/server.key" --tls-client-ca "$C/ca.pem" \
  --auth "bob:$UPW"
start mtls12 --tls-cert "$C/server.pem" --tls-key "$C/server.key" --tls-client-ca "$C/ca.pem" --tls12
start plain
start drop --tls-cert "$C/server.pem" --tls-key "$C/server.key" --drop 0.3
for n in good wrong rogue expired mtls mtls12 plain drop; do
  for _ in $(seq 100); do [ -s "$D/$n.port" ] && break; sleep 0.1; done
  [ -s "$D/$n.port" ] || { echo "server $n did not start"; cat "$D/$n.log"; exit 1; }
done
port() { cat "$D/$1.port"; }
OPTS="replication=1&allow_weak=1&connect_timeout_ms=5000&request_timeout_ms=5000"
CA="tls_ca=$C/ca.pem"

OUT=$D/.out
ERR=$D/.err
CODE=0
DESC=""
# run ARGS...: unico with ARGS (bounded: a hang is a failure, exit 124)
run() {
  DESC="unico $*"
  timeout 60 "$UNICO" "$@" >"$OUT" 2>"$ERR" </dev/null
  CODE=$?
}
ok() { PASS=$((PASS + 1)); }
bad() {
  FAIL=$((FAIL + 1))
  echo "FAIL: $*"
  echo "  command: $DESC"
  echo "  exit:    $CODE"
  echo "  stdout:  $(head -c 1500 "$OUT")"
  echo "  stderr:  $(head -c 1500 "$ERR")"
}
expect_exit() { if [ "$CODE" -eq "$1" ]; then ok; else bad "${2:-} expected exit $1"; fi; }
# expect_err TEXT...: stderr and the JSON message contain each TEXT
expect_err() {
  for t in "$@"; do
    if grep -qF -- "$t" "$ERR" && grep -qF -- "$t" "$OUT"; then ok; else bad "message lacks: $t"; fi
  done
}
expect_quiet() { if [ ! -s "$ERR" ]; then ok; else bad "stderr is not empty"; fi; }
no_secret() {
  for f in "$OUT" "$ERR"; do
    if grep -qF -- "$PW" "$f" || grep -qF -- "$UPW" "$f"; then bad "a secret shows"; else ok; fi
  done
}

printf 'CREATE TABLE users (id text PRIMARY KEY, email text, CONSTRAINT users_email UNIQUE (email));\n' >"$D/schema.cql"

# -- verified, by name and by address ----------------------------------------
G="cassandras://localhost:$(port good)/tls_ks?$OPTS&$CA"
run --store "$G" schema apply "$D/schema.cql"
expect_exit 0 "schema apply over TLS"
expect_quiet
run --store "$G" insert users '{"id":"u1","email":"a@example.com"}'
expect_exit 0 "insert over TLS"
expect_quiet
run --store "$G" insert users '{"id":"u2","email":"a@example.com"}'
expect_exit 3 "conflict over TLS"
grep -qF '"owner":"u1"' "$OUT" && ok || bad "the conflict names the owner"
GIP="cassandra://127.0.0.1:$(port good)/tls_ks?$OPTS&tls=1&$CA"
run --store "$GIP" get users u1
expect_exit 0 "get by address, tls=1 (the IP address verified)"
expect_quiet
grep -qF '"email":"a@example.com"' "$OUT" && ok || bad "the record read back"
run --store "$GIP" check
expect_exit 0 "check over TLS"
grep -qF '"ok":true' "$OUT" && ok || bad "check finds the store sound"

# failover: nodes that refuse TLS or whose certificate does not verify are
# passed over for the next host, which is verified as well
run --store "cassandras://localhost:$(port plain),localhost:$(port rogue),localhost:$(port good)/tls_ks?$OPTS&$CA" \
  get users u1
expect_exit 0 "failover past a plaintext node and an untrusted one"
expect_quiet
run --store "cassandras://localhost:$(port plain),localhost:$(port rogue)/tls_ks?$OPTS&$CA" get users u1
expect_exit 7 "no node that verifies"
expect_err "no Cassandra node reachable"

# -- refused certificates -------------------------------------------------------
run --store "cassandras://localhost:$(port rogue)/tls_ks?$OPTS&$CA" get users u1
expect_exit 7 "untrusted CA"
expect_err "localhost:$(port rogue)" "certificate refused" "unable to get local issuer certificate" \
  "no CA of $CA signed it"
grep -qF '"error":"unavailable"' "$OUT" && ok || bad "the error is unavailable"
run --store "cassandras://localhost:$(port good)/tls_ks?$OPTS" get users u1
expect_exit 7 "the test CA is not in the system's store"
expect_err "localhost:$(port good)" "unable to get local issuer certificate" "system's store"
run --store "cassandras://localhost:$(port expired)/tls_ks?$OPTS&$CA" get users u1
expect_exit 7 "expired certificate"
expect_err "localhost:$(port expired)" "certificate has expired"
run --store "cassandras://localhost:$(port wrong)/tls_ks?$OPTS&$CA" get users u1
expect_exit 7 "host name mismatch"
expect_err "localhost:$(port wrong)" "hostname mismatch" "not for localhost"
run --store "cassandras://127.0.0.1:$(port wrong)/tls_ks?$OPTS&$CA" get users u1
expect_exit 7 "IP address mismatch"
expect_err "127.0.0.1:$(port wrong)" "IP address mismatch"

# -- host name verification off, or the name given ----------------------------------
W="cassandras://127.0.0.1:$(port wrong)/tls_ks?$OPTS&$CA"
run --store "$W&tls_verify_host=0" schema apply "$D/schema.cql"
expect_exit 0 "tls_verify_host=0 accepts another host's certificate"
grep -qF "warning: TLS to 127.0.0.1:$(port wrong): host name verification is off (tls_verify_host=0)" "$ERR" \
  && ok || bad "tls_verify_host=0 warns on stderr"
run --store "cassandras://localhost:$(port rogue)/tls_ks?$OPTS&$CA&tls_verify_host=0" get users u1
expect_exit 7 "tls_verify_host=0 still refuses an untrusted CA"
expect_err "unable to get local issuer certificate" "[host name verification off]"
run --store "$W&tls_server_name=other.example" check
expect_exit 0 "tls_server_name= names the certificate's host"
expect_quiet

# -- mutual TLS -------------------------------------------------------------------
M="cassandras://localhost:$(port mtls)/tls_ks?$OPTS&$CA&user=bob&password=$UPW"
run --store "$M" get users u1
expect_exit 7 "no client certificate for a server that demands one"
# (TLS 1.3: the node refuses us after the handshake, with an alert or a
# reset, whichever comes first; either way the message says what it wants)
expect_err "localhost:$(port mtls)" "the node asked for a client certificate: give tls_cert= and tls_key="
no_secret
# a client certificate from a CA the node does not trust: refused after
# the handshake (TLS 1.3) with an alert (the stand-in's "unknown ca";
# Cassandra's netty engine sends "internal error") or a reset, whichever
# comes first: the message says so and names the option that set it
run --store "$M&tls_cert=$C/rogue-client.pem&tls_key=$C/rogue-client.key" get users u1
expect_exit 7 "a client certificate from another CA"
expect_err "localhost:$(port mtls)" "refused our client certificate, tls_cert=$C/rogue-client.pem"
grep -qF "the node asked for a client certificate" "$ERR" && bad "a certificate sent is not one lacking" || ok
run --store "$M&tls_cert=$C/client.pem&tls_key=$C/client.key" schema apply "$D/schema.cql"
expect_exit 0 "client certificate and key"
expect_quiet
run --store "$M&tls_cert=$C/client.pem&tls_key=$C/client-enc.key&tls_key_password=$PW" \
  insert users '{"id":"m1","email":"m@example.com"}'
expect_exit 0 "an encrypted key with tls_key_password"
no_secret
run --store "$M&tls_cert=$C/client.pem&tls_key=$C/client-enc.key&tls_key_password=$PW" \
  insert users '{"id":"m2","email":"m@example.com"}'
expect_exit 3 "conflict over mutual TLS"
no_secret
UNICO_CASSANDRA_TLS_KEY_PASSWORD=$PW run --store "$M&tls_cert=$C/client.pem&tls_key=$C/client-enc.key" \
  get users m1
expect_exit 0 "the passphrase from UNICO_CASSANDRA_TLS_KEY_PASSWORD"
run --store "$M&tls_cert=$C/client.pem&tls_key=$C/client-enc.key&tls_key_password=x$PW" get users m1
expect_exit 1 "a wrong passphrase"
expect_err "tls_key=$C/client-enc.key" "bad decrypt"
no_secret
run --store "$M&tls_cert=$C/client.pem&tls_key=$C/client-enc.key" get users m1
expect_exit 1 "an encrypted key without its passphrase"
expect_err "tls_key_password"

# TLS 1.2: the handshake itself fails without a client certificate
M12="cassandras://localhost:$(port mtls12)/tls_ks?$OPTS&$CA"
run --store "$M12" get users u1
expect_exit 7 "TLS 1.2: no client certificate"
expect_err "TLS handshake with localhost:$(port mtls12) failed" "the node asked for a client certificate"
run --store "$M12&tls_cert=$C/rogue-client.pem&tls_key=$C/rogue-client.key" get users u1
expect_exit 7 "TLS 1.2: a client certificate from another CA"
expect_err "TLS handshake with localhost:$(port mtls12) failed" \
  "the node refused our client certificate, tls_cert=$C/rogue-client.pem"
run --store "$M12&tls_cert=$C/client.pem&tls_key=$C/client.key" schema apply "$D/schema.cql"
expect_exit 0 "TLS 1.2 with a client certificate"
expect_quiet

# -- the wrong protocol on either side ----------------------------------------------
run --store "cassandra://localhost:$(port good)/tls_ks?$OPTS" get users u1
expect_exit 7 "plaintext to a TLS port"
expect_err "localhost:$(port good)" "cassandras://"
run --store "cassandras://localhost:$(port plain)/tls_ks?$OPTS&$CA" get users u1
expect_exit 7 "TLS to a plaintext port"
expect_err "TLS handshake with localhost:$(port plain) failed" "no TLS on this port"

# -- bad TLS options ----------------------------------------------------------------
run --store "cassandra://localhost:$(port good)/tls_ks?$OPTS&$CA" get users u1
expect_exit 1 "tls_ca without TLS"
expect_err "tls_ca needs TLS"
run --store "cassandras://localhost:$(port good)/tls_ks?$OPTS&tls_ca=$D/nope.pem" get users u1
expect_exit 1 "a missing CA file"
expect_err "tls_ca=$D/nope.pem"
run --store "cassandras://localhost:$(port good)/tls_ks?$OPTS&tls_cert=$C/client.pem" get users u1
expect_exit 1 "tls_cert without tls_key"
run --store "cassandras://localhost:$(port good)/tls_ks?$OPTS&tls=0" get users u1
expect_exit 1 "cassandras:// with tls=0"

# -- reconnection after dropped connections stays TLS ---------------------------------
R="cassandras://localhost:$(port drop)/tls_ks?$OPTS&$CA"
n_runs=0
attempt() { # ARGS...: retried while unavailable (a write with its op id)
  for _ in $(seq 20); do
    run "$@"
    n_runs=$((n_runs + 1))
    [ "$CODE" -ne 7 ] && return
  done
}
attempt --store "$R" schema apply "$D/schema.cql"
expect_exit 0 "schema apply on the dropping server"
for i in 1 2 3 4 5 6 7 8; do
  attempt --store "$R" insert users "{\"id\":\"r$i\",\"email\":\"r$i@example.com\"}" --op-id "op-r$i"
  expect_exit 0 "insert r$i on the dropping server"
done
attempt --store "$R" check
expect_exit 0 "check on the dropping server"

# the servers write their stats at exit
for n in good drop; do
  kill -TERM "$(cat "$D/$n.pid")"
  wait "$(cat "$D/$n.pid")" 2>/dev/null || true
done
python3 - "$D/good.stats" "$D/drop.stats" "$n_runs" <<'EOF' || FAIL=$((FAIL + 1))
import json, sys
good, drop = (json.load(open(p)) for p in sys.argv[1:3])
runs = int(sys.argv[3])
fails = []
t = good["tls"]
# by name: SNI "localhost"; by address: none ("-")
if "localhost" not in t["sni"]: fails.append("no SNI localhost: %r" % t["sni"])
if "-" not in t["sni"]: fails.append("SNI sent for an IP address: %r" % t["sni"])
t = drop["tls"]
if drop["faults"]["drop"] < 1: fails.append("the server dropped nothing: %r" % drop["faults"])
# a process that reconnected made more connections than there were runs
if drop["connections"] <= runs:
    fails.append("no reconnection: %d connections for %d runs" % (drop["connections"], runs))
if t["handshakes"] != drop["connections"] or t["failures"]:
    fails.append("a connection without TLS: %r of %d" % (t, drop["connections"]))
for f in fails: print("FAIL: " + f)
print("stats: good sni %r; drop: %d connections, %d runs, %d TLS handshakes, %d failed, %d drops" % (
    sorted(set(good["tls"]["sni"])), drop["connections"], runs, t["handshakes"], t["failures"],
    drop["faults"]["drop"]))
sys.exit(1 if fails else 0)
EOF

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
