#!/bin/sh
# A five-minute tour of unico on the embedded store: every command prints
# what it runs, its JSON output and its exit code.
# Usage: examples/tour.sh [path/to/unico]   (store: $UNICO_STORE, else a
# fresh directory under /tmp)
set -u
UNICO=${1:-$(dirname "$0")/../build/unico}
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -z "${UNICO_STORE:-}" ]; then
  UNICO_STORE="lmdb:$(mktemp -d /tmp/unico-tour.XXXXXX)/data"
fi
export UNICO_STORE
echo "# store: $UNICO_STORE"

run() {
  echo
  echo "\$ unico $*"
  "$UNICO" "$@" 2>&1
  echo "# exit $?"
}

run schema apply "$HERE/schema.cql"
run insert users '{"id":"u1","username":"alice","email":"Alice@Example.COM","phone":"+15550001"}'
# the same email in another spelling is the same value under casefold
run insert users '{"id":"u2","username":"bob","email":"alice@example.com"}'
run insert users '{"id":"u2","username":"bob","email":"bob@example.com"}'
# who owns a value?
run lookup users users_username ALICE
# an email string equal to a phone string is no conflict: constraints never mix
run insert users '{"id":"u3","username":"carol","email":"+15550001"}'
# change alice's email: the old one is free at once
run update users u1 '{"email":"alice@new.example"}' --if-version 1
run insert users '{"id":"u4","username":"dave","email":"alice@example.com"}'
# a stale version is refused
run update users u1 '{"phone":null}' --if-version 1
# retrying a write with the same operation id applies it once
run insert users '{"id":"u5","username":"erin"}' --op-id signup-erin-1
run insert users '{"id":"u5","username":"erin"}' --op-id signup-erin-1
run get users u1
run delete users u4
run insert users '{"id":"u6","username":"frank","email":"alice@example.com"}'
# sign-up in two steps: hold the username, others are refused (busy), the
# token takes it
TOKEN=$("$UNICO" reserve users users_username Grace --ttl 600 | sed 's/.*"token":"\([^"]*\)".*/\1/')
echo; echo "\$ unico reserve users users_username Grace --ttl 600"; echo "# token: $TOKEN"
run insert users '{"id":"x","username":"grace"}'
run insert users '{"id":"u7","username":"grace"}' --hold "$TOKEN"
# at most 3 subscribers per option of a poll
run insert subscriptions '{"id":"s1","poll_id":"p1","name":"Ann","option":"a"}'
run insert subscriptions '{"id":"s2","poll_id":"p1","name":"Bob","option":"a"}'
run insert subscriptions '{"id":"s3","poll_id":"p1","name":"Cy","option":"a"}'
run insert subscriptions '{"id":"s4","poll_id":"p1","name":"Dee","option":"a"}'
run insert subscriptions '{"id":"s4","poll_id":"p1","name":"Dee","option":"b"}'
run update subscriptions s4 '{"option":"a"}'
run check
