#!/bin/sh
# import_test.sh - `unico import` through the binary: a JSONL file with
# duplicates inside it (case variants, a triple across batches, a primary
# key twice), duplicates of existing records, invalid and blank lines. The
# report must list exactly the expected duplicates, grouped by constraint and
# value with their lines, primary keys and owners; every other valid record
# must be inserted; the summary counts and the exit code must be exact; the
# report must not depend on batch size, threads, standard input or the
# store's mode; --on-conflict abort must stop at the first refused record
# with every record before it inserted.
# Usage: sh import_test.sh /path/to/unico SCRATCHDIR
set -u

if [ $# -ne 2 ]; then
  echo "usage: sh import_test.sh /path/to/unico SCRATCHDIR" >&2
  exit 2
fi
UNICO=$1
DIR=$2
case $DIR in /*) ;; *) DIR=$PWD/$DIR ;; esac
rm -rf "$DIR"
mkdir -p "$DIR" || exit 2
unset UNICO_STORE
PASS=0
FAIL=0

pass() { PASS=$((PASS + 1)); }
fail() {
  FAIL=$((FAIL + 1))
  echo "FAIL: $*"
}
# check WHAT CMD...: a shell condition.
check() {
  what=$1
  shift
  if "$@"; then pass; else fail "$what"; fi
}
# pycheck WHAT ARGS...: the python checker (below) prints its problems and
# then "checked"; a checker that printed nothing did not run (python3
# missing or dead), which fails too.
pycheck() {
  what=$1
  shift
  problems=$(python3 "$DIR/t.py" "$@" 2>&1)
  if [ "$problems" = checked ]; then pass; else
    fail "$what"
    printf '%s\n' "${problems:-the checker (python3) printed nothing}" | grep -v '^checked$' | head -40
  fi
}

cat >"$DIR/schema.cql" <<'EOF'
CREATE TABLE users (
  id       text PRIMARY KEY,
  username text,
  email    text,
  phone    text,
  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,
  UNIQUE (phone)
);
EOF

# The data and what an import of it must do, computed by a simple model:
# lines in order, the first holder of a value (or primary key) wins.
cat >"$DIR/t.py" <<'EOF'
import json, os, sys

D = os.path.dirname(os.path.abspath(__file__))
N = 3000
EXISTING = [{"id": "e1", "email": "Existing@Example.com", "phone": "999"},
            {"id": "e2", "email": "second@example.com", "phone": "998"}]

def record(line):
    return {"id": "r%d" % line, "username": "name%d" % line,
            "email": "user%d@example.com" % line, "phone": "+1-555-%06d" % line}

def lines():
    ls = {n: json.dumps(record(n)) for n in range(1, N + 1)}
    def put(n, **kw):
        r = record(n)
        r.update(kw)
        ls[n] = json.dumps(r)
    put(20, email="Pair@Example.com")            # a pair in one batch,
    put(25, email="pair@EXAMPLE.com")            # case differs
    for n in (30, 800, 2500):                    # a triple across batches
        put(n, phone="+1-555-TRIPLE")
    put(40, id="dup-pk")                         # a primary key twice
    put(41, id="dup-pk")
    put(50, email="EXISTING@example.com")        # an existing record's email
    put(1500, phone="998")                       # an existing record's phone
    put(60, phone="999")                         # refused (phone of e1)...
    put(61, email="USER60@example.com")          # ...so its email is free
    ls[70] = '{"id":"r70","email":'              # bad JSON
    ls[71] = json.dumps({"id": "r71", "email": 5})   # wrong type
    ls[72] = json.dumps({"id": "r72", "age": 3})     # unknown column
    for n in (5, 6, 499, 500, 501, 2999):         # blank lines
        ls[n] = "" if n % 2 else "   \t"
    put(1200, email="Mixed@Example.com")          # a pair 1 apart
    put(1201, email="mixed@example.com")
    return [ls[n] for n in range(1, N + 1)]

def model():
    """Expected report (list), summary counts and inserted pks."""
    taken = {}  # (constraint, value) -> (owner pk, owner line or None)
    for e in EXISTING:
        taken[("PRIMARY KEY", e["id"])] = (e["id"], None)
        taken[("users_email", e["email"].lower())] = (e["id"], None)
        taken[("users_phone_key", e["phone"])] = (e["id"], None)
    groups, others, inserted = {}, [], {}
    read = 0
    for n, text in enumerate(lines(), 1):
        if not text.strip():
            continue
        read += 1
        try:
            r = json.loads(text)
        except ValueError:
            others.append({"kind": "invalid", "line": n, "pk": None})
            continue
        if not isinstance(r.get("email"), (str, type(None))):
            others.append({"kind": "invalid", "line": n, "pk": None, "column": "email"})
            continue
        if "age" in r:
            others.append({"kind": "invalid", "line": n, "pk": None, "column": "age"})
            continue
        keys = [("PRIMARY KEY", r["id"]), ("users_email", r["email"].lower()),
                ("users_phone_key", r["phone"])]
        hits = [k for k in keys if k in taken]
        assert len(hits) <= 1, "the data must collide on one key at most: line %d" % n
        if hits:
            k = hits[0]
            owner, oline = taken[k]
            g = groups.setdefault(k + (owner,), {
                "kind": "duplicate", "constraint": k[0], "value": [k[1]],
                "owner": owner, "owner_line": oline, "duplicates": []})
            g["duplicates"].append({"line": n, "pk": r["id"]})
            continue
        for k in keys:
            taken[k] = (r["id"], n)
        inserted[r["id"]] = r
    report = sorted(list(groups.values()) + others,
                    key=lambda o: o["duplicates"][0]["line"] if "duplicates" in o else o["line"])
    counts = {"read": read, "inserted": len(inserted),
              "duplicates": sum(len(g["duplicates"]) for g in groups.values()),
              "invalid": len(others), "limit": 0, "busy": 0, "errors": 0,
              "not_attempted": 0}
    return report, counts, inserted

def load_out(path, report_path=None):
    out = open(path, encoding="utf-8").read().splitlines()
    summary = json.loads(out[-1])
    rep = out[:-1] if report_path is None else open(report_path, encoding="utf-8").read().splitlines()
    return [json.loads(l) for l in rep], summary

def problems_report(got, want):
    p = []
    if len(got) != len(want):
        p.append("report has %d lines, expected %d" % (len(got), len(want)))
    for i, (g, w) in enumerate(zip(got, want)):
        if w["kind"] == "duplicate":
            if g != w:
                p.append("report line %d is %s\n   expected %s" % (i + 1, json.dumps(g), json.dumps(w)))
        else:
            g2 = {k: g.get(k) for k in w}
            if g2 != w or not g.get("message"):
                p.append("report line %d is %s\n   expected %s (and a message)" % (i + 1, json.dumps(g), json.dumps(w)))
    return p

def main():
    cmd = sys.argv[1]
    p = []
    if cmd == "gen":
        with open(os.path.join(D, "data.jsonl"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines()) + "\n")
        for i, e in enumerate(EXISTING):
            with open(os.path.join(D, "existing%d.json" % (i + 1)), "w") as f:
                f.write(json.dumps(e))
        _, _, inserted = model()
        # a sample of the inserted records, one id a line
        with open(os.path.join(D, "sample.txt"), "w") as f:
            ids = sorted(inserted)
            for pk in ids[::97] + ["r61", "dup-pk", "r20", "r30", "r1200", "r1"]:
                f.write("%s\t%s\n" % (pk, json.dumps(inserted[pk], sort_keys=True)))
        return
    if cmd == "full":  # full OUT [REPORT] EXIT: the import of data.jsonl
        out, rp, code = sys.argv[2], (sys.argv[3] if len(sys.argv) > 4 else None), int(sys.argv[-1])
        got, summary = load_out(out, rp)
        want, counts, _ = model()
        p += problems_report(got, want)
        for k, v in counts.items():
            if summary.get(k) != v:
                p.append("summary %s is %r, expected %r" % (k, summary.get(k), v))
        if summary.get("table") != "users" or summary.get("aborted") is not False:
            p.append("summary table/aborted wrong: %s" % json.dumps(summary))
        if code != 1 or summary.get("code") != 1 or summary.get("error") != "invalid":
            p.append("exit %d, summary error %r code %r: expected 1, invalid, 1 (an invalid record)"
                     % (code, summary.get("error"), summary.get("code")))
        if not isinstance(summary.get("seconds"), float) or not isinstance(summary.get("records_per_second"), int):
            p.append("summary seconds/records_per_second missing: %s" % json.dumps(summary))
    elif cmd == "records":  # records CHECKOUT: check counts the records
        c = json.load(open(sys.argv[2]))
        _, counts, _ = model()
        want = counts["inserted"] + len(EXISTING)
        if c.get("records") != want or c.get("ok") is not True:
            p.append("check: records %r ok %r, expected %d true" % (c.get("records"), c.get("ok"), want))
    elif cmd == "get":  # get OUT EXPECTED-RECORD-JSON
        g = json.load(open(sys.argv[2]))
        if g.get("record") != json.loads(sys.argv[3]):
            p.append("get: %s, expected record %s" % (json.dumps(g), sys.argv[3]))
    elif cmd == "abort":  # abort OUT EXIT: --on-conflict abort on data.jsonl
        got, summary = load_out(sys.argv[2])
        want, _, _ = model()
        first = want[0]
        fl = first["duplicates"][0]["line"]
        if int(sys.argv[3]) != 3 or summary.get("code") != 3:
            p.append("abort: exit %s, expected 3" % sys.argv[3])
        if summary.get("aborted") is not True or summary.get("aborted_line") != fl:
            p.append("abort: summary %s, expected aborted at line %d" % (json.dumps(summary), fl))
        if not got or got[0].get("duplicates", [{}])[0].get("line") != fl or got[0].get("owner") != first["owner"]:
            p.append("abort: the report does not start with the duplicate at line %d: %s" % (fl, got[:1]))
        n_before = sum(1 for n, t in enumerate(lines(), 1) if n < fl and t.strip())
        if summary.get("inserted", 0) < n_before:
            p.append("abort: %r inserted, expected at least the %d before line %d" % (summary.get("inserted"), n_before, fl))
        if summary.get("read", 0) != summary.get("inserted", 0) + summary.get("duplicates", 0) + summary.get("invalid", 0) + summary.get("not_attempted", 0):
            p.append("abort: counts do not add up: %s" % json.dumps(summary))
        with open(os.path.join(D, "before.txt"), "w") as f:
            for n, t in enumerate(lines(), 1):
                if n < fl and t.strip():
                    f.write(json.loads(t)["id"] + "\n")
    elif cmd == "same":  # same A B: two reports are identical
        a = open(sys.argv[2]).read()
        b = open(sys.argv[3]).read()
        if a != b:
            p.append("reports differ:\n%s\n---\n%s" % (a[:1500], b[:1500]))
    elif cmd == "summary":  # summary OUT KEY=JSON...: fields of the last line
        s = json.loads(open(sys.argv[2]).read().splitlines()[-1])
        for kv in sys.argv[3:]:
            k, v = kv.split("=", 1)
            if s.get(k) != json.loads(v):
                p.append("summary %s is %r, expected %s (%s)" % (k, s.get(k), v, json.dumps(s)))
    else:
        p.append("unknown check %s" % cmd)
    for x in p:
        print(x)
    print("checked")  # ran to its end: pycheck passes nothing less

main()
EOF
python3 "$DIR/t.py" gen || exit 2

# fresh STORE-URL: a store with the schema and the two existing records.
fresh() {
  "$UNICO" --store "$1" schema apply "$DIR/schema.cql" >/dev/null &&
    "$UNICO" --store "$1" insert users "$(cat "$DIR/existing1.json")" >/dev/null &&
    "$UNICO" --store "$1" insert users "$(cat "$DIR/existing2.json")" >/dev/null
}

# The whole checking of one import of data.jsonl into the store $1 (fresh),
# with extra options; the report goes to stdout. $2: a label.
full_run() {
  url=$1
  label=$2
  shift 2
  check "$label: fresh store" fresh "$url"
  "$UNICO" --store "$url" import users "$DIR/data.jsonl" --progress none "$@" \
    >"$DIR/$label.out" 2>"$DIR/$label.err"
  code=$?
  pycheck "$label: report, summary and exit code" full "$DIR/$label.out" "$code"
  check "$label: one sentence on stderr" test "$(wc -l <"$DIR/$label.err")" -eq 1
  "$UNICO" --store "$url" check >"$DIR/$label.check"
  check "$label: check exits 0" test $? -eq 0
  pycheck "$label: check counts every inserted record" records "$DIR/$label.check"
  while IFS="$(printf '\t')" read -r pk rec; do
    "$UNICO" --store "$url" get users "$pk" >"$DIR/$label.get"
    pycheck "$label: get $pk" get "$DIR/$label.get" "$rec"
  done <"$DIR/sample.txt"
  sed '$d' "$DIR/$label.out" >"$DIR/$label.report"
}

echo "--- plain store, small batches, 8 threads"
full_run "lmdb:$DIR/plain" plain --batch 500 --threads 8

echo "--- plain store, defaults (one batch: duplicates ordered by waves)"
full_run "lmdb:$DIR/plain1" plain1
pycheck "the report does not depend on batch size or threads" same "$DIR/plain.report" "$DIR/plain1.report"

echo "--- log-mode store"
full_run "lmdb:$DIR/log?wal=on" log --batch 700
pycheck "log mode: the same report" same "$DIR/plain.report" "$DIR/log.report"

echo "--- standard input, --report FILE"
check "stdin: fresh store" fresh "lmdb:$DIR/stdin"
"$UNICO" --store "lmdb:$DIR/stdin" import users - --report "$DIR/stdin.report" \
  --threads 3 --batch 1000 <"$DIR/data.jsonl" >"$DIR/stdin.out" 2>/dev/null
code=$?
pycheck "stdin: report, summary and exit code" full "$DIR/stdin.out" "$DIR/stdin.report" "$code"
pycheck "stdin: the same report" same "$DIR/plain.report" "$DIR/stdin.report"
check "stdin: stdout is the summary alone" test "$(wc -l <"$DIR/stdin.out")" -eq 1

echo "--- importing the same file again: everything is a duplicate"
"$UNICO" --store "lmdb:$DIR/plain" import users "$DIR/data.jsonl" --report "$DIR/again.report" \
  >"$DIR/again.out" 2>/dev/null
code=$?
check "again: exit 1 (the invalid lines)" test "$code" -eq 1
pycheck "again: nothing inserted" summary "$DIR/again.out" inserted=0 invalid=3 not_attempted=0

echo "--- exit codes: 0 all inserted, 3 duplicates only"
check "clean: fresh store" fresh "lmdb:$DIR/clean"
printf '{"id":"c1","email":"c1@x.com"}\n\n{"id":"c2","email":"c2@x.com"}\n' >"$DIR/clean.jsonl"
"$UNICO" --store "lmdb:$DIR/clean" import users "$DIR/clean.jsonl" >"$DIR/clean.out" 2>"$DIR/clean.err"
check "clean: exit 0" test $? -eq 0
check "clean: stdout is the summary alone" test "$(wc -l <"$DIR/clean.out")" -eq 1
check "clean: stderr is empty" test ! -s "$DIR/clean.err"
pycheck "clean: summary" summary "$DIR/clean.out" read=2 inserted=2 duplicates=0 aborted=false error=null
printf '{"id":"c3","email":"C1@x.com"}\n{"id":"c4","email":"c4@x.com"}\n' >"$DIR/dups.jsonl"
"$UNICO" --store "lmdb:$DIR/clean" import users "$DIR/dups.jsonl" >"$DIR/dups.out" 2>/dev/null
check "duplicates only: exit 3" test $? -eq 3
pycheck "duplicates only: summary" summary "$DIR/dups.out" read=2 inserted=1 duplicates=1 error='"conflict"' code=3

echo "--- --on-conflict abort"
check "abort: fresh store" fresh "lmdb:$DIR/abort"
"$UNICO" --store "lmdb:$DIR/abort" import users "$DIR/data.jsonl" --on-conflict abort \
  >"$DIR/abort.out" 2>/dev/null
code=$?
pycheck "abort: stops at the first duplicate" abort "$DIR/abort.out" "$code"
missing=0
while read -r pk; do
  "$UNICO" --store "lmdb:$DIR/abort" get users "$pk" >/dev/null 2>&1 || missing=$((missing + 1))
done <"$DIR/before.txt"
check "abort: every record before the first duplicate was inserted ($missing missing)" test "$missing" -eq 0
"$UNICO" --store "lmdb:$DIR/abort" check >/dev/null
check "abort: check exits 0" test $? -eq 0

echo "--- errors before any record"
"$UNICO" --store "lmdb:$DIR/nofile" import users "$DIR/no-such-file.jsonl" >"$DIR/nofile.out" 2>/dev/null
check "missing file: exit 1" test $? -eq 1
pycheck "missing file: usage error" summary "$DIR/nofile.out" error='"usage"' code=1
check "missing file: no store created" test ! -e "$DIR/nofile"
"$UNICO" --store "lmdb:$DIR/clean" import nosuch "$DIR/clean.jsonl" >"$DIR/notable.out" 2>/dev/null
check "unknown table: exit 1" test $? -eq 1
pycheck "unknown table: invalid" summary "$DIR/notable.out" error='"invalid"'
for bad in "--threads 0" "--batch x" "--on-conflict maybe" "--progress loud"; do
  # shellcheck disable=SC2086
  "$UNICO" --store "lmdb:$DIR/clean" import users "$DIR/clean.jsonl" $bad >/dev/null 2>&1
  check "bad option $bad: exit 1" test $? -eq 1
done
"$UNICO" --store "lmdb:$DIR/clean" get users c1 --threads 2 >/dev/null 2>&1
check "import options on another command: exit 1" test $? -eq 1

echo "--- a report file that is the input is refused, and the input is untouched"
check "same: fresh store" fresh "lmdb:$DIR/same"
printf '{"id":"s1","email":"s1@x.com"}\n{"id":"s2","email":"s2@x.com"}\n' >"$DIR/same.jsonl"
cp "$DIR/same.jsonl" "$DIR/same.orig"
ln -s same.jsonl "$DIR/same-link.jsonl"
ln "$DIR/same.jsonl" "$DIR/same-hard.jsonl"
mkdir -p "$DIR/sub"
# refused IN REPORT [<STDIN]: exit 1, a usage error naming --report, the
# input as it was, nothing imported
refused() {
  label=$1
  if [ $# -eq 3 ]; then
    "$UNICO" --store "lmdb:$DIR/same" import users "$2" --report "$3" --progress none \
      >"$DIR/same.out" 2>"$DIR/same.err"
  else
    "$UNICO" --store "lmdb:$DIR/same" import users - --report "$2" --progress none \
      <"$4" >"$DIR/same.out" 2>"$DIR/same.err"
  fi
  code=$?
  check "$label: exit 1" test "$code" -eq 1
  pycheck "$label: a usage error" summary "$DIR/same.out" error='"usage"' code=1
  check "$label: the message names --report" grep -q -- "--report" "$DIR/same.out"
  check "$label: the input is untouched" cmp -s "$DIR/same.jsonl" "$DIR/same.orig"
}
refused "report = input" "$DIR/same.jsonl" "$DIR/same.jsonl"
refused "report = input through a symlink" "$DIR/same.jsonl" "$DIR/same-link.jsonl"
refused "input through a symlink = report" "$DIR/same-link.jsonl" "$DIR/same.jsonl"
refused "report = input by a hard link" "$DIR/same.jsonl" "$DIR/same-hard.jsonl"
refused "report = input by another path" "$DIR/same.jsonl" "$DIR/sub/../same.jsonl"
refused "report = standard input's file" "$DIR/same.jsonl" - "$DIR/same.jsonl"
"$UNICO" --store "lmdb:$DIR/same" get users s1 >/dev/null 2>&1
check "report = input: nothing was imported" test $? -eq 2
# an existing report file is replaced, once the input has been read
printf 'an old report\n' >"$DIR/old.report"
"$UNICO" --store "lmdb:$DIR/same" import users "$DIR/same.jsonl" --report "$DIR/old.report" \
  --progress none >"$DIR/old.out" 2>/dev/null
check "an old report: exit 0" test $? -eq 0
check "an old report: replaced by the (empty) report" test ! -s "$DIR/old.report"
"$UNICO" --store "lmdb:$DIR/same" import users "$DIR/same.jsonl" --report "$DIR/old.report" \
  --progress none >"$DIR/old.out" 2>/dev/null
check "again: exit 3 (duplicates)" test $? -eq 3
check "again: the report lists the two duplicates" test "$(wc -l <"$DIR/old.report")" -eq 2

echo "--- a store error (the disk full: here a file size limit) advises what fits an import"
check "disk full: fresh store" fresh "lmdb:$DIR/disk"
python3 -c '
import sys
with open(sys.argv[1], "w") as f:
    for i in range(20000):
        f.write("{\"id\":\"d%d\",\"email\":\"d%d@x.com\",\"username\":\"%s\"}\n" % (i, i, "x" * 200))
' "$DIR/disk.jsonl"
# (SIGXFSZ ignored: a write past the limit then fails with EFBIG, as one
# past the end of the disk fails with ENOSPC)
(trap '' XFSZ; ulimit -f 1500; exec "$UNICO" --store "lmdb:$DIR/disk" import users \
  "$DIR/disk.jsonl" --progress none --report "$DIR/disk.report") >"$DIR/disk.out" 2>"$DIR/disk.err"
check "disk full: exit 7" test $? -eq 7
pycheck "disk full: stopped on the store error" summary "$DIR/disk.out" aborted=true code=7
check "disk full: no advice to retry with an operation id" \
  sh -c '! grep -qi "operation id\|op id" "$1" "$2" "$3"' - "$DIR/disk.out" "$DIR/disk.err" "$DIR/disk.report"
check "disk full: the advice is to run the import again" grep -q "run the import again" "$DIR/disk.out"
"$UNICO" --store "lmdb:$DIR/disk" import users "$DIR/disk.jsonl" --progress none \
  --report "$DIR/disk2.report" >"$DIR/disk2.out" 2>/dev/null
code=$?
check "disk full, run again: exit 0 or 3 (what was in is a duplicate)" test "$code" -eq 0 -o "$code" -eq 3
python3 -c '
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[-1])
ok = s["read"] == 20000 and s["inserted"] + s["duplicates"] == 20000 and s["errors"] == 0
print("checked" if ok else "run again: %s" % json.dumps(s))
' "$DIR/disk2.out" >"$DIR/disk2.chk" 2>&1
check "disk full, run again: every record in ($(cat "$DIR/disk2.chk"))" test "$(cat "$DIR/disk2.chk")" = checked
"$UNICO" --store "lmdb:$DIR/disk" check >/dev/null
check "disk full, run again: check exits 0" test $? -eq 0

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
