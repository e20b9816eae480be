#!/usr/bin/env python3
"""native_dynamodb.py - records in native DynamoDB tables, read and written
by an independent client (Debian's awscli) beside unico.

Run under tests/support/dynamodb_local.sh (which sets UNICO_TEST_STORE_BASE to a
DynamoDB Local endpoint and dummy credentials):

    native_dynamodb.py UNICO_BINARY

It checks, with `aws dynamodb` against the same server:
  - schema apply creates one DynamoDB table per DDL table, keyed by the DDL
    primary key (hash, or hash and range), with the key types S or N;
  - a record written by unico is an item whose attributes are the record's
    columns in native types (S, N, BOOL; uuid lower case; timestamps ISO
    8601 UTC with milliseconds), plus only unico_v and unico_meta;
  - an attribute another client added survives unico's updates, and a
    column unico clears is removed;
  - a deleted record leaves no item in the native table;
  - a primary key DynamoDB cannot hold (three columns, a boolean) and an
    existing table with another key are refused at schema apply, naming
    the table, and nothing is created;
  - a table other clients created and filled is adopted by schema apply:
    an attribute of another type and duplicate values refuse it (named in
    the message and the report, nothing changed); fixed with awscli, the
    apply succeeds, the items get their bookkeeping, and uniqueness holds
    against them;
  - an adoption killed half-way is rolled back and applies again;
  - what is kept only for the retention period leaves by itself: a
    tombstone, an outcome and its index, and a hold carry the TTL
    attribute exp (a day after the delete, the write, the hold's expiry),
    and a key taken over (a held value inserted) no longer has it;
  - rows other clients add later are drift: counted by check, a value two
    rows hold is a violation, repair claims free values for their rows,
    and unico updates such rows like its own;
  - a batch swapping two unique values lands whole (both items read back
    at version 2); a batch whose second op conflicts leaves no item of its
    insert and the other record unchanged;
  - check finds the store consistent.
Every failed expectation is printed; the exit code is 1 if any failed.
"""
import json
import os
import shutil
import subprocess
import sys
import time

UNICO = sys.argv[1] if len(sys.argv) > 1 else "build/unico"
BASE = os.environ.get("UNICO_TEST_STORE_BASE", "")
if not BASE.startswith("dynamodb://"):
    sys.exit("native_dynamodb: UNICO_TEST_STORE_BASE must be a dynamodb:// URL "
             "(run under tests/support/dynamodb_local.sh)")
AWS = shutil.which("aws", path="/usr/bin:/usr/local/bin")
if not AWS:
    sys.exit("native_dynamodb: awscli is not installed (scripts/deps.sh "
             "installs Debian's awscli)")
ENDPOINT = "http://" + BASE[len("dynamodb://"):].split("/")[0]
RUN = "n%d" % os.getpid()
PREFIX = RUN + "_"
URL = "%sunico_%s?table_prefix=%s" % (BASE, RUN, PREFIX)
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)
    if os.environ.get("UNICO_TEST_FAIL_FAST"):  # (the mutation check)
        sys.exit(1)


def unico(*args, stdin=None):
    p = subprocess.run([UNICO, "--store", URL] + list(args), input=stdin,
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def aws(*args):
    p = subprocess.run([AWS, "--endpoint-url", ENDPOINT, "--output", "json",
                        "dynamodb"] + list(args), capture_output=True,
                       text=True, timeout=120)
    if p.returncode:
        raise RuntimeError("aws %s: %s" % (" ".join(args), p.stderr))
    return json.loads(p.stdout) if p.stdout.strip() else {}


def table_names():
    return aws("list-tables").get("TableNames", [])


def get_item(table, key):
    return aws("get-item", "--table-name", PREFIX + table, "--consistent-read",
               "--key", json.dumps(key)).get("Item")


def fill(table, items):
    """Put items into a native table fast, as another application would:
    BatchWriteItem straight over HTTP (DynamoDB Local checks no signature;
    awscli would take a process per 25 items)."""
    import urllib.request
    for i in range(0, len(items), 25):
        body = json.dumps({"RequestItems": {PREFIX + table: [
            {"PutRequest": {"Item": it}} for it in items[i:i + 25]]}})
        req = urllib.request.Request(ENDPOINT + "/", data=body.encode(),
                                     method="POST", headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "DynamoDB_20120810.BatchWriteItem",
            "Authorization": "AWS4-HMAC-SHA256 Credential=unicotest/20240101/"
                             "us-east-1/dynamodb/aws4_request, SignedHeaders="
                             "host, Signature=0"})
        with urllib.request.urlopen(req, timeout=60) as r:
            left = json.loads(r.read()).get("UnprocessedItems") or {}
            if left:
                raise RuntimeError("BatchWriteItem left items: %s" % left)


def expect(cond, msg):
    if not cond:
        fail(msg)


def expiring():
    """unico's own items carrying the TTL attribute exp: {k: exp}."""
    out, start = {}, None
    while True:
        args = ["scan", "--table-name", "unico_" + RUN, "--consistent-read"]
        if start:
            args += ["--starting-token", start]
        page = aws(*args)
        for it in page.get("Items", []):
            if "exp" in it:
                out[it["k"]["S"]] = int(it["exp"]["N"])
        start = page.get("NextToken")
        if not start:
            return out


DAY = 86400


def near(t, want):
    return abs(t - want) <= 120


DDL = """
CREATE TABLE users (
  id text PRIMARY KEY, email text, age int, active boolean, uid uuid,
  joined timestamp, score double, big bigint,
  UNIQUE (email) NORMALIZE casefold
);
CREATE TABLE visits (
  user_id text, at timestamp, page text,
  PRIMARY KEY (user_id, at)
);
"""

rc, out, err = unico("schema", "apply", "-", stdin=DDL)
expect(rc == 0, "schema apply: rc %d %s" % (rc, err))

# 1. one native table per DDL table, keyed by the DDL primary key
for table, want in (("users", [("id", "HASH", "S")]),
                    ("visits", [("user_id", "HASH", "S"),
                                ("at", "RANGE", "S")])):
    d = aws("describe-table", "--table-name", PREFIX + table)["Table"]
    types = {a["AttributeName"]: a["AttributeType"]
             for a in d["AttributeDefinitions"]}
    got = [(k["AttributeName"], k["KeyType"], types.get(k["AttributeName"]))
           for k in d["KeySchema"]]
    expect(got == want, "%s: key schema %s, want %s" % (table, got, want))

# 2. a record is an item of native attributes
rec = {"id": "u1", "email": "Alice@Example.org", "age": 41, "active": True,
       "uid": "123E4567-E89B-12D3-A456-426614174ABC",
       "joined": "2024-05-01T14:00:00+02:00", "score": 2.5,
       "big": 9007199254740993}
rc, out, err = unico("insert", "users", json.dumps(rec))
expect(rc == 0, "insert: rc %d %s" % (rc, err))
item = get_item("users", {"id": {"S": "u1"}})
if item is None:
    fail("the record u1 is not an item of %susers" % PREFIX)
    item = {}
want = {"id": {"S": "u1"}, "email": {"S": "Alice@Example.org"},
        "age": {"N": "41"}, "active": {"BOOL": True},
        "uid": {"S": "123e4567-e89b-12d3-a456-426614174abc"},
        "joined": {"S": "2024-05-01T12:00:00.000Z"}, "score": {"N": "2.5"},
        "big": {"N": "9007199254740993"}, "unico_v": {"N": "1"}}
for k, v in want.items():
    expect(item.get(k) == v, "item attribute %s is %s, want %s"
           % (k, item.get(k), v))
extra = set(item) - set(want) - {"unico_meta"}
expect(not extra, "item has attributes beyond the record's and unico_*: %s"
       % sorted(extra))
expect("B" in item.get("unico_meta", {}), "unico_meta is not binary: %s"
       % item.get("unico_meta"))

rc, out, err = unico("insert", "visits",
                     json.dumps({"user_id": "u1", "at": 1714564800000,
                                 "page": "/home"}))
expect(rc == 0, "insert visit: rc %d %s" % (rc, err))
v = get_item("visits", {"user_id": {"S": "u1"},
                        "at": {"S": "2024-05-01T12:00:00.000Z"}})
expect(v is not None and v.get("page") == {"S": "/home"},
       "the visit is not an item keyed by hash and range: %s" % v)
rc, out, err = unico("get", "visits", "u1", "2024-05-01T12:00:00Z")
expect(rc == 0 and '"/home"' in out, "get visit: rc %d %s %s" % (rc, out, err))

# 3. attributes of other clients survive unico's updates; a cleared column
# is removed
aws("update-item", "--table-name", PREFIX + "users", "--key",
    json.dumps({"id": {"S": "u1"}}), "--update-expression", "SET nickname = :n",
    "--expression-attribute-values", json.dumps({":n": {"S": "al"}}))
rc, out, err = unico("update", "users", "u1",
                     json.dumps({"email": "alice@new.example", "age": None}))
expect(rc == 0, "update: rc %d %s" % (rc, err))
item = get_item("users", {"id": {"S": "u1"}}) or {}
expect(item.get("nickname") == {"S": "al"},
       "an attribute unico does not know was lost: %s" % item.get("nickname"))
expect(item.get("email") == {"S": "alice@new.example"},
       "email after update: %s" % item.get("email"))
expect("age" not in item, "a cleared column is still there: %s"
       % item.get("age"))
expect(item.get("unico_v") == {"N": "2"}, "unico_v after update: %s"
       % item.get("unico_v"))
rc, out, err = unico("get", "users", "u1")
expect(rc == 0 and "nickname" not in out,
       "get shows a column the DDL does not have: %s" % out)
# the unique constraint holds against the native record
rc, out, err = unico("insert", "users",
                     json.dumps({"id": "u2", "email": "ALICE@new.example"}))
expect(rc == 3, "a taken email (other case) was not a conflict: rc %d %s"
       % (rc, out + err))
# ... and the refused insert left nothing in the users' table (one
# transaction: issue 32 item 3 asks the same of every store)
expect(get_item("users", {"id": {"S": "u2"}}) is None,
       "a refused insert left an item in the native table")

# 4. a deleted record leaves no item behind in the native table; its
# tombstone (unico's table) and the outcome of a write with an op id leave
# by themselves a retention period (a day) later
before = expiring()
rc, out, err = unico("delete", "users", "u1", "--op-id", "del-u1")
expect(rc == 0, "delete: rc %d %s" % (rc, err))
expect(get_item("users", {"id": {"S": "u1"}}) is None,
       "a deleted record is still an item of the native table")
new = {k: t for k, t in expiring().items() if k not in before}
hexid = "del-u1".encode().hex()
expect(len(new) == 3 and all(near(t, time.time() + DAY) for t in new.values())
       and sum(1 for k in new if hexid in k) == 2,
       "the tombstone, the outcome and its index carry exp a day on: %s" % new)
rc, out, err = unico("insert", "users",
                     json.dumps({"id": "u1", "email": "alice@new.example"}))
expect(rc == 0, "insert over the deleted record: rc %d %s" % (rc, err))
rc, out, err = unico("get", "users", "u1")
expect(rc == 0 and json.loads(out or "{}").get("version") == 3,
       "the key's versions go on counting across the delete: %s" % out)
# the tombstone went with the insert over it (the record is native again)
left = expiring()
expect(len([k for k in new if k in left]) == 2,
       "after an insert over the tombstone, only the outcome and its index "
       "expire: %s" % left)
# a hold expires a day after its own expiry; a write taking it over keeps
# the value for good
before = expiring()
rc, out, err = unico("reserve", "users", "users_email_key", "held@x.org",
                     "--ttl", "600")
expect(rc == 0, "reserve: rc %d %s" % (rc, err))
token = json.loads(out or "{}").get("token", "")
new = {k: t for k, t in expiring().items() if k not in before}
expect(len(new) == 2 and all(near(t, time.time() + 600 + DAY) for t in new.values()),
       "a hold and its index carry exp a day after the hold expires: %s" % new)
rc, out, err = unico("insert", "users", json.dumps({"id": "u9", "email": "held@x.org"}),
                     "--hold", token)
expect(rc == 0, "insert with the hold: rc %d %s" % (rc, err))
left = expiring()
expect(not [k for k in new if k in left],
       "the claim of the held value inserted (and the hold's index) still "
       "expire: %s" % left)

# 5. keys DynamoDB cannot hold, and a table with another key, are refused
before = set(table_names())
for ddl, words in (
        ("CREATE TABLE wide (a text, b text, c text, PRIMARY KEY (a, b, c));",
         ["wide", "at most two"]),
        ("CREATE TABLE flags (f boolean PRIMARY KEY);", ["flags", "boolean"])):
    rc, out, err = unico("schema", "apply", "-", stdin=DDL + ddl)
    expect(rc == 1 and all(w in err for w in words),
           "schema apply of %r: rc %d, stderr %r" % (ddl, rc, err))
aws("create-table", "--table-name", PREFIX + "accounts",
    "--attribute-definitions", "AttributeName=id,AttributeType=N",
    "--key-schema", "AttributeName=id,KeyType=HASH",
    "--billing-mode", "PAY_PER_REQUEST")
rc, out, err = unico("schema", "apply", "-",
                     stdin=DDL + "CREATE TABLE accounts (id text PRIMARY KEY);")
expect(rc == 1 and "accounts" in err and "(id N HASH)" in err
       and "(id S HASH)" in err,
       "a table with another key type: rc %d, stderr %r" % (rc, err))
after = set(table_names())
expect(after - before == {PREFIX + "accounts"},
       "refused applies created tables: %s" % sorted(after - before))
rc, out, err = unico("schema", "show")
expect(rc == 0 and "accounts" not in out and "wide" not in out,
       "a refused schema was stored: %s" % out)

# 6. adopting a table other clients filled: type errors and duplicates
# refuse the apply (nothing changes), fixed with awscli it succeeds, and
# uniqueness then holds for writes through unico
aws("create-table", "--table-name", PREFIX + "customers",
    "--attribute-definitions", "AttributeName=cid,AttributeType=S",
    "--key-schema", "AttributeName=cid,KeyType=HASH",
    "--billing-mode", "PAY_PER_REQUEST")
def put(cid, **cols):
    item = {"cid": {"S": cid}}
    item.update(cols)
    aws("put-item", "--table-name", PREFIX + "customers", "--item",
        json.dumps(item))
put("c1", email={"S": "ann@x.org"}, tier={"N": "1"}, note={"S": "theirs"})
put("c2", email={"S": "ANN@X.ORG"}, tier={"N": "2"})
put("c3", email={"S": "bob@x.org"}, tier={"S": "gold"})
for i in range(4, 40):
    put("c%d" % i, email={"S": "user%d@x.org" % i})
CUST = DDL + """
CREATE TABLE customers (cid text PRIMARY KEY, email text, tier int,
  UNIQUE (email) NORMALIZE casefold);
"""
rc, out, err = unico("schema", "apply", "-", stdin=CUST)
expect(rc != 0 and '"c3"' in err and "tier" in err and "as S" in err
       and "int" in err,
       "a wrong attribute type did not refuse the apply naming item, column "
       "and both types: rc %d %s" % (rc, err))
aws("update-item", "--table-name", PREFIX + "customers", "--key",
    json.dumps({"cid": {"S": "c3"}}), "--update-expression", "SET tier = :t",
    "--expression-attribute-values", json.dumps({":t": {"N": "3"}}))
rc, out, err = unico("schema", "apply", "-", stdin=CUST)
expect(rc != 0 and "duplicate" in err, "duplicates did not refuse the apply: "
       "rc %d %s %s" % (rc, out, err))
report = out + err
expect('"c1"' in report and '"c2"' in report,
       "the duplicate report does not name both items: %s" % report)
rc, out, err = unico("schema", "show")
expect(rc == 0 and "customers" not in out,
       "a refused adoption changed the schema: %s" % out)
rc, out, err = unico("lookup", "customers", "customers_email_key", "ann@x.org")
expect(rc != 0, "a refused adoption left a claim: rc %d %s" % (rc, out))
aws("update-item", "--table-name", PREFIX + "customers", "--key",
    json.dumps({"cid": {"S": "c2"}}), "--update-expression", "SET email = :e",
    "--expression-attribute-values", json.dumps({":e": {"S": "cat@x.org"}}))
rc, out, err = unico("schema", "apply", "-", stdin=CUST)
expect(rc == 0, "adoption after the fix: rc %d %s %s" % (rc, out, err))
item = get_item("customers", {"cid": {"S": "c1"}}) or {}
expect(item.get("unico_v") == {"N": "1"} and "unico_meta" in item
       and item.get("note") == {"S": "theirs"},
       "an adopted item was not given its bookkeeping, or lost an attribute: "
       "%s" % item)
rc, out, err = unico("insert", "customers",
                     json.dumps({"cid": "c99", "email": "Ann@X.org"}))
expect(rc == 3 and '"c1"' in out + err,
       "a value an adopted item holds was not a conflict naming it: rc %d %s"
       % (rc, out + err))
rc, out, err = unico("lookup", "customers", "customers_email_key", "cat@x.org")
expect(rc == 0 and '"c2"' in out, "lookup of an adopted value: rc %d %s %s"
       % (rc, out, err))
rc, out, err = unico("update", "customers", "c2",
                     json.dumps({"email": "user7@x.org"}))
expect(rc == 3, "an update to another adopted item's value: rc %d %s"
       % (rc, out + err))
rc, out, err = unico("update", "customers", "c2",
                     json.dumps({"email": "dan@x.org"}))
expect(rc == 0, "an update of an adopted item: rc %d %s" % (rc, err))
rc, out, err = unico("insert", "customers",
                     json.dumps({"cid": "c98", "email": "cat@x.org"}))
expect(rc == 0, "the value the update freed: rc %d %s" % (rc, err))

# 7. drift: rows other clients write behind unico's back. check counts
# them and the values nobody claims (not violations), reports a value two
# rows hold as a violation; repair claims the free values for their rows;
# unico writes over such a row like any other
put("f1", email={"S": "fresh@x.org"})
put("f2", email={"S": "ANN@x.org"})
rc, out, err = unico("check")
rep = json.loads(out or "{}").get("report", json.loads(out or "{}"))
expect(rc == 7 and rep.get("bare_rows") == 2
       and rep.get("unclaimed_values") == 1
       and any(v["kind"] == "duplicate_value" for v in rep.get("violations", [])),
       "check of drift: rc %d %s" % (rc, out))
# (the duplicate is left for a person: repair exits 7, as check does, with
# its report under "report")
rc, out, err = unico("repair")
expect(rc == 7 and json.loads(out or "{}").get("report", {}).get("rows_claimed") == 1,
       "repair of drift: rc %d %s %s" % (rc, out, err))
rc, out, err = unico("insert", "customers",
                     json.dumps({"cid": "c97", "email": "FRESH@x.org"}))
expect(rc == 3 and '"f1"' in out + err,
       "a value repair claimed for a foreign row: rc %d %s" % (rc, out + err))
rc, out, err = unico("update", "customers", "f2",
                     json.dumps({"email": "eve@x.org"}))
expect(rc == 0, "unico's update of a foreign row: rc %d %s" % (rc, err))
item = get_item("customers", {"cid": {"S": "f2"}}) or {}
expect(item.get("unico_v") == {"N": "1"} and "unico_meta" in item,
       "the foreign row has no bookkeeping after unico wrote it: %s" % item)

# 8. an adoption killed half-way is rolled back by the next process that
# reads the schema once the marker is stale (30 s), and applied again
import signal
import time
# Killed half-way: once it says how far it is (its first progress line,
# after 2 s of building), or, when the machine builds it faster than
# that, at half the time a whole build of the same table took here (on a
# fresh table of its own: a finished adoption stays). No fixed sleep that
# a fast machine outruns.
import queue
import threading


def start_apply(ddl):
    p = subprocess.Popen([UNICO, "--store", URL, "schema", "apply", "-"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdin.write(ddl)
    p.stdin.close()
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in p.stderr],
                     daemon=True).start()
    return p, lines


killed, progress, cut, big = False, None, None, None
for attempt in range(4):
    big = "big%d" % attempt if attempt else "big"
    aws("create-table", "--table-name", PREFIX + big,
        "--attribute-definitions", "AttributeName=k,AttributeType=N",
        "--key-schema", "AttributeName=k,KeyType=HASH",
        "--billing-mode", "PAY_PER_REQUEST")
    fill(big, [{"k": {"N": str(i)}, "mail": {"S": "m%d@x.org" % i}}
               for i in range(4000)])
    BIG = CUST + ("CREATE TABLE %s (k bigint PRIMARY KEY, mail text, "
                  "UNIQUE (mail));" % big)
    p, lines = start_apply(BIG)
    t0 = time.monotonic()
    while p.poll() is None and time.monotonic() - t0 < 120:
        if cut is not None and time.monotonic() - t0 >= cut:
            progress = "after %.2f s" % cut
            break
        try:
            l = lines.get(timeout=0.02)
        except queue.Empty:
            continue
        if "schema apply: table %s: " % big in l:
            progress = l.strip()
            break
    took = time.monotonic() - t0
    killed = p.poll() is None
    p.send_signal(signal.SIGKILL)
    p.wait()
    if killed:
        break
    CUST = BIG  # (it finished: it stays, and the next try kills sooner)
    cut = took / 2
expect(killed, "an adoption of 4000 items could not be killed half-way "
       "in 4 tries")
print("killed the adoption at: %s" % progress)
time.sleep(31)
rc, out, err = unico("schema", "show")
expect(rc == 0 and "CREATE TABLE %s " % big not in out,
       "the killed adoption was not rolled back: rc %d %s %s" % (rc, out, err))
t0 = time.monotonic()
rc, out, err = unico("schema", "apply", "-", stdin=BIG)
took = time.monotonic() - t0
expect(rc == 0, "the adoption applied again: rc %d %s %s" % (rc, out, err))
# (a build that runs for a while says how far it is, every 2 s)
expect(took < 6 or "unico: schema apply: table %s: " % big in err,
       "an adoption of %.1f s printed no progress: %r" % (took, err))
print("adoption of 4000 items: %.1f s, progress lines: %d"
      % (took, err.count("schema apply: table %s" % big)))
rc, out, err = unico("insert", big, json.dumps({"k": 9000, "mail": "m17@x.org"}))
expect(rc == 3 and "17" in out + err,
       "a value of the adopted table: rc %d %s" % (rc, out + err))

# 8b. a batch is one transaction: a swap of unique values lands whole; a
# batch whose second op conflicts leaves nothing in the native table
for i, mail in ((1, "b1@x.org"), (2, "b2@x.org")):
    rc, out, err = unico("insert", "users",
                         json.dumps({"id": "ub%d" % i, "email": mail}))
    expect(rc == 0, "insert ub%d: rc %d %s" % (i, rc, err))
swap = [{"op": "update", "table": "users", "key": "ub1",
         "patch": {"email": "B2@x.org"}, "if_version": 1},
        {"op": "update", "table": "users", "key": "ub2",
         "patch": {"email": "b1@x.org"}}]
rc, out, err = unico("batch", "-", stdin=json.dumps(swap))
expect(rc == 0, "batch swap: rc %d %s %s" % (rc, out, err))
for pk, mail in (("ub1", "B2@x.org"), ("ub2", "b1@x.org")):
    it = get_item("users", {"id": {"S": pk}}) or {}
    expect(it.get("email") == {"S": mail} and it.get("unico_v") == {"N": "2"},
           "after the swap %s is %s, want email %s at version 2"
           % (pk, it, mail))
bad = [{"op": "insert", "table": "users",
        "record": {"id": "ub3", "email": "b3@x.org"}},
       {"op": "update", "table": "users", "key": "ub1",
        "patch": {"email": "B1@X.org"}}]
rc, out, err = unico("batch", "-", stdin=json.dumps(bad))
expect(rc == 3 and '"index":1' in out and '"owner":"ub2"' in out,
       "a batch whose second op conflicts: rc %d %s %s" % (rc, out, err))
expect(get_item("users", {"id": {"S": "ub3"}}) is None,
       "the refused batch's insert left an item ub3")
it = get_item("users", {"id": {"S": "ub1"}}) or {}
expect(it.get("email") == {"S": "B2@x.org"} and it.get("unico_v") == {"N": "2"},
       "the refused batch changed ub1: %s" % it)
rc, out, err = unico("lookup", "users", "users_email_key", "b3@x.org")
expect(rc == 2, "the refused batch's value b3@x.org is taken: rc %d %s"
       % (rc, out))

# 9. the store is consistent
rc, out, err = unico("check")
expect(rc == 0, "check: rc %d %s %s" % (rc, out, err))

if failures:
    print("native_dynamodb: %d failed" % len(failures))
    sys.exit(1)
print("native_dynamodb: all passed")
