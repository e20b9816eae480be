#!/bin/sh
# http_curl.sh - `unico serve` with curl: the status codes of docs/http.md a
# shell script sees, and a clean exit on SIGTERM. Every answer curl gets is
# kept (WORKDIR/answers) and checked against docs/openapi.json at the end
# by tests/support/openapi_check.py, run by PYTHON (one with jsonschema).
# usage: tests/http_curl.sh PATH/TO/unico WORKDIR PYTHON SRCDIR
set -u
UNICO=$1
WORK=$2
PY=$3
SRC=$4
rm -rf "$WORK"
mkdir -p "$WORK/answers"
fails=0
n=0

"$UNICO" serve --store "lmdb:$WORK/data" --listen 127.0.0.1:0 \
  --access-log "$WORK/access.log" >"$WORK/out.txt" 2>"$WORK/err.txt" &
PID=$!
i=0
while [ ! -s "$WORK/out.txt" ] && [ $i -lt 300 ]; do
  sleep 0.1
  i=$((i + 1))
done
URL=$(sed -n 's/.*"listen":"\([^"]*\)".*/\1/p' "$WORK/out.txt")
if [ -z "$URL" ]; then
  echo "FAIL: the server did not start"
  cat "$WORK/err.txt"
  kill "$PID" 2>/dev/null
  exit 1
fi

# keep CURL-ARGS...: one request; its answer is kept for the OpenAPI check
# (answers/N.meta: status, method, URL; N.head: the headers; N.body) and
# copied to $WORK/headers and $WORK/body
keep() {
  n=$((n + 1))
  a="$WORK/answers/$n"
  : >"$a.body"
  curl -sS -D "$a.head" -o "$a.body" -w '%{http_code} %{method} %{url_effective}\n' "$@" >"$a.meta"
  cp "$a.head" "$WORK/headers"
  cp "$a.body" "$WORK/body"
}

# expect STATUS TEXT-IN-BODY CURL-ARGS...: one request, its status and body
expect() {
  want=$1
  grep=$2
  shift 2
  keep "$@"
  got=$(cut -d' ' -f1 "$WORK/answers/$n.meta")
  if [ "$got" != "$want" ] || ! grep -q -- "$grep" "$WORK/body"; then
    echo "FAIL: curl $* -> $got $(cat "$WORK/body"), wanted $want with $grep"
    fails=$((fails + 1))
  else
    echo "ok   $want $*"
  fi
}

J='Content-Type: application/json'
cat >"$WORK/schema.cql" <<'EOF'
CREATE TABLE users (
  id    text PRIMARY KEY,
  email text,
  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold
);
EOF
expect 200 '"status":"ok"' "$URL/healthz"
expect 404 '"not_found"' "$URL/v1/_schema"
expect 200 '"changed":true' -X PUT --data-binary @"$WORK/schema.cql" "$URL/v1/_schema"
expect 201 '"version":1' -H "$J" -d '{"id":"u1","email":"Ann@Example.com"}' "$URL/v1/users"
expect 409 '"owner":"u1"' -H "$J" -d '{"id":"u2","email":"ann@example.COM"}' "$URL/v1/users"
expect 400 '"invalid"' -H "$J" -d '{"id":"u2",' "$URL/v1/users"
expect 400 '"column":"age"' -H "$J" -d '{"id":"u2","age":1}' "$URL/v1/users"
expect 200 '"pk":"u1"' "$URL/v1/users/by/users_email?v=ANN@example.com"
expect 200 '"version":2' -X PATCH -H 'If-Match: "1"' -H "$J" -d '{"email":"b@x"}' "$URL/v1/users/u1"
expect 412 '"current_version":2' -X PATCH -H 'If-Match: "1"' -H "$J" -d '{"email":"c@x"}' "$URL/v1/users/u1"
expect 404 '"not_found"' "$URL/v1/users/nobody"
expect 404 '"not_found"' "$URL/v1/nosuch/u1"
expect 404 '"not_found"' "$URL/nowhere"
expect 405 '"method_not_allowed"' -X PUT "$URL/v1/users"
expect 201 '"pk":"u3"' -H 'Idempotency-Key: k-u3' -H "$J" -d '{"id":"u3"}' "$URL/v1/users"
expect 201 '"pk":"u3"' -H 'Idempotency-Key: k-u3' -H "$J" -d '{"id":"u3"}' "$URL/v1/users"
expect 422 '"op_id_reused"' -H 'Idempotency-Key: k-u3' -H "$J" -d '{"id":"u4"}' "$URL/v1/users"
head -c 1100000 /dev/zero | tr '\0' 'x' >"$WORK/big"
expect 413 '"payload_too_large"' -H "$J" --data-binary @"$WORK/big" "$URL/v1/users"
expect 200 '"pk":"u1"' -X DELETE "$URL/v1/users/u1"
expect 200 'unico_http_requests_total{method="POST",route="/v1/{table}",status="409"} 1' "$URL/metrics"

# the headers of an insert: 201, ETag and Location
keep -H "$J" -d '{"id":"u5","email":"e@x"}' "$URL/v1/users"
if grep -q '^ETag: "1"' "$WORK/headers" && grep -q '^Location: /v1/users/u5' "$WORK/headers"; then
  echo "ok   ETag and Location"
else
  echo "FAIL: insert headers"
  cat "$WORK/headers"
  fails=$((fails + 1))
fi

# HTTP/1.1 without Host, a list of If-Match headers: 400 (RFC 9112, docs/http.md)
expect 400 '"invalid"' -H 'Host:' "$URL/healthz"
expect 400 'lists' -X DELETE -H 'If-Match: "1"' -H 'If-Match: "9"' "$URL/v1/users/u5"
expect 400 '"invalid"' -X DELETE -H 'If-Match: " 1"' "$URL/v1/users/u5"

# a Location clients can follow: a pk "holds" is written %68olds
keep -H "$J" -d '{"id":"holds"}' "$URL/v1/users"
loc=$(sed -n 's/^Location: \([^[:space:]]*\).*/\1/p' "$WORK/headers")
if [ "$loc" = /v1/users/%68olds ]; then echo "ok   Location $loc"; else
  echo "FAIL: Location of pk holds: $loc"; fails=$((fails + 1)); fi
expect 200 '"pk":"holds"' "$URL$loc"

# a hold is released only through its own table
keep -H "$J" -d '{"constraint":"users_email","value":"h@x","ttl":60}' "$URL/v1/users/holds"
tok=$(sed -n 's/.*"token":"\([^"]*\)".*/\1/p' "$WORK/body")
expect 404 'nosuch' -X DELETE "$URL/v1/nosuch/holds/$tok"
expect 200 '"released":true' -X DELETE "$URL/v1/users/holds/$tok"

kill -TERM "$PID"
wait "$PID"
rc=$?
if [ "$rc" != 0 ]; then
  echo "FAIL: exit $rc after SIGTERM"
  tail -20 "$WORK/err.txt"
  fails=$((fails + 1))
else
  echo "ok   exit 0 after SIGTERM"
fi
if [ "$(wc -l <"$WORK/access.log")" -lt 20 ]; then
  echo "FAIL: access log"
  fails=$((fails + 1))
fi
# every answer above, held to docs/openapi.json
if "$PY" "$SRC/tests/support/openapi_check.py" "$SRC/docs/openapi.json" "$WORK/answers"; then
  echo "ok   the answers fit docs/openapi.json"
else
  echo "FAIL: answers that docs/openapi.json does not describe"
  fails=$((fails + 1))
fi
[ $fails = 0 ] && echo "all passed" || echo "$fails failed"
[ $fails = 0 ]
