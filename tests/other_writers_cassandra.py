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
    rows holding one value.

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

cluster.shutdown()
if failures:
    print("other_writers_cassandra: %d failure(s)" % len(failures))
    sys.exit(1)
print("other_writers_cassandra: ok")
