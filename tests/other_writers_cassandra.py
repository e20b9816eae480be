#!/usr/bin/env python3
"""other_writers_cassandra.py - "other writers" on Cassandra (issue 37):
an independent client (Debian's python3-cassandra, the DataStax driver)
writes, updates, deletes and expires rows of the native tables between
unico's operations, and after each step the suite checks that

  - no column unico did not change differs from what the other client
    left (static columns, TTLs, columns of the row unico did not write);
  - lookups and conflicts name only owners that hold the value;
  - a value whose owner is gone (deleted, changed, expired) can be taken;
  - check tells the truth, and repair never picks a winner between two
    rows holding one value;

and that the tables people have are adopted or refused saying why: a
static column, a counter table, a quoted mixed-case column, a partition
key of two columns; and that a timestamp outside years 0 to 9999 is
refused up front.

Run under tests/support/cassandra_run.sh (fake or live), which sets
UNICO_TEST_STORE_BASE to a cassandra:// URL ending in "table=":

    other_writers_cassandra.py UNICO_BINARY

Each step is named ("step static-1", ...); docs/native-tables.md, "Other
writers on Cassandra", names the step that shows each guarantee. Every
failed expectation is printed; the exit code is 1 if any failed.
"""
import json
import os
import subprocess
import sys
import time
from urllib.parse import urlsplit

try:
    from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
    from cassandra.policies import WhiteListRoundRobinPolicy
    from cassandra import ConsistencyLevel
except ImportError:
    sys.exit("other_writers_cassandra: python3-cassandra is not installed "
             "(scripts/deps.sh installs Debian's python3-cassandra)")

UNICO = sys.argv[1] if len(sys.argv) > 1 else "build/unico"
BASE = os.environ.get("UNICO_TEST_STORE_BASE", "")
if not BASE.startswith("cassandra://") or not BASE.endswith("table="):
    sys.exit("other_writers_cassandra: UNICO_TEST_STORE_BASE must be a "
             "cassandra:// URL ending in table= (run under "
             "tests/support/cassandra_run.sh)")
parts = urlsplit(BASE)
HOST, PORT = parts.hostname, parts.port or 9042
KS = parts.path.strip("/")
RUN = "w%d" % os.getpid()
PREFIX = RUN + "_"
URL = "%s%s&table_prefix=%s" % (BASE, RUN, PREFIX)
failures = []
step_name = "start"
GRACE_S = 5  # the default grace period (docs/cassandra.md)


def step(name):
    global step_name
    step_name = name
    print("step", name)


def fail(msg):
    failures.append("%s: %s" % (step_name, msg))
    print("FAIL: step %s: %s" % (step_name, msg))
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


def T(table):
    return '%s."%s%s"' % (KS, PREFIX, table)


def q(cql, *args):
    return list(db.execute(cql, args))


def one(cql, *args):
    rows = q(cql, *args)
    return rows[0] if rows else None


def check():
    """check's exit code and report (the one under "report" when it
    fails), and its violations as sorted (kind, key) pairs."""
    rc, out, err = unico("check")
    j = json.loads(out or "{}")
    rep = j.get("report", j)
    kinds = sorted((v["kind"], v["key"]) for v in rep.get("violations", []))
    return rc, rep, kinds, out + err


def lookup(table, cons, value):
    rc, out, err = unico("lookup", table, cons, value)
    return rc, out + err


def apply_ddl(ddl):
    return unico("schema", "apply", "-", stdin=ddl)


SCHEMA = ""


def add_table(ddl):
    """Adds ddl to the schema and applies it; the apply's answer."""
    global SCHEMA
    rc, out, err = apply_ddl(SCHEMA + ddl)
    if rc == 0:
        SCHEMA += ddl
    return rc, out, err


# unico's first open makes the keyspace the driver writes in
rc, out, err = unico("schema", "show")
if rc not in (0, 2):
    sys.exit("other_writers_cassandra: the store does not open: rc %d %s %s"
             % (rc, out, err))

# ---------------------------------------------------------------------------
# static columns (item 3): a static cell is the partition's; unico never
# writes one. A DDL declaring it is refused, saying why; one that leaves it
# out adopts the table, and unico's writes keep the partition's value.
step("static-1")
db.execute("CREATE TABLE %s (tenant text, ts timestamp, id text, owner text "
           "static, code text, PRIMARY KEY ((tenant), ts, id))" % T("events"))
ins = "INSERT INTO %s (tenant, ts, id, owner, code) VALUES (%%s, %%s, %%s, %%s, %%s)" \
    % T("events")
db.execute(ins, ("t1", 1000, "a", "alice", "c1"))
db.execute(ins, ("t2", 1000, "b", "bob", "c2"))
rc, out, err = add_table(
    "CREATE TABLE events (tenant text, ts timestamp, id text, owner text, "
    "code text, PRIMARY KEY ((tenant), ts, id), UNIQUE (code));")
expect(rc == 1 and "owner" in err and "static" in err and "partition" in err,
       "a DDL declaring a static column: rc %d %s %s" % (rc, out, err))
r = one("SELECT owner, code FROM %s WHERE tenant = 't1' AND ts = 1000 AND id = 'a'"
        % T("events"))
expect(r is not None and r.owner == "alice" and r.code == "c1",
       "the refused apply changed the row: %s" % (r,))

step("static-2")
rc, out, err = add_table(
    "CREATE TABLE events (tenant text, ts timestamp, id text, code text, "
    "PRIMARY KEY ((tenant), ts, id), UNIQUE (code));")
expect(rc == 0, "the table adopted without its static column: rc %d %s %s"
       % (rc, out, err))
rc, out, err = unico("insert", "events",
                     '{"tenant":"t1","ts":2000,"id":"n","code":"c3"}')
expect(rc == 0, "an insert into the partition: rc %d %s %s" % (rc, out, err))
rc, out, err = unico("update", "events", "t1", "1000", "a", '{"code":"c4"}')
expect(rc == 0, "an update in the partition: rc %d %s %s" % (rc, out, err))
for r in q("SELECT id, owner FROM %s WHERE tenant = 't1'" % T("events")):
    expect(r.owner == "alice", "row %s of partition t1 has owner %r after "
           "unico's writes" % (r.id, r.owner))
rc, out, err = unico("insert", "events",
                     '{"tenant":"t1","ts":3000,"id":"m","code":"c2"}')
expect(rc == 3 and '"b"' in out, "the value of the adopted row b: rc %d %s"
       % (rc, out))

# a partition left with only its static cell (its rows deleted by the other
# client) is no record: check and scans pass it by (item 10)
step("static-3")
db.execute("DELETE FROM %s WHERE tenant = 't2' AND ts = 1000 AND id = 'b' IF EXISTS"
           % T("events"))
rc, rep, kinds, out = check()
expect(rc == 0 and kinds == [], "check with a static-only partition: rc %d %s"
       % (rc, out))
rc, out, err = unico("insert", "events",
                     '{"tenant":"t3","ts":1,"id":"z","code":"c2"}')
expect(rc == 0, "the value of the deleted row b: rc %d %s %s" % (rc, out, err))
r = one("SELECT owner FROM %s WHERE tenant = 't2'" % T("events"))
expect(r is not None and r.owner == "bob", "the static-only partition: %s" % (r,))

# ---------------------------------------------------------------------------
# TTLs (item 4): adoption and every later write keep the row's expiry
step("ttl-1")
db.execute("CREATE TABLE %s (id text PRIMARY KEY, code text, note text)" % T("sess"))
db.execute("INSERT INTO %s (id, code, note) VALUES ('s1', 'k1', 'n1') USING TTL 600"
           % T("sess"))
db.execute("INSERT INTO %s (id, code, note) VALUES ('s2', 'k2', 'n2') USING TTL 3"
           % T("sess"))
db.execute("INSERT INTO %s (id, code, note) VALUES ('s3', 'k3', 'n3')" % T("sess"))
rc, out, err = add_table(
    "CREATE TABLE sess (id text PRIMARY KEY, code text, note text, UNIQUE (code));")
expect(rc == 0, "adoption of sess: rc %d %s %s" % (rc, out, err))


def ttls(pk):
    return one("SELECT ttl(code), ttl(note), ttl(unico_meta) FROM %s WHERE id = %%s"
               % T("sess"), pk)


r = ttls("s1")
expect(r is not None and all(x is not None and 500 < x <= 600 for x in r),
       "ttl(code), ttl(note), ttl(unico_meta) of s1 after adoption: %s" % (r,))
r = ttls("s3")
expect(r is not None and all(x is None for x in r),
       "a row without TTL got one: %s" % (r,))

step("ttl-2")
rc, out, err = unico("update", "sess", "s1", '{"note":"n1b"}')
expect(rc == 0, "an update of s1: rc %d %s %s" % (rc, out, err))
r = ttls("s1")
expect(r is not None and all(x is not None and 500 < x <= 600 for x in r),
       "ttl(code), ttl(note), ttl(unico_meta) of s1 after an update: %s" % (r,))
rc, out, err = unico("update", "sess", "s2", '{"note":"n2b"}')
expect(rc == 0, "an update of s2: rc %d %s %s" % (rc, out, err))
time.sleep(3.5)
r = one("SELECT * FROM %s WHERE id = 's2'" % T("sess"))
expect(r is None, "s2 outlived its TTL: %s" % (r,))
rc, out, err = unico("insert", "sess", '{"id":"s4","code":"k2"}')
expect(rc == 0, "the value of the expired s2: rc %d %s %s" % (rc, out, err))
rc, out = lookup("sess", "sess_code_key", "k2")
expect(rc == 0 and '"s4"' in out, "lookup of k2: rc %d %s" % (rc, out))

# cells of one row with TTLs of their own: a rewrite leaves the cells it
# does not change as they are, their TTL with them
step("ttl-3")
db.execute("INSERT INTO %s (id, code, note) VALUES ('s5', 'k5', 'n5') USING TTL 600"
           % T("sess"))
db.execute("UPDATE %s USING TTL 300 SET note = 'n5' WHERE id = 's5' IF EXISTS"
           % T("sess"))
db.execute("INSERT INTO %s (id, code, note) VALUES ('s6', 'k6', 'n6')" % T("sess"))
db.execute("UPDATE %s USING TTL 300 SET note = 'n6' WHERE id = 's6' IF EXISTS"
           % T("sess"))
rc, out, err = unico("repair")  # stamps the bare rows s5, s6
expect(rc == 0, "repair of the bare rows s5, s6: rc %d %s %s" % (rc, out, err))
r = ttls("s5")
expect(r is not None and r[0] is not None and 500 < r[0] <= 600 and
       r[1] is not None and 200 < r[1] <= 300,
       "ttl(code), ttl(note) of s5 after its stamp: %s" % (r,))
r = ttls("s6")
expect(r is not None and r[0] is None and r[1] is not None and
       200 < r[1] <= 300,
       "ttl(code), ttl(note) of s6 after its stamp: %s" % (r,))
rc, out, err = unico("update", "sess", "s5", '{"code":"k5b"}')
expect(rc == 0, "an update of s5's code: rc %d %s %s" % (rc, out, err))
r = ttls("s5")
expect(r is not None and r[0] is not None and 500 < r[0] <= 600 and
       r[1] is not None and 200 < r[1] <= 300,
       "ttl(code), ttl(note) of s5 after an update of code: %s" % (r,))
r = one("SELECT code, note FROM %s WHERE id = 's5'" % T("sess"))
expect(r is not None and r.code == "k5b" and r.note == "n5",
       "s5 after the update: %s" % (r,))
# one handle (the library, as unico serve keeps it), two updates in a
# row: the note's cell and its TTL are left alone by both
# (not where the library is a sanitizer build, which Python's ctypes
# cannot load: the plain build's run does it, tests/CMakeLists.txt)
if os.environ.get("UNICO_NO_PYTHON_LIB"):
    print("step ttl-3: the two updates by one library handle are left to "
          "the plain build (%s)" % os.environ["UNICO_NO_PYTHON_LIB"])
else:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "python"))
    os.environ.setdefault("UNICO_LIBRARY", os.path.join(
        os.path.dirname(os.path.abspath(UNICO)), "libunico.so"))
    import unico as unico_lib  # noqa: E402
    with unico_lib.Database(URL) as h:
        h.update("sess", "s5", {"code": "k5c"})
        h.update("sess", "s5", {"code": "k5d"})
    r = ttls("s5")
    expect(r is not None and r[0] is not None and 500 < r[0] <= 600 and
           r[1] is not None and 200 < r[1] <= 300,
           "ttl(code), ttl(note) of s5 after two updates by one handle: %s" % (r,))

# ---------------------------------------------------------------------------
# values changed or gone behind unico's back (items 5, 6): lookups and
# conflicts name only owners that hold the value; the value can be taken
step("changed-1")
rc, out, err = add_table(
    "CREATE TABLE users (id text PRIMARY KEY, email text, name text, "
    "city text, UNIQUE (email));")
expect(rc == 0, "schema apply of users: rc %d %s %s" % (rc, out, err))
T0 = time.time()
for pk, email in (("u1", "e1@x"), ("u2", "e2@x"), ("u3", "e3@x")):
    rc, out, err = unico("insert", "users",
                         '{"id":"%s","email":"%s","name":"n","city":"c"}'
                         % (pk, email))
    expect(rc == 0, "insert %s: rc %d %s %s" % (pk, rc, out, err))
# an LWT by the other client changes u1's email
res = db.execute("UPDATE %s SET email = 'z1@x' WHERE id = 'u1' IF EXISTS" % T("users"))
expect(res.one()[0] is True, "the driver's LWT did not apply")
rc, out = lookup("users", "users_email_key", "e1@x")
expect(rc == 2, "lookup of the value u1 no longer holds: rc %d %s" % (rc, out))
rc, out, err = unico("insert", "users", '{"id":"u4","email":"e1@x"}')
expect(rc == 0, "the value u1 gave up behind unico's back: rc %d %s %s"
       % (rc, out, err))
rc, out = lookup("users", "users_email_key", "e1@x")
expect(rc == 0 and '"u4"' in out, "lookup of e1@x: rc %d %s" % (rc, out))

# a cell TTL ends u2's email
step("changed-2")
db.execute("UPDATE %s USING TTL 2 SET email = 'e2@x' WHERE id = 'u2'" % T("users"))
time.sleep(2.5)
r = one("SELECT email, name FROM %s WHERE id = 'u2'" % T("users"))
expect(r is not None and r.email is None and r.name == "n",
       "u2 after its email expired: %s" % (r,))
rc, out = lookup("users", "users_email_key", "e2@x")
expect(rc == 2, "lookup of the value that expired: rc %d %s" % (rc, out))
rc, out, err = unico("insert", "users", '{"id":"u5","email":"e2@x"}')
expect(rc == 0, "the value whose cell expired: rc %d %s %s" % (rc, out, err))

# u3 deleted by the other client: its value is free once the grace period
# of u3's own write has passed (before, a claim whose owner row is absent
# may be a write still in flight: busy, exit 6, never a conflict)
step("changed-3")
db.execute("DELETE FROM %s WHERE id = 'u3'" % T("users"))
rc, out = lookup("users", "users_email_key", "e3@x")
expect(rc == 2, "lookup of a deleted owner's value: rc %d %s" % (rc, out))
deadline = T0 + GRACE_S + 1
while True:
    rc, out, err = unico("insert", "users", '{"id":"u6","email":"e3@x"}')
    if rc != 6 or time.time() > deadline:
        break
    time.sleep(0.5)
expect(rc == 0, "the value of the deleted u3: rc %d %s %s" % (rc, out, err))

# check tells the truth about the value u1 now holds (z1@x, nobody's
# claim: a violation until repaired); repair claims it for u1. The
# entries u1 and u2 listed for the values they gave up (e1@x, e2@x) are
# gone already: the inserts of u4 and u5 took those claims over, and the
# takeover of a claim whose owner row no longer holds the value takes it
# out of the owner's list (docs/protocol.md, "history 2915"), so check
# reports no stale claim for them
step("changed-4")
Z1 = '["u","users","users_email_key","z1@x"]'
rc, rep, kinds, out = check()
# (each value once per kind: issue 37 item 15)
expect(rc == 7 and kinds == [("missing_claim", Z1)],
       "check after the other writer's changes: rc %d %s" % (rc, out))
rc, out, err = unico("repair")
expect(rc == 0, "repair of u1's drift: rc %d %s %s" % (rc, out, err))
rc, out = lookup("users", "users_email_key", "z1@x")
expect(rc == 0 and '"u1"' in out, "lookup of z1@x after repair: rc %d %s"
       % (rc, out))
rc, out, err = unico("insert", "users", '{"id":"u7","email":"z1@x"}')
expect(rc == 3 and '"u1"' in out, "the value repair claimed for u1: rc %d %s"
       % (rc, out))
rc, rep, kinds, out = check()
expect(rc == 0 and kinds == [], "check after repair: rc %d %s" % (rc, out))

# ---------------------------------------------------------------------------
# other columns (item 2, Cassandra side): a write through unico never
# undoes another client's write of a column it does not change
step("columns-1")
res = db.execute("UPDATE %s SET city = 'c9', name = 'n9' WHERE id = 'u4' IF EXISTS"
                 % T("users"))
expect(res.one()[0] is True, "the driver's LWT did not apply")
rc, out, err = unico("update", "users", "u4", '{"email":"e4@x"}')
expect(rc == 0, "an update of u4: rc %d %s %s" % (rc, out, err))
r = one("SELECT email, name, city FROM %s WHERE id = 'u4'" % T("users"))
expect(r is not None and (r.email, r.name, r.city) == ("e4@x", "n9", "c9"),
       "u4 after unico's update: %s" % (r,))

# ---------------------------------------------------------------------------
# two rows holding one value (item 8): repair reports the duplicate and
# claims neither; check says so
step("duplicate-1")
uins = "INSERT INTO %s (id, email, name) VALUES (%%s, %%s, %%s)" % T("users")
db.execute(uins, ("x1", "dup@x", "one"))
db.execute(uins, ("x2", "dup@x", "two"))
rc, out, err = unico("repair")
expect(rc != 0 and "x1" in out and "x2" in out,
       "repair with two rows holding dup@x: rc %d %s %s" % (rc, out, err))
for pk in ("x1", "x2"):
    r = one("SELECT unico_meta FROM %s WHERE id = %%s" % T("users"), pk)
    expect(r is not None and r.unico_meta is None,
           "repair claimed dup@x for %s" % pk)
rc, out = lookup("users", "users_email_key", "dup@x")
expect(rc == 2, "lookup of a value two rows hold: rc %d %s" % (rc, out))
rc, rep, kinds, out = check()
expect(rc == 7 and ("duplicate_value", '["u","users","users_email_key","dup@x"]')
       in kinds, "check with two rows holding dup@x: rc %d %s" % (rc, out))
step("duplicate-2")
res = db.execute("UPDATE %s SET email = 'x2@x' WHERE id = 'x2' IF EXISTS" % T("users"))
rc, out, err = unico("repair")
expect(rc == 0, "repair once the duplicate is gone: rc %d %s %s" % (rc, out, err))
rc, out = lookup("users", "users_email_key", "dup@x")
expect(rc == 0 and '"x1"' in out, "lookup of dup@x after the fix: rc %d %s"
       % (rc, out))

# ---------------------------------------------------------------------------
# timestamps (item 14): one range on every store, years 0 to 9999, refused
# up front (exit 1) and nothing written
step("range-1")
for pk, ts in (("r1", "253402300800000"), ("r2", "-62167219200001"),
               ("r3", "9223372036854775807")):
    rc, out, err = unico("insert", "events",
                         '{"tenant":"t9","ts":%s,"id":"%s","code":"%s"}' % (ts, pk, pk))
    expect(rc == 1 and "outside years 0 to 9999" in out + err,
           "an out-of-range timestamp %s: rc %d %s %s" % (ts, rc, out, err))
rc, out, err = unico("insert", "events",
                     '{"tenant":"t9","ts":"9999-12-31T23:59:59.999Z","id":"r4",'
                     '"code":"r4"}')
expect(rc == 0, "the last timestamp of the range: rc %d %s %s" % (rc, out, err))
rc, out, err = unico("update", "events", "t9", "9999-12-31T23:59:59.999Z", "r4",
                     '{"code":"r5"}')
expect(rc == 0, "an update of the row keyed by it: rc %d %s %s" % (rc, out, err))
ids = sorted(r.id for r in q("SELECT id FROM %s WHERE tenant = 't9'" % T("events")))
expect(ids == ["r4"], "rows of partition t9: %s" % ids)

# ---------------------------------------------------------------------------
# tables people have (items 10, 13): a counter table is refused with a
# clear schema_refused; a quoted mixed-case column is matched when the DDL
# quotes it, refused with both names when it does not (never a second,
# empty column beside it)
step("counter-1")
db.execute("CREATE TABLE %s (id text PRIMARY KEY, hits counter)" % T("hits"))
rc, out, err = apply_ddl(SCHEMA + "CREATE TABLE hits (id text PRIMARY KEY, "
                         "code text, UNIQUE (code));")
expect(rc == 1 and '"schema_refused"' in out and "counter table" in err
       and '"hits"' in err, "adopting a counter table: rc %d %s %s" % (rc, out, err))
cols = sorted(r.column_name for r in q(
    "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s "
    "AND table_name = %s", KS, PREFIX + "hits"))
expect(cols == ["hits", "id"], "the refused counter table was altered: %s" % cols)

step("case-1")
db.execute('CREATE TABLE %s (id text PRIMARY KEY, "userEmail" text)' % T("people"))
db.execute('INSERT INTO %s (id, "userEmail") VALUES (%%s, %%s)' % T("people"),
           ("p1", "same@x"))
db.execute('INSERT INTO %s (id, "userEmail") VALUES (%%s, %%s)' % T("people"),
           ("p2", "other@x"))
rc, out, err = apply_ddl(SCHEMA + "CREATE TABLE people (id text PRIMARY KEY, "
                         "userEmail text, UNIQUE (userEmail));")
expect(rc == 1 and '"useremail"' in err and '"userEmail"' in err,
       "an unquoted name for a quoted column: rc %d %s %s" % (rc, out, err))
cols = sorted(r.column_name for r in q(
    "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s "
    "AND table_name = %s", KS, PREFIX + "people"))
expect("useremail" not in cols, "a second column was added: %s" % cols)
rc, out, err = add_table('CREATE TABLE people (id text PRIMARY KEY, '
                         '"userEmail" text, UNIQUE ("userEmail"));')
expect(rc == 0, "the quoted name: rc %d %s %s" % (rc, out, err))
rc, out, err = unico("insert", "people", '{"id":"p3","userEmail":"same@x"}')
expect(rc == 3 and '"p1"' in out, "the value the quoted column holds: rc %d %s"
       % (rc, out))

# a table with a partition key of two columns (item 12): adopted when the
# DDL says so with Cassandra's form, refused naming the key when it does not
step("partition-1")
db.execute("CREATE TABLE %s (id text, region text, code text, PRIMARY KEY "
           "((id, region)))" % T("sites"))
db.execute("INSERT INTO %s (id, region, code) VALUES ('s1', 'eu', 'k1')" % T("sites"))
db.execute("INSERT INTO %s (id, region, code) VALUES ('s1', 'us', 'k2')" % T("sites"))
rc, out, err = apply_ddl(SCHEMA + "CREATE TABLE sites (id text, region text, "
                         "code text, PRIMARY KEY (id, region), UNIQUE (code));")
expect(rc == 1 and '"region"' in err and "partition key" in err,
       "a DDL whose key is (id, region) on a ((id, region)) table: rc %d %s %s"
       % (rc, out, err))
rc, out, err = add_table("CREATE TABLE sites (id text, region text, code text, "
                         "PRIMARY KEY ((id, region)), UNIQUE (code));")
expect(rc == 0, "the DDL's ((id, region)): rc %d %s %s" % (rc, out, err))
rc, out, err = unico("insert", "sites", '{"id":"s2","region":"eu","code":"k1"}')
expect(rc == 3 and '["s1","eu"]' in out, "the value an adopted row holds: rc %d %s"
       % (rc, out))
rc, out, err = unico("insert", "sites", '{"id":"s2","region":"eu","code":"k3"}')
expect(rc == 0, "an insert: rc %d %s %s" % (rc, out, err))
r = one("SELECT code, unico_state FROM %s WHERE id = 's2' AND region = 'eu'"
        % T("sites"))
expect(r is not None and r.code == "k3" and r.unico_state == 1,
       "the row unico wrote: %s" % (r,))
rc, out, err = unico("update", "sites", "s1", "us", '{"code":"k4"}')
expect(rc == 0, "an update: rc %d %s %s" % (rc, out, err))
kinds_ = sorted((r.column_name, r.kind, r.position) for r in q(
    "SELECT column_name, kind, position FROM system_schema.columns WHERE "
    "keyspace_name = %s AND table_name = %s", KS, PREFIX + "sites")
    if r.kind != "regular")
expect(kinds_ == [("id", "partition_key", 0), ("region", "partition_key", 1)],
       "the key of sites: %s" % kinds_)
rc, out, err = add_table("CREATE TABLE fresh (a text, b int, c text, v text, "
                         "PRIMARY KEY ((a, b), c), UNIQUE (v));")
expect(rc == 0, "a new table with a two-column partition key: rc %d %s %s"
       % (rc, out, err))
kinds_ = sorted((r.column_name, r.kind, r.position) for r in q(
    "SELECT column_name, kind, position FROM system_schema.columns WHERE "
    "keyspace_name = %s AND table_name = %s", KS, PREFIX + "fresh")
    if r.kind != "regular")
expect(kinds_ == [("a", "partition_key", 0), ("b", "partition_key", 1),
                  ("c", "clustering", 0)], "the key unico made: %s" % kinds_)
# (a table an earlier unico made from that form, its first column alone
# the partition key, is still accepted)
db.execute("CREATE TABLE %s (a text, b int, c text, v text, PRIMARY KEY ((a), b, c))"
           % T("older"))
rc, out, err = add_table("CREATE TABLE older (a text, b int, c text, v text, "
                         "PRIMARY KEY ((a, b), c), UNIQUE (v));")
expect(rc == 0, "a ((a), b, c) table under a ((a, b), c) DDL: rc %d %s %s"
       % (rc, out, err))

step("check")
rc, rep, kinds, out = check()
expect(rc == 0 and kinds == [], "check at the end: rc %d %s" % (rc, out))

cluster.shutdown()
if failures:
    print("other_writers_cassandra: %d failure(s)" % len(failures))
    sys.exit(1)
print("other_writers_cassandra: ok")
