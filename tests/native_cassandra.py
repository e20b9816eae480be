#!/usr/bin/env python3
"""native_cassandra.py - records in native Cassandra tables,
read and written by an independent client (Debian's python3-cassandra, the
DataStax driver) beside unico.

Run under tests/support/cassandra_run.sh (fake or live), which sets
UNICO_TEST_STORE_BASE to a cassandra:// URL ending in "table=":

    native_cassandra.py UNICO_BINARY

It checks, with the driver against the same server:
  - schema apply creates KEYSPACE."prefix+T" for each DDL table, the
    columns in native CQL types plus unico_v bigint, unico_state tinyint
    and unico_meta blob, the DDL key as partition (and clustering) key;
  - a record written by unico is one row: its columns typed (text, int,
    bigint, boolean, uuid, timestamp, double), unico_state 1, unico_v its
    version; an update moves unico_v; a deleted record leaves no row,
    nor does a refused insert (a vote, an 8-client race for two seats);
  - a table the driver created and filled (two rows sharing an email) is
    adopted by schema apply: refused with the duplicate report naming both
    rows, nothing changed; after one row is fixed with the driver (an LWT,
    as other writers must) the apply succeeds and uniqueness holds against
    the rows for writes through unico;
  - an existing table whose column has another type is refused at schema
    apply, naming the table, the column and both types;
  - rows the driver adds later are drift: check counts them (bare_rows,
    unclaimed_values) and reports a value two rows hold as a violation;
    repair claims the free value for its row (rows_claimed 1), which an
    insert through unico is then refused naming; unico updates such a row
    like its own and gives it its bookkeeping;
  - a batch of two records is refused (claims protocol) and leaves no
    row; a batch of one record is written as its row;
  - check finds the store consistent.
Every failed expectation is printed; the exit code is 1 if any failed.
"""
import json
import os
import subprocess
import sys
import uuid
from urllib.parse import urlsplit

try:
    from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
    from cassandra.policies import WhiteListRoundRobinPolicy
    from cassandra import ConsistencyLevel
except ImportError:
    sys.exit("native_cassandra: python3-cassandra is not installed "
             "(scripts/deps.sh installs Debian's python3-cassandra)")

UNICO = sys.argv[1] if len(sys.argv) > 1 else "build/unico"
BASE = os.environ.get("UNICO_TEST_STORE_BASE", "")
if not BASE.startswith("cassandra://") or not BASE.endswith("table="):
    sys.exit("native_cassandra: UNICO_TEST_STORE_BASE must be a cassandra:// "
             "URL ending in table= (run under tests/support/cassandra_run.sh)")
parts = urlsplit(BASE)
HOST, PORT = parts.hostname, parts.port or 9042
KS = parts.path.strip("/")
RUN = "n%d" % os.getpid()
PREFIX = RUN + "_"
URL = "%s%s&table_prefix=%s" % (BASE, RUN, PREFIX)
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)
    if os.environ.get("UNICO_TEST_FAIL_FAST"):  # (the mutation check)
        sys.exit(1)


def expect(ok, msg):
    if not ok:
        fail(msg)
    return ok


def unico(*args, stdin=None):
    p = subprocess.run([UNICO, "--store", URL] + list(args), input=stdin,
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([HOST]),
                           consistency_level=ConsistencyLevel.QUORUM,
                           serial_consistency_level=ConsistencyLevel.SERIAL)
cluster = Cluster([HOST], port=PORT, protocol_version=4, compression=False,
                  idle_heartbeat_interval=0, schema_metadata_enabled=False,
                  token_metadata_enabled=False,
                  execution_profiles={EXEC_PROFILE_DEFAULT: profile})
db = cluster.connect()


def q(cql, *args):
    return list(db.execute(cql, args))


def columns(table):
    rows = q("SELECT column_name, kind, position, type FROM system_schema.columns "
             "WHERE keyspace_name = %s AND table_name = %s", KS, PREFIX + table)
    return {r.column_name: (r.kind, r.position, r.type) for r in rows}


def row(table, where, *args):
    rows = q('SELECT * FROM %s."%s%s" WHERE %s' % (KS, PREFIX, table, where), *args)
    return rows[0] if rows else None


# 1. schema apply creates typed native tables
DDL = """
CREATE TABLE users (
  id text PRIMARY KEY, email text, age int, score bigint, active boolean,
  uid uuid, created timestamp, ratio double,
  UNIQUE (email) NORMALIZE casefold
);
CREATE TABLE votes (
  poll text, name text, choice text,
  PRIMARY KEY (poll, name),
  UNIQUE (poll, choice)
);
CREATE TABLE seats (
  id text PRIMARY KEY, zone text,
  LIMIT 2 PER (zone)
);
"""
rc, out, err = unico("schema", "apply", "-", stdin=DDL)
expect(rc == 0, "schema apply: rc %d %s %s" % (rc, out, err))
cols = columns("users")
want = {"id": ("partition_key", 0, "text"), "email": ("regular", -1, "text"),
        "age": ("regular", -1, "int"), "score": ("regular", -1, "bigint"),
        "active": ("regular", -1, "boolean"), "uid": ("regular", -1, "uuid"),
        "created": ("regular", -1, "timestamp"), "ratio": ("regular", -1, "double"),
        "unico_v": ("regular", -1, "bigint"),
        "unico_state": ("regular", -1, "tinyint"),
        "unico_meta": ("regular", -1, "blob")}
expect(cols == want, "users' native columns: %s" % cols)
vcols = columns("votes")
expect(vcols.get("poll", ("",))[0] == "partition_key" and
       vcols.get("name", ("",))[0] == "clustering" and
       vcols.get("choice", ("",))[2] == "text",
       "votes' key is not (poll) partition, name clustering: %s" % vcols)

# 2. a record written by unico is a typed row
rec = {"id": "u1", "email": "Alice@Example.com", "age": 34,
       "score": 9007199254740993, "active": True,
       "uid": "A3C1E2F0-5B6D-4E7F-8A9B-0C1D2E3F4A5B",
       "created": "2026-11-25T08:00:00.123Z", "ratio": 0.75}
rc, out, err = unico("insert", "users", json.dumps(rec))
expect(rc == 0, "insert u1: rc %d %s %s" % (rc, out, err))
r = row("users", "id = %s", "u1")
if expect(r is not None, "no native row for u1"):
    expect(r.email == "Alice@Example.com" and r.age == 34 and
           r.score == 9007199254740993 and r.active is True and
           r.uid == uuid.UUID("a3c1e2f0-5b6d-4e7f-8a9b-0c1d2e3f4a5b") and
           r.ratio == 0.75 and r.created is not None and
           r.created.isoformat().startswith("2026-11-25T08:00:00.123"),
           "u1's columns are not native values: %s" % (r,))
    expect(r.unico_state == 1 and r.unico_v >= 1 and r.unico_meta,
           "u1's bookkeeping: state %s v %s" % (r.unico_state, r.unico_v))
v1 = r.unico_v if r is not None else 0
rc, out, err = unico("insert", "votes", '{"poll":"p1","name":"ann","choice":"yes"}')
expect(rc == 0, "insert a vote: rc %d %s" % (rc, err))
v = row("votes", "poll = %s AND name = %s", "p1", "ann")
expect(v is not None and v.choice == "yes" and v.unico_state == 1,
       "the vote's native row: %s" % (v,))
rc, out, err = unico("insert", "votes", '{"poll":"p1","name":"bob","choice":"yes"}')
expect(rc == 3, "a second vote for (p1, yes) was not a conflict: rc %d %s" % (rc, out))
# ... and leaves nothing in the table: a refused insert removes its intent
# (docs/protocol.md, "Rows that leave"; issue 32 item 3)
v = row("votes", "poll = %s AND name = %s", "p1", "bob")
expect(v is None, "the refused vote left a row in the users' table: %s" % (v,))

# 2a. a batch: several records are refused on the claims protocol, saying
# why, and leave no row; a batch of one record is written as one
two = [{"op": "insert", "table": "users", "record": {"id": "ub1"}},
       {"op": "insert", "table": "users", "record": {"id": "ub2"}}]
rc, out, err = unico("batch", "-", stdin=json.dumps(two))
expect(rc == 1 and "needs a store with transactions" in out,
       "a batch of two records: rc %d %s %s" % (rc, out, err))
expect(row("users", "id = %s", "ub1") is None and
       row("users", "id = %s", "ub2") is None,
       "the refused batch left a row in the users' table")
rc, out, err = unico("batch", "-", stdin=json.dumps(two[:1]))
expect(rc == 0 and '"results":[{"pk":"ub1","version":1}]' in out,
       "a batch of one record: rc %d %s %s" % (rc, out, err))
b = row("users", "id = %s", "ub1")
expect(b is not None and b.unico_state == 1,
       "the batch of one record's native row: %s" % (b,))

# 2b. a limit race: 8 writers, 2 seats; the table holds exactly the 2 that
# got in, no refused attempt (before issue 32: 5 rows of every 8 with
# unico_state 3)
procs = [subprocess.Popen([UNICO, "--store", URL, "insert", "seats",
                           json.dumps({"id": "s%d" % i, "zone": "z1"})],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) for i in range(8)]
codes = [p.wait(timeout=120) for p in procs]
won = ["s%d" % i for i, c in enumerate(codes) if c == 0]
expect(len(won) == 2 and all(c in (0, 4, 6) for c in codes),
       "the seat race: exit codes %s (2 inserts in, the others refused: 4 limit, 6 busy)" % codes)
seats = q('SELECT id, zone, unico_state FROM %s."%sseats"' % (KS, PREFIX))
expect(sorted(r.id for r in seats) == sorted(won) and
       all(r.unico_state == 1 and r.zone == "z1" for r in seats),
       "after the seat race the users' table holds %s, not exactly the "
       "records that got in (%s)" % ([(r.id, r.unico_state) for r in seats],
                                      won))

# an update moves unico_v and the column; the conflict names the owner
rc, out, err = unico("update", "users", "u1", '{"age":35}')
expect(rc == 0, "update u1: rc %d %s" % (rc, err))
r = row("users", "id = %s", "u1")
expect(r is not None and r.age == 35 and r.unico_v > v1,
       "u1 after the update: %s" % (r,))
rc, out, err = unico("insert", "users", '{"id":"u2","email":"alice@example.COM"}')
expect(rc == 3 and '"u1"' in out, "a casefold duplicate: rc %d %s" % (rc, out))

# a deleted record leaves no row (issue 32 item 3: its tombstone leaves
# once its floor is kept in unico's table)
rc, out, err = unico("delete", "users", "u1")
expect(rc == 0, "delete u1: rc %d %s" % (rc, err))
r = row("users", "id = %s", "u1")
expect(r is None, "the deleted u1 left a row in the users' table: %s" % (r,))
rc, out, err = unico("get", "users", "u1")
expect(rc == 2, "get of a deleted record: rc %d %s" % (rc, out))
rc, out, err = unico("insert", "users", '{"id":"u2","email":"alice@example.com"}')
expect(rc == 0, "the freed email: rc %d %s %s" % (rc, out, err))
# ... and u1 inserted again goes on counting from the deleted record's
# version (inserted at 1, updated to 2): the floor in unico's table
rc, out, err = unico("insert", "users", '{"id":"u1","email":"u1again@example.com"}')
expect(rc == 0 and json.loads(out or "{}").get("version") == 3,
       "u1 inserted after its delete: rc %d %s %s (version 3 expected)"
       % (rc, out, err))

# 3. adopting a table the driver created and filled
db.execute('CREATE TABLE %s."%scustomers" (cid text PRIMARY KEY, email text, '
           'name text)' % (KS, PREFIX))
ins = 'INSERT INTO %s."%scustomers" (cid, email, name) VALUES (%%s, %%s, %%s)' % (KS, PREFIX)
db.execute(ins, ("c1", "dup@example.com", "one"))
db.execute(ins, ("c2", "dup@example.com", "two"))
db.execute(ins, ("c3", "three@example.com", "three"))
CUST = DDL + "CREATE TABLE customers (cid text PRIMARY KEY, email text, UNIQUE (email));"
rc, out, err = unico("schema", "apply", "-", stdin=CUST)
report = out + err
expect(rc != 0 and "duplicate" in report, "duplicates did not refuse the apply: "
       "rc %d %s %s" % (rc, out, err))
expect('"c1"' in report and '"c2"' in report,
       "the duplicate report does not name both rows: %s" % report)
rc, out, err = unico("schema", "show")
expect("customers" not in out, "a refused adoption changed the schema: %s" % out)
# ... and wrote nothing in any row: the driver reads every row as it wrote
# it, the bookkeeping columns (added by step 2, before the check) null
# (issue 32, item 4)
BOOK = {"unico_v": ("regular", -1, "bigint"),
        "unico_state": ("regular", -1, "tinyint"),
        "unico_meta": ("regular", -1, "blob")}
ccols = columns("customers")
expect(ccols == dict({"cid": ("partition_key", 0, "text"),
                      "email": ("regular", -1, "text"),
                      "name": ("regular", -1, "text")}, **BOOK),
       "a refused adoption left other columns than the empty bookkeeping: %s"
       % ccols)
seen = {r.cid: r for r in q('SELECT * FROM %s."%scustomers"' % (KS, PREFIX))}
want_rows = {"c1": ("dup@example.com", "one"), "c2": ("dup@example.com", "two"),
             "c3": ("three@example.com", "three")}
expect(sorted(seen) == sorted(want_rows),
       "a refused adoption changed the rows: %s" % sorted(seen))
for cid, (email, name) in want_rows.items():
    r = seen.get(cid)
    if r is None:
        continue
    expect(r.email == email and r.name == name,
           "a refused adoption changed row %s: %s" % (cid, (r,)))
    expect(r.unico_v is None and r.unico_state is None and r.unico_meta is None,
           "a refused adoption stamped row %s: unico_v %s unico_state %s "
           "unico_meta %s" % (cid, r.unico_v, r.unico_state, r.unico_meta))
# fixed by the driver, with an LWT as other writers of guarded rows must
res = db.execute('UPDATE %s."%scustomers" SET email = %%s WHERE cid = %%s IF EXISTS'
                 % (KS, PREFIX), ("two@example.com", "c2"))
expect(res.one()[0] is True, "the driver's LWT fix did not apply")
rc, out, err = unico("schema", "apply", "-", stdin=CUST)
expect(rc == 0, "adoption after the fix: rc %d %s %s" % (rc, out, err))
c = row("customers", "cid = %s", "c1")
expect(c is not None and c.name == "one" and c.unico_meta is not None,
       "an adopted row lost its column or got no bookkeeping: %s" % (c,))
rc, out, err = unico("insert", "customers", '{"cid":"c9","email":"dup@example.com"}')
expect(rc == 3 and '"c1"' in out,
       "a value an adopted row holds was not a conflict naming it: rc %d %s" % (rc, out))
rc, out, err = unico("update", "customers", "c3", '{"email":"two@example.com"}')
expect(rc == 3, "an update to another adopted row's value: rc %d %s" % (rc, out))
rc, out, err = unico("update", "customers", "c3", '{"email":"new@example.com"}')
expect(rc == 0, "an update of an adopted row: rc %d %s" % (rc, err))
c = row("customers", "cid = %s", "c3")
expect(c is not None and c.email == "new@example.com" and c.name == "three",
       "the adopted row after unico's update: %s" % (c,))
rc, out, err = unico("insert", "customers", '{"cid":"c4","email":"three@example.com"}')
expect(rc == 0, "the value c3 gave up: rc %d %s" % (rc, err))

# 4. a column of another type is refused, naming table, column and types
db.execute('CREATE TABLE %s."%sodd" (id text PRIMARY KEY, n text)' % (KS, PREFIX))
rc, out, err = unico("schema", "apply", "-",
                     stdin=CUST + "CREATE TABLE odd (id text PRIMARY KEY, n int);")
expect(rc != 0 and "odd" in err and '"n"' in err and "text" in err and "int" in err,
       "a mismatched column: rc %d %s" % (rc, err))

# 4b. a UNIQUE added to a declared table whose rows the driver wrote (bare
# rows): refused on a duplicate, it writes nothing in them either; once
# the duplicate is gone it is built and the rows get their bookkeeping
DRIFT = CUST + "CREATE TABLE drifted (id text PRIMARY KEY, b text);"
rc, out, err = unico("schema", "apply", "-", stdin=DRIFT)
expect(rc == 0, "schema apply of drifted: rc %d %s %s" % (rc, out, err))
dins = 'INSERT INTO %s."%sdrifted" (id, b) VALUES (%%s, %%s)' % (KS, PREFIX)
db.execute(dins, ("d1", "same"))
db.execute(dins, ("d2", "same"))
DRIFTU = CUST + "CREATE TABLE drifted (id text PRIMARY KEY, b text, UNIQUE (b));"
rc, out, err = unico("schema", "apply", "-", stdin=DRIFTU)
expect(rc != 0 and '"d1"' in out + err and '"d2"' in out + err,
       "a UNIQUE over bare rows holding a duplicate: rc %d %s %s" % (rc, out, err))
for d in q('SELECT * FROM %s."%sdrifted"' % (KS, PREFIX)):
    expect(d.b == "same" and d.unico_v is None and d.unico_state is None
           and d.unico_meta is None,
           "a refused UNIQUE wrote in bare row %s: %s" % (d.id, (d,)))
db.execute('DELETE FROM %s."%sdrifted" WHERE id = %%s IF EXISTS' % (KS, PREFIX),
           ("d2",))
rc, out, err = unico("schema", "apply", "-", stdin=DRIFTU)
expect(rc == 0, "the UNIQUE once the duplicate is gone: rc %d %s %s" % (rc, out, err))
d = row("drifted", "id = %s", "d1")
expect(d is not None and d.b == "same" and d.unico_state == 1
       and d.unico_meta is not None,
       "the bare row after the UNIQUE was built: %s" % (d,))
rc, out, err = unico("insert", "drifted", '{"id":"d3","b":"same"}')
expect(rc == 3 and '"d1"' in out, "the value of a fenced bare row: rc %d %s" % (rc, out))

# 5. drift: rows the driver writes behind unico's back (no unico_
# columns: bare rows). check counts them and the values nobody claims
# (not violations) and reports a value two rows hold as a violation;
# repair claims the free value for its row; unico writes over such a row
# like any other
db.execute(ins, ("f1", "fresh@example.com", "theirs"))
db.execute(ins, ("f2", "dup@example.com", "clash"))


def drift_check():
    """check's answer and its report (under "report" when it fails), and
    the kinds of the violations it lists, each with its key."""
    rc, out, err = unico("check")
    j = json.loads(out or "{}")
    rep = j.get("report", j)
    kinds = sorted((v["kind"], v["key"]) for v in rep.get("violations", []))
    return rc, rep, kinds, out + err


DUPKEY = '["u","customers","customers_email_key","dup@example.com"]'
rc, chk, kinds, out = drift_check()
expect(rc == 7 and chk.get("bare_rows") == 2
       and chk.get("unclaimed_values") == 1
       and kinds == [("claim_owner_mismatch", DUPKEY), ("duplicate_value", DUPKEY)],
       "check of drift: rc %d %s" % (rc, out))
# (the duplicate is left for a person: repair exits 7, as check does, with
# its report under "report")
rc, out, err = unico("repair")
rep = json.loads(out or "{}").get("report", {})
expect(rc == 7 and rep.get("rows_claimed") == 1
       and rep.get("after", {}).get("violations_total") == 2,
       "repair of drift: rc %d %s %s" % (rc, out, err))
f1 = row("customers", "cid = %s", "f1")
expect(f1 is not None and f1.unico_v == 1 and f1.unico_state == 1
       and f1.unico_meta is not None and f1.name == "theirs"
       and f1.email == "fresh@example.com",
       "the row repair claimed for: %s" % (f1,))
f2 = row("customers", "cid = %s", "f2")
expect(f2 is not None and f2.unico_v is None and f2.unico_meta is None,
       "repair wrote the row whose value another row holds: %s" % (f2,))
rc, out, err = unico("lookup", "customers", "customers_email_key",
                     "fresh@example.com")
expect(rc == 0 and '"f1"' in out, "lookup of the value repair claimed: rc %d %s %s"
       % (rc, out, err))
rc, out, err = unico("insert", "customers",
                     '{"cid":"c97","email":"fresh@example.com"}')
expect(rc == 3 and '"f1"' in out + err,
       "a value repair claimed for a foreign row: rc %d %s" % (rc, out + err))
rc, chk, kinds, out = drift_check()
expect(rc == 7 and chk.get("bare_rows") == 1 and chk.get("unclaimed_values") == 0
       and kinds == [("claim_owner_mismatch", DUPKEY), ("duplicate_value", DUPKEY)],
       "check after the repair: rc %d %s" % (rc, out))
rc, out, err = unico("update", "customers", "f2", '{"email":"eve@example.com"}')
expect(rc == 0, "unico's update of a foreign row: rc %d %s" % (rc, err))
f2 = row("customers", "cid = %s", "f2")
expect(f2 is not None and f2.unico_v == 1 and f2.unico_state == 1
       and f2.unico_meta is not None and f2.email == "eve@example.com"
       and f2.name == "clash",
       "the foreign row after unico wrote it: %s" % (f2,))
rc, out, err = unico("insert", "customers",
                     '{"cid":"c96","email":"eve@example.com"}')
expect(rc == 3 and '"f2"' in out + err,
       "the value unico's update claimed for a foreign row: rc %d %s"
       % (rc, out + err))

# 6. consistent
rc, out, err = unico("check")
chk = json.loads(out or "{}")
expect(rc == 0 and chk.get("violations_total") == 0
       and "bare_rows" not in chk,
       "check: rc %d %s %s" % (rc, out, err))

cluster.shutdown()
if failures:
    print("native_cassandra: %d failure(s)" % len(failures))
    sys.exit(1)
print("native_cassandra: ok")
