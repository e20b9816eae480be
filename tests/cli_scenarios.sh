#!/usr/bin/env bash
# cli_scenarios.sh - field scenarios and the CLI contract, through the unico
# binary only. Usage: bash cli_scenarios.sh /path/to/unico SCRATCHDIR
#
# Every command runs through expect_exit (or expect_text for help and raw
# DDL), which checks the exit code, that stdout is exactly one JSON object,
# that stderr is non-empty exactly when the exit code is not 0, and that an
# error object's "code" is the exit code. Field checks use python3 (no jq).
# Prints "N passed, M failed" last and exits non-zero when M > 0.
set -u

if [ $# -ne 2 ]; then
  echo "usage: bash cli_scenarios.sh /path/to/unico SCRATCHDIR" >&2
  exit 2
fi
UNICO=$1
SCRATCH=$2
case $SCRATCH in /*) ;; *) SCRATCH=$PWD/$SCRATCH ;; esac
case $UNICO in /*) ;; */*) UNICO=$PWD/$UNICO ;; esac
rm -rf "$SCRATCH"
mkdir -p "$SCRATCH" || exit 2
unset UNICO_STORE

PASS=0
FAIL=0
OUT=$SCRATCH/.stdout
ERR=$SCRATCH/.stderr
CODE=0
DESC=""   # the last command, for failure messages
STDIN=""  # when set, fed to the next command on standard input
STDIN_FILE=""  # when set, this file is the next command's standard input
STORE=""  # --store URL of the current scenario

# ------------------------------------------------------------- harness

pass() { PASS=$((PASS + 1)); }
fail() {
  FAIL=$((FAIL + 1))
  echo "FAIL: $*"
  echo "  command: $DESC"
  echo "  exit:    $CODE"
  echo "  stdout:  $(head -c 2000 "$OUT")"
  echo "  stderr:  $(head -c 2000 "$ERR")"
  # (the mutation check: one failure is enough)
  if [ -n "${UNICO_TEST_FAIL_FAST:-}" ]; then exit 1; fi
}

# run CMD...: run a command, capture stdout, stderr and exit code.
run() {
  DESC="$*"
  if [ -n "$STDIN_FILE" ]; then
    DESC="$DESC  < $STDIN_FILE"
    "$@" >"$OUT" 2>"$ERR" <"$STDIN_FILE"
    CODE=$?
  elif [ -n "$STDIN" ]; then
    DESC="$DESC  <<< $(printf %s "$STDIN" | head -c 200)"
    printf '%s' "$STDIN" | "$@" >"$OUT" 2>"$ERR"
    CODE=$?
  else
    "$@" >"$OUT" 2>"$ERR" </dev/null
    CODE=$?
  fi
  STDIN=""
  STDIN_FILE=""
}

# One python3 process answers every JSON question (starting python3 for each
# check would dominate the run time). A request is one line of fields
# separated by \x1f; the reply is one line of problems separated by \x1f,
# empty when there are none.
PYSRC='
import json, sys

NAMES = {"invalid", "not_found", "conflict", "limit", "version_mismatch",
         "busy", "unavailable", "unknown_outcome", "out_of_memory",
         "store_full", "schema_refused", "corrupt", "unsupported",
         "op_id_reused", "usage"}

def load(path):
    return open(path, encoding="utf-8").read()

def check_json(path, code):
    text = load(path)
    try:
        v = json.loads(text)
    except ValueError as e:
        return ["stdout is not one JSON value: %s" % e]
    if not isinstance(v, dict):
        return ["stdout is JSON but not an object"]
    p = []
    if not text.endswith("\n") or text.count("\n") != 1:
        p.append("stdout is not one line ending in a newline")
    if code != 0:
        if v.get("error") not in NAMES:
            p.append("error object has no known \"error\" name: %r" % v.get("error"))
        if v.get("code") != code:
            p.append("error object has \"code\" %r, exit code is %d" % (v.get("code"), code))
        if not isinstance(v.get("message"), str) or not v.get("message"):
            p.append("error object has no message")
    elif "error" in v:
        p.append("exit 0 with an error object")
    return p

MISSING = object()

def at(v, path):
    for k in path.split(".") if path else []:
        if isinstance(v, list) and k.isdigit() and int(k) < len(v):
            v = v[int(k)]
        elif isinstance(v, dict) and k in v:
            v = v[k]
        else:
            return MISSING
    return v

def field(path, fpath, want):
    try:
        v = at(json.loads(load(path)), fpath)
    except ValueError:
        return ["stdout is not JSON"]
    if want is MISSING:
        return [] if v is MISSING else ["%s is %s, expected it absent" % (fpath, json.dumps(v))]
    if v is MISSING:
        return ["%s is absent, expected %s" % (fpath, json.dumps(want))]
    if v != want or type(v) != type(want):
        return ["%s is %s, expected %s" % (fpath, json.dumps(v, ensure_ascii=False),
                                           json.dumps(want, ensure_ascii=False))]
    return []

for line in sys.stdin:
    f = line.rstrip("\n").split("\x1f")
    try:
        if f[0] == "json":
            p = check_json(f[1], int(f[2]))
        elif f[0] == "field":
            p = field(f[1], f[2], MISSING if f[3] == "absent" else json.loads(f[3]))
        elif f[0] == "field_file":
            p = field(f[1], f[2], load(f[3]))
        else:
            p = ["harness: unknown request %r" % f[0]]
    except Exception as e:
        p = ["harness error: %r" % (e,)]
    sys.stdout.write("\x1f".join(x.replace("\n", " ") for x in p) + "\n")
    sys.stdout.flush()
'
command -v python3 >/dev/null 2>&1 || { echo "FAIL: python3 is needed for the JSON checks"; exit 1; }
coproc PY { exec python3 -u -c "$PYSRC"; }

# ask FIELD...: send one request to the python process, print its problems
# one a line.
# A checker that is gone (python3 missing or dead) answers nothing: that is
# a problem of its own, never a pass.
ask() {
  local IFS=$'\x1f'
  local reply
  if [ -z "${PY[1]:-}" ] || [ -z "${PY[0]:-}" ] ||
    ! { printf '%s\n' "$*" >&"${PY[1]}" && IFS= read -r reply <&"${PY[0]}"; } 2>/dev/null; then
    echo "the JSON checker (python3) did not answer"
    return 0
  fi
  [ -n "$reply" ] && printf '%s\n' "$reply" | tr '\037' '\n'
  return 0
}

# Checks shared by expect_exit and expect_text; prints the problems.
common_problems() {
  local want=$1
  [ "$CODE" -eq "$want" ] || echo "exit code $CODE, expected $want"
  if [ "$want" -eq 0 ] && [ -s "$ERR" ]; then
    echo "stderr is not empty on success"
  fi
  if [ "$want" -ne 0 ] && [ ! -s "$ERR" ]; then
    echo "stderr is empty on failure"
  fi
  return 0
}

# report PROBLEMS: one check passed (no problems) or failed.
report() {
  local problems
  problems=$(printf '%s' "$1" | sed '/^$/d')
  if [ -z "$problems" ]; then pass; else fail "$problems"; fi
}

# expect_exit N CMD...: exit code N, stdout one JSON object, stderr non-empty
# exactly when N != 0, and an error object {"error":..,"code":N,"message":..}.
expect_exit() {
  local want=$1
  shift
  run "$@"
  report "$(common_problems "$want"; ask json "$OUT" "$CODE")"
}

# expect_text N CMD...: like expect_exit for output that is not JSON (help,
# raw DDL): stdout must be non-empty.
expect_text() {
  local want=$1
  shift
  run "$@"
  report "$(common_problems "$want"; [ -s "$OUT" ] || echo "stdout is empty")"
}

# field PATH WANT: the JSON value at PATH (dots; numbers index arrays) of the
# last stdout equals the JSON value WANT ("absent": no such member).
field() { report "$(ask field "$OUT" "$1" "$2")"; }
# field_file PATH FILE: the value at PATH is the text of FILE.
field_file() { report "$(ask field_file "$OUT" "$1" "$2")"; }

# out_contains TEXT / err_contains TEXT: the last stdout / stderr has TEXT.
out_contains() {
  if grep -qF -- "$1" "$OUT"; then pass; else fail "stdout lacks \"$1\""; fi
}
err_contains() {
  if grep -qF -- "$1" "$ERR"; then pass; else fail "stderr lacks \"$1\""; fi
}
err_lacks() {
  if grep -qF -- "$1" "$ERR"; then fail "stderr has \"$1\""; else pass; fi
}
# message_has_location L C: the error message names line L, column C.
message_has_location() {
  if grep -qE -- "(\\b$1:$2\\b|line $1, column $2)" "$OUT"; then pass
  else fail "the message does not name line $1, column $2"; fi
}
# check_true DESCRIPTION CMD...: a plain shell condition.
check_true() {
  local what=$1
  shift
  if "$@"; then pass; else fail "$what"; fi
}

# A fresh store per scenario.
scenario() {
  echo "--- $1"
  STORE="lmdb:$SCRATCH/$2"
  rm -rf "${SCRATCH:?}/${2:?}"
}
u() { "$UNICO" --store "$STORE" "$@"; }

# ------------------------------------------------------------- schema

DDL=$SCRATCH/schema.cql
cat >"$DDL" <<'EOF'
CREATE TABLE users (
  id       text PRIMARY KEY,
  username text,
  email    text,
  phone    text,
  UNIQUE (username) NORMALIZE casefold,
  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,
  UNIQUE (phone)
);

CREATE TABLE links (
  id text PRIMARY KEY,
  a  text,
  b  text,
  UNIQUE (a, b)
);

CREATE TABLE votes (
  poll_id text,
  voter   text,
  choice  text,
  PRIMARY KEY (poll_id, voter)
);

CREATE TABLE items (
  id   int PRIMARY KEY,
  name text
);
EOF

# ------------------------------------------------------------- scenarios

scenario "sign-up: username and email both unique, lookup by username" signup
expect_exit 0 u schema apply "$DDL"
field changed true
field schema_version 1
field tables '["users","links","votes","items"]'
expect_exit 0 u insert users '{"id":"u1","username":"alice","email":"alice@example.com"}'
field pk '"u1"'
field version 1
expect_exit 3 u insert users '{"id":"u2","username":"Alice","email":"other@example.com"}'
field error '"conflict"'
field constraint '"users_username_key"'
field value '["alice"]'
field owner '"u1"'
expect_exit 3 u insert users '{"id":"u2","username":"bob","email":"alice@example.com"}'
field constraint '"users_email"'
field owner '"u1"'
expect_exit 0 u insert users '{"id":"u2","username":"bob","email":"bob@example.com"}'
expect_exit 0 u lookup users users_username_key alice
field pk '"u1"'
field constraint '"users_username_key"'
field value '["alice"]'
field version 1
field record.email '"alice@example.com"'
expect_exit 0 u lookup users users_username_key ALICE
field pk '"u1"'
expect_exit 0 u lookup users users_username_key bob
field pk '"u2"'
expect_exit 2 u lookup users users_username_key carol
field error '"not_found"'
expect_exit 0 u check
field ok true
field records 2

scenario "an email equal to a phone number does not collide" email_phone
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u insert users '{"id":"u1","email":"5550100"}'
expect_exit 0 u insert users '{"id":"u2","phone":"5550100"}'
expect_exit 0 u insert users '{"id":"u3","username":"5550100"}'
expect_exit 0 u lookup users users_email 5550100
field pk '"u1"'
expect_exit 0 u lookup users users_phone_key 5550100
field pk '"u2"'
expect_exit 0 u lookup users users_username_key 5550100
field pk '"u3"'

scenario "(a#b, c) and (a, b#c) do not collide" composite
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u insert links '{"id":"l1","a":"a#b","b":"c"}'
expect_exit 0 u insert links '{"id":"l2","a":"a","b":"b#c"}'
expect_exit 0 u lookup links links_a_b_key 'a#b' c
field pk '"l1"'
field value '["a#b","c"]'
expect_exit 0 u lookup links links_a_b_key a 'b#c'
field pk '"l2"'
expect_exit 3 u insert links '{"id":"l3","a":"a","b":"b#c"}'
field constraint '"links_a_b_key"'
field value '["a","b#c"]'
field owner '"l2"'
expect_exit 1 u lookup links links_a_b_key a

scenario "changing an email frees the old one for others at once" email_change
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u insert users '{"id":"u1","email":"old@example.com"}'
expect_exit 0 u update users u1 '{"email":"new@example.com"}'
field pk '"u1"'
field version 2
expect_exit 0 u insert users '{"id":"u2","email":"old@example.com"}'
expect_exit 3 u insert users '{"id":"u3","email":"NEW@example.com"}'
field owner '"u1"'
field value '["new@example.com"]'
expect_exit 0 u lookup users users_email old@example.com
field pk '"u2"'
expect_exit 0 u get users u1
field record.email '"new@example.com"'
field version 2

scenario "Alice@Example.COM and alice@example.com collide under casefold" casefold
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u insert users '{"id":"u1","email":"Alice@Example.COM"}'
expect_exit 3 u insert users '{"id":"u2","email":"alice@example.com"}'
field error '"conflict"'
field code 3
field constraint '"users_email"'
field value '["alice@example.com"]'
field owner '"u1"'
err_contains "users_email"
expect_exit 0 u get users u1
field record.email '"Alice@Example.COM"'
expect_exit 2 u get users u2

scenario "a refused write leaves every value it touched free" refused
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u insert users '{"id":"u1","phone":"999"}'
expect_exit 3 u insert users '{"id":"u2","username":"newbie","email":"new@example.com","phone":"999"}'
field constraint '"users_phone_key"'
field owner '"u1"'
expect_exit 2 u get users u2
expect_exit 2 u lookup users users_username_key newbie
expect_exit 2 u lookup users users_email new@example.com
expect_exit 0 u insert users '{"id":"u3","username":"newbie","email":"new@example.com"}'
# a refused update too: u3 keeps its values and version
expect_exit 3 u update users u3 '{"username":"other","phone":"999"}'
expect_exit 0 u get users u3
field version 1
field record.username '"newbie"'
expect_exit 0 u insert users '{"id":"u4","username":"other"}'
expect_exit 0 u check
field ok true

scenario "two records without a phone do not collide" no_phone
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u insert users '{"id":"u1","email":"a@example.com"}'
expect_exit 0 u insert users '{"id":"u2","email":"b@example.com"}'
expect_exit 0 u insert users '{"id":"u3","phone":null}'
expect_exit 0 u update users u1 '{"phone":"1"}'
expect_exit 0 u update users u1 '{"phone":null}'
field version 3
expect_exit 0 u insert users '{"id":"u4","phone":"1"}'
expect_exit 0 u check
field ok true
field records 4

scenario "a login is unique across users and orgs (NAMESPACE)" namespace
NSDDL="$SCRATCH/namespace.cql"
cat > "$NSDDL" <<'DDL'
CREATE TABLE users (id text PRIMARY KEY, login text,
  CONSTRAINT users_login UNIQUE (login) NORMALIZE casefold NAMESPACE logins);
CREATE TABLE orgs (id text PRIMARY KEY, name text,
  CONSTRAINT orgs_login UNIQUE (name) NORMALIZE casefold NAMESPACE logins);
DDL
expect_exit 0 u schema apply "$NSDDL"
expect_exit 0 u insert users '{"id":"u1","login":"alice"}'
expect_exit 3 u insert orgs '{"id":"o1","name":"Alice"}'
field constraint '"orgs_login"'
field owner '"u1"'
field owner_table '"users"'
err_contains "of table users"
expect_exit 0 u lookup orgs orgs_login ALICE
field table '"users"'
field pk '"u1"'
expect_exit 0 u delete users u1
expect_exit 0 u insert orgs '{"id":"o1","name":"Alice"}'
expect_exit 3 u insert users '{"id":"u1","login":"alice"}'
field owner_table '"orgs"'
expect_exit 0 u check
field ok true
cat > "$NSDDL" <<'DDL'
CREATE TABLE users (id text PRIMARY KEY, login text,
  CONSTRAINT users_login UNIQUE (login) NORMALIZE casefold NAMESPACE logins);
CREATE TABLE orgs (id text PRIMARY KEY, name text,
  CONSTRAINT orgs_login UNIQUE (name) NAMESPACE logins);
DDL
expect_exit 1 u schema apply "$NSDDL"
field error '"invalid"'
err_contains "orgs.orgs_login disagrees with users.users_login (line 2, column 70): NORMALIZE exact against NORMALIZE casefold"

# ------------------------------------------------------------- contract

scenario "help" help
expect_text 0 "$UNICO" --help
out_contains "usage:"
expect_text 0 "$UNICO" -h
out_contains "usage:"
for cmd in schema insert update delete get lookup check; do
  expect_text 0 "$UNICO" "$cmd" --help
  out_contains "usage: unico $cmd"
done
expect_text 0 "$UNICO" --version
out_contains "unico "

scenario "usage errors: exit 1, JSON on stdout, a sentence on stderr" usage
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u insert users '{"id":"u1"}'
expect_exit 1 u frobnicate
field error '"usage"'
out_contains "frobnicate"
# no command at all is a usage error like any other
expect_exit 1 "$UNICO" --store "$STORE"
for args in "get" "get users" "insert users" "update users u1" "delete users" \
            "lookup users users_email" "schema" "schema apply" "schema drop" \
            "check extra"; do
  # shellcheck disable=SC2086
  expect_exit 1 u $args
  field error '"usage"'
done
for v in abc 00 -1 1.5 '' ' 1' '1 ' '+1' ' -1' 0x1 18446744073709551615; do
  expect_exit 1 u update users u1 '{}' --if-version "$v"
  field error '"usage"'
  out_contains "if-version"
done
expect_exit 1 u delete users u1 --if-version=x
expect_exit 1 u get users u1 --bogus
field error '"usage"'
out_contains "--bogus"
expect_exit 1 u --bogus get users u1
expect_exit 1 u get users u1 --op-id x
out_contains "insert, update, delete and reserve only"
expect_exit 1 u get users u1 --if-version 1
expect_exit 1 u insert users '{"id":"u9"}' --op-id
expect_exit 2 u get users u9
# an option that takes one value, given twice, is refused naming it (not
# the last one silently taken); nothing is written
expect_exit 1 u insert users '{"id":"u9"}' --op-id a --op-id b
field error '"usage"'
out_contains "option --op-id is given more than once"
expect_exit 1 u insert users '{"id":"u9"}' --op-id=a --op-id=a
out_contains "--op-id"
expect_exit 2 u get users u9
expect_exit 1 "$UNICO" --store "$STORE" --store "lmdb:$SCRATCH/elsewhere" get users u1
out_contains "option --store is given more than once"
check_true "two --store: no store opened" test ! -e "$SCRATCH/elsewhere"
expect_exit 1 u update users u1 '{"phone":"1"}' --if-version 1 --if-version=2
out_contains "--if-version"
expect_exit 1 u reserve users users_email x@example.com --ttl 60 --ttl 120
out_contains "--ttl"
expect_exit 1 u import users "$DDL" --threads 2 --threads=3
out_contains "--threads"
expect_exit 1 u import users "$DDL" --report "$SCRATCH/r1" --report "$SCRATCH/r2"
out_contains "--report"
# an argument too many is named as such
expect_exit 1 u insert users '{"id":"u9"}' extra
field error '"usage"'
err_contains 'unexpected extra argument "extra"'
err_lacks "needs TABLE and JSON"
expect_exit 1 u schema show --ddl more
err_contains 'unexpected extra argument "more"'
expect_exit 1 u release-hold uh_1 uh_2
err_contains 'unexpected extra argument "uh_2"'
# bad input from the library: exit 1 with the library's error name
expect_exit 1 u insert nosuchtable '{"id":"u1"}'
field error '"invalid"'
expect_exit 1 u get items abc
field error '"invalid"'
field column '"id"'
expect_exit 1 u lookup users nosuchconstraint x
expect_exit 1 u insert users '{"id":"u2","nosuchcolumn":1}'
field column '"nosuchcolumn"'
expect_exit 1 u update users u1 '{"id":"u7"}'
field column '"id"'
expect_exit 1 u schema apply "$SCRATCH/does-not-exist.cql"

scenario "not found, version mismatch" exits
expect_exit 0 u schema apply "$DDL"
expect_exit 2 u get users nobody
field error '"not_found"'
expect_exit 2 u update users nobody '{"phone":"1"}'
expect_exit 2 u delete users nobody
expect_exit 0 u insert users '{"id":"u1","phone":"1"}'
expect_exit 0 u update users u1 '{"phone":"2"}' --if-version 1
field version 2
expect_exit 5 u update users u1 '{"phone":"3"}' --if-version 1
field error '"version_mismatch"'
field current_version 2
expect_exit 5 u delete users u1 --if-version 7
field current_version 2
# (version 0 is a version: an adopted record's, docs/native-tables.md)
expect_exit 5 u update users u1 '{"phone":"3"}' --if-version 0
field current_version 2
expect_exit 0 u get users u1
field version 2
field record.phone '"2"'
expect_exit 0 u delete users u1 --if-version 2
field version 2
expect_exit 2 u get users u1
expect_exit 0 u schema show
field schema_version 1

scenario "standard input: insert - and schema apply -" stdin
STDIN=$(cat "$DDL")$'\n'
expect_exit 0 u schema apply -
field changed true
STDIN=$(cat "$DDL")$'\n'
expect_exit 0 u schema apply -
field changed false
STDIN='{"id":"u1","email":"in@example.com"}'
expect_exit 0 u insert users -
field pk '"u1"'
STDIN='{"phone":"42"}'
expect_exit 0 u update users u1 -
field version 2
expect_exit 0 u get users u1
field record '{"id":"u1","email":"in@example.com","phone":"42"}'
STDIN=''
expect_exit 1 u insert users -

scenario "schema show and show --ddl print the DDL back" show
expect_exit 2 u schema show
field error '"not_found"'
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u schema show
field schema_version 1
field_file ddl "$DDL"
expect_text 0 u schema show --ddl
check_true "schema show --ddl prints the applied DDL" cmp -s "$OUT" "$DDL"
cp "$OUT" "$SCRATCH/shown.cql"
expect_exit 0 u schema apply "$SCRATCH/shown.cql"
field changed false
expect_exit 1 u get users u1 --ddl
# --ddl is schema show's only: apply refuses it, and applies nothing
expect_exit 1 u schema apply "$SCRATCH/shown.cql" --ddl
out_contains "schema show only"

scenario "malformed JSON and DDL errors" bad_input
expect_exit 0 u schema apply "$DDL"
expect_exit 1 u insert users '{"id":"u1",'
field error '"invalid"'
out_contains "JSON"
expect_exit 1 u insert users '["u1"]'
field error '"invalid"'
out_contains "object"
expect_exit 1 u update users u1 'nope'
expect_exit 2 u get users u1
printf 'CREATE TABLE t (\n  id text PRIMARY KEY,\n  x texx\n);\n' >"$SCRATCH/bad.cql"
expect_exit 1 u schema apply "$SCRATCH/bad.cql"
field error '"invalid"'
message_has_location 3 5
err_contains "texx"
printf 'CREATE TABLE t (id text PRIMARY KEY, LIMIT 0 PER (id));\n' >"$SCRATCH/limit.cql"
expect_exit 1 u schema apply "$SCRATCH/limit.cql"
field error '"invalid"'
err_contains "LIMIT must be between"
expect_exit 0 u schema show
field schema_version 1

scenario "composite and int primary keys take one argument per column" pk_args
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u insert votes '{"poll_id":"p1","voter":"v1","choice":"x"}'
field pk '["p1","v1"]'
expect_exit 0 u insert votes '{"poll_id":"p1","voter":"v2","choice":"x"}'
expect_exit 0 u get votes p1 v1
field pk '["p1","v1"]'
field record.choice '"x"'
expect_exit 1 u get votes p1
expect_exit 1 u get votes p1 v1 extra
expect_exit 0 u update votes p1 v1 '{"choice":"y"}'
field pk '["p1","v1"]'
field version 2
expect_exit 0 u get votes p1 v1
field record.choice '"y"'
expect_exit 0 u delete votes p1 v1 --if-version 2
field version 2
expect_exit 2 u get votes p1 v1
expect_exit 0 u get votes p1 v2
field version 1
expect_exit 0 u insert items '{"id":42,"name":"answer"}'
field pk 42
expect_exit 0 u insert items '{"id":-5,"name":"negative"}'
expect_exit 0 u get items 42
field pk 42
expect_exit 0 u get items -5
field record.name '"negative"'
expect_exit 0 u update items 42 '{"name":"still"}'
field version 2
expect_exit 0 u delete items -5
expect_exit 2 u get items -5

scenario "--op-id: a repeated write returns the identical output, applied once" op_id
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u insert users '{"id":"u1","email":"a@example.com"}' --op-id signup-1
first=$(cat "$OUT")
expect_exit 0 u insert users '{"id":"u1","email":"a@example.com"}' --op-id signup-1
check_true "repeated insert prints the identical stdout" [ "$(cat "$OUT")" = "$first" ]
expect_exit 0 u update users u1 '{"phone":"7"}' --op-id change-1
field version 2
first=$(cat "$OUT")
expect_exit 0 u update users u1 '{"phone":"7"}' --op-id=change-1
check_true "repeated update prints the identical stdout" [ "$(cat "$OUT")" = "$first" ]
expect_exit 0 u get users u1
field version 2
expect_exit 1 u update users u1 '{"phone":"8"}' --op-id change-1
field error '"op_id_reused"'
expect_exit 1 u insert users '{"id":"u2"}' --op-id signup-1
field error '"op_id_reused"'
expect_exit 2 u get users u2
# a refused write leaves no outcome: retried with the same id, it executes
expect_exit 3 u insert users '{"id":"u3","email":"a@example.com"}' --op-id signup-3
expect_exit 0 u delete users u1 --op-id del-1
first=$(cat "$OUT")
expect_exit 0 u delete users u1 --op-id del-1
check_true "repeated delete prints the identical stdout" [ "$(cat "$OUT")" = "$first" ]
expect_exit 0 u insert users '{"id":"u3","email":"a@example.com"}' --op-id signup-3
field pk '"u3"'

scenario "batch: a swap, all or nothing, the single write's exit codes, --op-id" batch
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u insert users '{"id":"u1","username":"alice"}'
expect_exit 0 u insert users '{"id":"u2","username":"bob"}'
SWAP=$SCRATCH/swap.json
cat >"$SWAP" <<'EOF'
[{"op":"update","table":"users","key":"u1","patch":{"username":"bob"},"if_version":1},
 {"op":"update","table":"users","key":"u2","patch":{"username":"alice"}}]
EOF
expect_exit 0 u batch "$SWAP" --op-id swap-1
field results '[{"pk":"u1","version":2},{"pk":"u2","version":2}]'
first=$(cat "$OUT")
expect_exit 0 u batch "$SWAP" --op-id swap-1
check_true "a repeated batch prints the identical stdout" [ "$(cat "$OUT")" = "$first" ]
expect_exit 0 u lookup users users_username_key ALICE
field pk '"u2"'
expect_exit 5 u batch "$SWAP"
field report.index 0
field current_version 2
STDIN='[{"op":"insert","table":"users","record":{"id":"u3","email":"c@x.org"}},
{"op":"update","table":"users","key":"u1","patch":{"username":"Alice"}}]'
expect_exit 3 u batch -
field report '{"index":1,"op":"update","table":"users"}'
field owner '"u2"'
err_contains "op 1: "
expect_exit 2 u get users u3
STDIN='[{"op":"delete","table":"users","key":"u9"}]'
expect_exit 2 u batch -
STDIN='[{"op":"insert","table":"users","record":{"id":"u4"}},{"op":"insert","table":"users","record":{"id":"u4"}}]'
expect_exit 1 u batch -
out_contains "at most once"
STDIN='[{"op":"update","table":"users","key":"u1"}]'
expect_exit 1 u batch -
out_contains 'batch op 0: op update needs \"patch\"'
STDIN='[{"op":"insert",'
expect_exit 1 u batch -
out_contains "not valid JSON"
expect_exit 1 u batch
expect_exit 2 u get users u4

scenario "UNICO_STORE is used when --store is absent" env_store
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u insert users '{"id":"u1"}'
expect_exit 0 env UNICO_STORE="$STORE" "$UNICO" get users u1
field pk '"u1"'
expect_exit 0 env UNICO_STORE="$STORE" "$UNICO" insert users '{"id":"u2"}'
expect_exit 0 u get users u2
# --store wins over the environment
expect_exit 2 env UNICO_STORE="lmdb:$SCRATCH/env_other" "$UNICO" --store "$STORE" get users u3
expect_exit 0 env UNICO_STORE="lmdb:$SCRATCH/env_other" "$UNICO" --store "$STORE" get users u1
expect_exit 2 env UNICO_STORE="lmdb:$SCRATCH/env_other" "$UNICO" schema show

scenario "a store that cannot be created: exit 7" unavailable
echo "not a directory" >"$SCRATCH/regular-file"
expect_exit 7 "$UNICO" --store "lmdb:$SCRATCH/regular-file/store" get users u1
field error '"unavailable"'
expect_exit 7 "$UNICO" --store "lmdb:$SCRATCH/regular-file/store" schema apply "$DDL"
expect_exit 1 "$UNICO" --store "lmdb:$SCRATCH/opts?sync=sometimes" check
expect_exit 1 "$UNICO" --store "nosuchstore://host/x" check
field error '"unsupported"'

scenario "an empty --store is a usage error, not the default store" empty_store
mkdir -p "$SCRATCH/empty_store_cwd"
in_dir() { local d=$1; shift; (cd "$d" && "$@"); }
expect_exit 1 in_dir "$SCRATCH/empty_store_cwd" "$UNICO" --store '' get users u1
field error '"usage"'
out_contains "--store"
expect_exit 1 in_dir "$SCRATCH/empty_store_cwd" "$UNICO" --store= schema show
check_true "an empty --store creates no ./unico-data" \
  test ! -e "$SCRATCH/empty_store_cwd/unico-data"
# serve too, either side of the command word
expect_exit 1 in_dir "$SCRATCH/empty_store_cwd" "$UNICO" serve --store '' --listen 127.0.0.1:0
out_contains "--store needs a store URL"
expect_exit 1 in_dir "$SCRATCH/empty_store_cwd" "$UNICO" --store '' serve --listen 127.0.0.1:0
out_contains "--store needs a store URL"
check_true "serve with an empty --store creates no ./unico-data" \
  test ! -e "$SCRATCH/empty_store_cwd/unico-data"

scenario "a NUL byte in a schema file or standard input is refused, nothing written" nul
printf 'CREATE TABLE users (id text PRIMARY KEY, username text, UNIQUE (username));\n' >"$SCRATCH/nul1.cql"
printf 'CREATE TABLE users (id text PRIMARY KEY, username text, UNIQUE (username));\n\0CREATE TABLE t (id text PRIMARY KEY);\n' >"$SCRATCH/nul2.cql"
tr -d '\000' <"$SCRATCH/nul2.cql" >"$SCRATCH/nul2-clean.cql"
# before any schema: the store is not even created
expect_exit 1 u schema apply "$SCRATCH/nul2.cql"
field error '"invalid"'
out_contains "$SCRATCH/nul2.cql contains a NUL byte at byte offset 76"
err_contains "byte offset 76"
check_true "a refused schema file creates no store" test ! -e "$SCRATCH/nul"
expect_exit 0 u schema apply "$SCRATCH/nul2-clean.cql"
field tables '["users","t"]'
# with the table t there, the text cut at the NUL would drop it
expect_exit 1 u schema apply "$SCRATCH/nul2.cql"
out_contains "byte offset 76"
STDIN_FILE=$SCRATCH/nul2.cql
expect_exit 1 u schema apply -
out_contains "standard input contains a NUL byte at byte offset 76"
expect_exit 0 u insert t '{"id":"t1"}'
printf '{"id":"z3"}\0garbage' >"$SCRATCH/nul-insert.json"
STDIN_FILE=$SCRATCH/nul-insert.json
expect_exit 1 u insert t -
field error '"invalid"'
out_contains "standard input contains a NUL byte at byte offset 11"
expect_exit 2 u get t z3
expect_exit 0 u insert users '{"id":"r1","username":"kept"}'
printf '{"username":"changed"}\0{"junk":' >"$SCRATCH/nul-update.json"
STDIN_FILE=$SCRATCH/nul-update.json
expect_exit 1 u update users r1 -
out_contains "byte offset 22"
expect_exit 0 u get users r1
field version 1
field record.username '"kept"'
# unico serve --schema reads its file the same way: refused, not served
expect_exit 1 "$UNICO" serve --store "lmdb:$SCRATCH/nul-serve" --listen 127.0.0.1:0 --schema "$SCRATCH/nul2.cql"
field error '"invalid"'
out_contains "$SCRATCH/nul2.cql contains a NUL byte at byte offset 76"
check_true "serve with a refused schema file creates no store" test ! -e "$SCRATCH/nul-serve"
# a NUL-free record from standard input still works
printf '{"username":"changed"}' >"$SCRATCH/ok-update.json"
STDIN_FILE=$SCRATCH/ok-update.json
expect_exit 0 u update users r1 -
field version 2

if command -v flock >/dev/null 2>&1; then
scenario "a store owned by another process: busy, and stderr says so" owned
expect_exit 0 u schema apply "$DDL"
# hold the store's lock as a log-mode owner (unico serve) does
flock -x "$SCRATCH/owned/unico.lock" sleep 30 &
FLOCK_PID=$!
for _ in $(seq 100); do
  flock -n -s "$SCRATCH/owned/unico.lock" true || break
  sleep 0.05
done
expect_exit 6 u get users u1
field error '"busy"'
err_contains "unico: store in use by another process: "
err_lacks "value held by an operation in flight"
kill "$FLOCK_PID" 2>/dev/null
wait "$FLOCK_PID" 2>/dev/null
fi

scenario "a long default constraint name comes back whole, and a lookup by it works" long_names
# six columns of 48-byte names (the most a name may have): the default
# name of their UNIQUE is 301 bytes
X44=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
LCOLS="" LREC='{"id":"l1"' LNAME=lng
for i in 0 1 2 3 4 5; do
  LCOLS="$LCOLS${LCOLS:+, }c0${i}_$X44"
  LREC="$LREC,\"c0${i}_$X44\":\"v\""
  LNAME="${LNAME}_c0${i}_$X44"
done
LNAME=${LNAME}_key
printf 'CREATE TABLE lng (id text PRIMARY KEY, %s text, %s text, %s text, %s text, %s text, %s text, UNIQUE (%s));\n' \
  $(echo "$LCOLS" | tr -d ,) "$LCOLS" >"$SCRATCH/long.cql"
expect_exit 0 u schema apply "$SCRATCH/long.cql"
expect_exit 0 u insert lng "$LREC}"
expect_exit 3 u insert lng "$(printf '%s' "$LREC" | sed 's/"l1"/"l2"/')}"
field constraint "\"$LNAME\""
expect_exit 0 u lookup lng "$LNAME" v v v v v v
field pk '"l1"'
field constraint "\"$LNAME\""
printf '%s}\n' "$(printf '%s' "$LREC" | sed 's/"l1"/"l3"/')" >"$SCRATCH/long.jsonl"
expect_text 3 u import lng "$SCRATCH/long.jsonl" --progress none
out_contains "\"constraint\":\"$LNAME\""

scenario "check on a healthy store" check
expect_exit 0 u check
field ok true
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u insert users '{"id":"u1","email":"a@example.com","username":"a","phone":"1"}'
expect_exit 0 u insert links '{"id":"l1","a":"x","b":"y"}'
expect_exit 0 u check
field ok true
field records 2
field claims 4
field violations_total 0

scenario "sign-up with a hold: reserve, others busy, the token takes it, release" holds
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u reserve users users_email Ann@Example.com --ttl 600
field value '["ann@example.com"]'
TOKEN=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["token"])' "$OUT")
expect_exit 6 u insert users '{"id":"x","email":"ann@example.com"}'
field error '"busy"'
field constraint '"users_email"'
# a hold is no operation in flight: stderr says busy, then what holds it
err_contains 'unico: busy: users.(email) = ("ann@example.com") is reserved by a hold'
err_lacks "in flight"
expect_exit 6 u reserve users users_email ann@example.com --ttl 600
expect_exit 6 u insert users '{"id":"x","email":"ann@example.com"}' --hold uh_wrong
expect_exit 0 u insert users '{"id":"ann","email":"ANN@example.com"}' --hold "$TOKEN"
expect_exit 0 u lookup users users_email ann@example.com
field pk '"ann"'
expect_exit 2 u release-hold "$TOKEN"
expect_exit 3 u reserve users users_email ann@example.com --ttl 60
field owner '"ann"'
expect_exit 0 u reserve users users_username_key bob --ttl 600
TOKEN=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["token"])' "$OUT")
expect_exit 0 u release-hold "$TOKEN"
field released true
expect_exit 0 u insert users '{"id":"b","username":"bob"}'
expect_exit 1 u reserve users users_username_key carl
expect_exit 1 u reserve users users_username_key carl --ttl 0
expect_exit 1 u get users ann --hold x
expect_exit 0 u repair
field orphan_claims_removed 0
expect_exit 0 u check
field holds 0

# (mdb_dump and mdb_load come with lmdb-utils, which scripts/deps.sh
# installs: without them this is a failure, not a skip)
if ! command -v mdb_dump >/dev/null 2>&1 || ! command -v mdb_load >/dev/null 2>&1; then
  FAIL=$((FAIL + 1))
  echo "FAIL: mdb_dump and mdb_load (Debian's lmdb-utils) are missing: the repair scenario cannot damage a store by hand"
else
scenario "repair fixes a counter and a stale claim damaged by hand, and exits 7 on what it cannot fix" repair
# damage WHAT: the store's LMDB data dumped (mdb_dump, in hex: its -p form
# leaves a backslash byte unescaped, which mdb_load then misreads, and
# values begin with random versions), edited as bytes, loaded back; WHAT:
# "counter" sets group (p, a)'s counter to 0, "stale" makes s1 list a
# claim of a name it does not have, "invalid" gives s1 an int option
damage() {
  mdb_dump "$SCRATCH/repair" >"$SCRATCH/repair.dump" &&
    python3 - "$SCRATCH/repair.dump" "$@" <<'PY' &&
import sys
path, what = sys.argv[1], sys.argv[2:]
lines = open(path).read().split("\n")
header = lines.index("HEADER=END") + 1
GROUP = b"\x11l\x00\x11subs\x00\x11per_option\x00\x11p\x00\x11a\x00"
S1 = b"\x11r\x00\x11subs\x00\x11s1\x00"
done = set()
for i in range(header, len(lines) - 1, 2):
    if not lines[i].startswith(" ") or not lines[i + 1].startswith(" "):
        break  # (DATA=END)
    k, v = bytes.fromhex(lines[i][1:]), bytes.fromhex(lines[i + 1][1:])
    if "counter" in what and k == GROUP:
        v = v[:-1] + b"\x00"  # the count's last byte: 1 -> 0
        done.add("counter")
    if k == S1:
        done.update(w for w in what if w != "counter")
        if "stale" in what:  # a third claim listed, and the count of them
            v = v.replace(b"\x80\x00\x00\x00\x00\x00\x00\x02\x10",
                          b"\x80\x00\x00\x00\x00\x00\x00\x03\x10", 1)
            v += (b"\x10\x11u\x00\xff\x11subs\x00\xff\x11subs_poll_id_name_key"
                  b"\x00\xff\x11p\x00\xff\x11zed\x00\xff\x00")
        if "invalid" in what:
            v = v.replace(b'"option":"a"', b'"option":7')
    lines[i + 1] = " " + v.hex()
if done != set(what):
    sys.exit("damage: not found: %s" % ", ".join(sorted(set(what) - done)))
open(path, "w").write("\n".join(lines))
PY
    mdb_load -f "$SCRATCH/repair.dump" "$SCRATCH/repair" 2>/dev/null
}
printf 'CREATE TABLE subs (id text PRIMARY KEY, poll_id text, name text, option text,\n  UNIQUE (poll_id, name) NORMALIZE casefold,\n  CONSTRAINT per_option LIMIT 1 PER (poll_id, option));\n' >"$SCRATCH/repair.cql"
expect_exit 0 u schema apply "$SCRATCH/repair.cql"
expect_exit 0 u insert subs '{"id":"s1","poll_id":"p","name":"Ann","option":"a"}'
check_true "repair: the store damaged by hand" damage counter stale
expect_exit 7 u check
field report.violations_total 2
out_contains '"kind":"group_count_mismatch"'
out_contains '"kind":"stale_claim"'
expect_exit 0 u repair
field group_counts_fixed 1
field stale_claims_removed 1
field after.ok true
field before.violations_total 2
expect_exit 0 u check
# the counter counts s1 again: the group is full; the stale name is free
expect_exit 4 u insert subs '{"id":"s2","poll_id":"p","name":"Bob","option":"a"}'
expect_exit 0 u insert subs '{"id":"s3","poll_id":"p","name":"zed","option":"b"}'
# a record that does not fit its table is a person's to decide: repair
# says it is left, exit 7 as check, with its report
check_true "repair: s1 damaged by hand" damage invalid
expect_exit 7 u repair
field error '"corrupt"'
field report.after.ok false
field report.after.violations.0.kind '"invalid_record"'
out_contains "cannot fix"
err_contains "cannot fix"
fi

scenario "a count limit: exit 4 names the limit and the group" limits
printf 'CREATE TABLE subs (id text PRIMARY KEY, poll_id text, name text, option text,\n  UNIQUE (poll_id, name) NORMALIZE casefold,\n  CONSTRAINT per_option LIMIT 1 PER (poll_id, option));\n' >"$SCRATCH/poll.cql"
expect_exit 0 u schema apply "$SCRATCH/poll.cql"
expect_exit 0 u insert subs '{"id":"s1","poll_id":"p","name":"Ann","option":"a"}'
expect_exit 4 u insert subs '{"id":"s2","poll_id":"p","name":"Bob","option":"a"}'
field error '"limit"'
field constraint '"per_option"'
field value '["p","a"]'
expect_exit 0 u insert subs '{"id":"s2","poll_id":"p","name":"Bob","option":"b"}'
expect_exit 4 u update subs s2 '{"option":"a"}'
expect_exit 0 u get subs s2
field record.option '"b"'
expect_exit 0 u delete subs s1
expect_exit 0 u update subs s2 '{"option":"a"}'
expect_exit 0 u check
field limit_groups 1

scenario "import: duplicates in the file and of existing records are reported, nothing else is lost" import
expect_exit 0 u schema apply "$DDL"
expect_exit 0 u insert users '{"id":"u1","email":"taken@example.com"}'
IMPORT=$SCRATCH/import.jsonl
cat >"$IMPORT" <<'EOF'
{"id":"i1","email":"Ann@Example.com","phone":"1"}
{"id":"i2","email":"ann@example.COM","phone":"2"}

{"id":"i3","email":"TAKEN@example.com"}
{"id":"i4","email":"d@example.com","phone":"1"}
{"id":"i5","email":"e@example.com"}
{"id":"i1","email":"f@example.com"}
not json
{"id":"i6","email":"ANN@example.com"}
EOF
expect_exit 1 u import users "$IMPORT" --report "$SCRATCH/import.report"
field read 8
field inserted 2
field duplicates 5
field invalid 1
field not_attempted 0
field aborted false
field error '"invalid"'
run cat "$SCRATCH/import.report"
out_contains '{"kind":"duplicate","constraint":"users_email","value":["ann@example.com"],"owner":"i1","owner_line":1,"duplicates":[{"line":2,"pk":"i2"},{"line":9,"pk":"i6"}]}'
out_contains '{"kind":"duplicate","constraint":"users_email","value":["taken@example.com"],"owner":"u1","owner_line":null,"duplicates":[{"line":4,"pk":"i3"}]}'
out_contains '{"kind":"duplicate","constraint":"users_phone_key","value":["1"],"owner":"i1","owner_line":1,"duplicates":[{"line":5,"pk":"i4"}]}'
out_contains '{"kind":"duplicate","constraint":"PRIMARY KEY","value":["i1"],"owner":"i1","owner_line":1,"duplicates":[{"line":7,"pk":"i1"}]}'
out_contains '{"kind":"invalid","line":8,"pk":null,'
check_true "the report has 5 lines" [ "$(wc -l <"$SCRATCH/import.report")" -eq 5 ]
expect_exit 0 u get users i1
field record.email '"Ann@Example.com"'
expect_exit 0 u get users i5
expect_exit 2 u get users i2
expect_exit 0 u check
field records 3
# the duplicates alone: exit 3; --on-conflict abort from standard input
# (one thread, so no record after the refused one is already in flight)
printf '{"id":"i7","email":"g@example.com"}\n{"id":"i8","email":"E@example.com"}\n{"id":"i9","email":"h@example.com"}\n' >"$IMPORT"
STDIN=$(cat "$IMPORT")
expect_exit 3 u import users - --on-conflict abort --threads 1 --report "$SCRATCH/import.report"
field aborted true
field aborted_line 2
field inserted 1
field duplicates 1
field not_attempted 1
field error '"conflict"'
expect_exit 0 u get users i7
expect_exit 2 u get users i9
expect_exit 1 u import users "$SCRATCH/no-such.jsonl"
field error '"usage"'
expect_exit 1 u import users "$IMPORT" --on-conflict sometimes
expect_exit 1 u import users
expect_exit 1 u get users i7 --report x

scenario "import: a record at a limit or held by a reservation is refused alone" import_limit
printf 'CREATE TABLE subs (id text PRIMARY KEY, poll_id text, name text, option text,\n  UNIQUE (name),\n  CONSTRAINT per_option LIMIT 1 PER (poll_id, option));\n' >"$SCRATCH/poll.cql"
expect_exit 0 u schema apply "$SCRATCH/poll.cql"
expect_exit 0 u reserve subs subs_name_key held --ttl 600
printf '{"id":"s1","poll_id":"p","name":"a","option":"x"}\n{"id":"s2","poll_id":"p","name":"b","option":"x"}\n{"id":"s3","poll_id":"p","name":"held","option":"y"}\n{"id":"s4","poll_id":"p","name":"c","option":"z"}\n' >"$SCRATCH/subs.jsonl"
expect_exit 4 u import subs "$SCRATCH/subs.jsonl" --report "$SCRATCH/subs.report" --threads 1
field inserted 2
field limit 1
field busy 1
field error '"limit"'
run cat "$SCRATCH/subs.report"
out_contains '{"kind":"limit","line":2,"pk":"s2",'
out_contains '"constraint":"per_option","value":["p","x"]'
out_contains '{"kind":"busy","line":3,"pk":"s3",'
expect_exit 0 u check
field records 2

scenario "a full store: store_full before the answer in both modes, deletes still work, the advice works" full
python3 -c '
for i in range(3000): print("{\"id\":%d,\"name\":\"%s\"}" % (i, "n" * 600))' >"$SCRATCH/full.jsonl"
BIG=$(printf '%03000d' 0)
for mode in plain log; do
  opts="map_size=1MiB&max_map_size=1MiB"
  [ $mode = log ] && opts="wal=on&$opts"
  STORE="lmdb:$SCRATCH/full-$mode?$opts"
  expect_exit 0 u schema apply "$DDL"
  expect_exit 7 u import items "$SCRATCH/full.jsonl" --threads 1 --report "$SCRATCH/full-$mode.report"
  field error '"store_full"'
  out_contains "reopen it as lmdb:$SCRATCH/full-$mode?$(echo "$opts" | sed 's/max_map_size=1MiB/max_map_size=2MiB/')"
  ADVICE=$(sed -n 's/.*reopen it as \(lmdb:[^"]*\)".*/\1/p' "$OUT" | head -1)
  # what was acknowledged fits: the same URL opens (log mode replays it)
  expect_exit 0 u check
  field ok true
  # a refused write leaves nothing behind
  id=100000
  while [ $id -lt 100050 ]; do
    run u insert items "{\"id\":$id,\"name\":\"$BIG\"}"
    [ $CODE -eq 0 ] || break
    id=$((id + 1))
  done
  check_true "inserts on a full store end with store_full (exit $CODE)" [ $CODE -eq 7 ]
  expect_exit 2 u get items $id
  # deletes work on a full store, and free space for inserts
  for i in 0 1 2 3; do expect_exit 0 u delete items $i --op-id "del-$mode-$i"; done
  for i in $(seq 4 20); do run u delete items $i; [ $CODE -eq 0 ] || break; done
  check_true "17 more deletes on a full store (exit $CODE)" [ $CODE -eq 0 ]
  expect_exit 0 u insert items '{"id":200000,"name":"fits again"}'
  # the advice works as written, and max_map_size alone is enough
  expect_exit 0 "$UNICO" --store "$ADVICE" insert items '{"id":200001,"name":"x"}'
  expect_exit 0 "$UNICO" --store "lmdb:$SCRATCH/full-$mode?max_map_size=4MiB" get items 200001
done

scenario "retyping a column: exit 1 naming the column and a live record, allowed once none is live" retype
RT1=$SCRATCH/retype-1.cql
RT2=$SCRATCH/retype-2.cql
echo 'CREATE TABLE rt (id text PRIMARY KEY, code text, n int, UNIQUE (code));' >"$RT1"
echo 'CREATE TABLE rt (id text PRIMARY KEY, code text, n text, UNIQUE (code));' >"$RT2"
expect_exit 0 u schema apply "$RT1"
expect_exit 0 u insert rt '{"id":"r1","code":"a","n":1}'
expect_exit 1 u schema apply "$RT2"
field error '"schema_refused"'
err_contains 'column "n" changes type from int to text'
err_contains 'record "r1" is live'
expect_exit 0 u schema show
field schema_version 1
expect_exit 0 u delete rt r1
expect_exit 0 u schema apply "$RT2"
field schema_version 2
expect_exit 0 u insert rt '{"id":"r2","code":"a","n":"seven"}'
expect_exit 1 u insert rt '{"id":"r3","code":"b","n":7}'
field column '"n"'

# ------------------------------------------------------------- summary

[ -n "${PY[1]:-}" ] && eval "exec ${PY[1]}>&-"
wait "${PY_PID:-}" 2>/dev/null
rm -f "$OUT" "$ERR"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
