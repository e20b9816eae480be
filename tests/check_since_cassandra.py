#!/usr/bin/env python3
"""check_since_cassandra.py - `unico check --since TIMESTAMP` on Cassandra
(issue 36): the audit of only what was written after a time, by the
writers' write times (docs/cassandra.md, "check --since").

Another client (Debian's python3-cassandra) writes bare rows into a
guarded table before and after a time T, one of each holding a value a
record of unico already owns; then

  - check --since T reports the row written after T (claim_owner_mismatch,
    naming it) and not the one written before; a full check reports both;
  - unico's own writes after T are audited and clean (an insert, an
    update: records_audited counts them, no violation);
  - the same T as RFC 3339 text audits the same;
  - progress lines go to standard error;
  - a TIMESTAMP that is not one is a usage error (exit 1) saying which
    forms are taken, and --since on lmdb is refused (exit 1);
  - on a table of N rows (UNICO_SINCE_ROWS, 6000; 20000 for the figure in
    docs/cassandra.md) of which 100 are recent, --since audits the 100
    and reads no row's values: the full check and it are timed.

Run under tests/support/cassandra_run.sh (fake or live):

    check_since_cassandra.py UNICO_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit

try:
    from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
    from cassandra.concurrent import execute_concurrent_with_args
    from cassandra.policies import WhiteListRoundRobinPolicy
    from cassandra import ConsistencyLevel
except ImportError:
    sys.exit("check_since_cassandra: python3-cassandra is not installed "
             "(scripts/deps.sh installs Debian's python3-cassandra)")

UNICO = sys.argv[1] if len(sys.argv) > 1 else "build/unico"
BASE = os.environ.get("UNICO_TEST_STORE_BASE", "")
if not BASE.startswith("cassandra://") or not BASE.endswith("table="):
    sys.exit("check_since_cassandra: UNICO_TEST_STORE_BASE must be a "
             "cassandra:// URL ending in table= (run under "
             "tests/support/cassandra_run.sh)")
parts = urlsplit(BASE)
HOST, PORT = parts.hostname, parts.port or 9042
KS = parts.path.strip("/")
RUN = "s%d" % os.getpid()
PREFIX = RUN + "_"
URL = "%s%s&table_prefix=%s" % (BASE, RUN, PREFIX)
NROWS = int(os.environ.get("UNICO_SINCE_ROWS", "6000"))
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


def unico(*args, stdin=None, url=URL):
    p = subprocess.run([UNICO, "--store", url] + list(args), input=stdin,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def report(out):
    j = json.loads(out or "{}")
    return j.get("report", j)


def now_ms():
    return int(time.time() * 1000)


def pause():
    time.sleep(0.05)  # (write times on either side of a time taken here)


rc, out, err = unico("schema", "apply", "-", stdin=(
    "CREATE TABLE users (id text PRIMARY KEY, email text, UNIQUE (email));\n"
    "CREATE TABLE bulk (id text PRIMARY KEY, code text, UNIQUE (code));\n"))
if rc != 0:
    sys.exit("check_since_cassandra: schema apply: rc %d %s %s" % (rc, out, err))
profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([HOST]),
                           consistency_level=ConsistencyLevel.QUORUM)
cluster = Cluster([HOST], port=PORT, protocol_version=4, compression=False,
                  idle_heartbeat_interval=0, schema_metadata_enabled=False,
                  token_metadata_enabled=False,
                  execution_profiles={EXEC_PROFILE_DEFAULT: profile})
db = cluster.connect()
USERS = '%s."%susers"' % (KS, PREFIX)
BULK = '%s."%sbulk"' % (KS, PREFIX)

print("step before")
for i, mail in (("u1", "alice@x"), ("u2", "bob@x")):
    rc, out, err = unico("insert", "users", json.dumps({"id": i, "email": mail}))
    expect(rc == 0, "insert %s: rc %d %s %s" % (i, rc, out, err))
db.execute("INSERT INTO %s (id, email) VALUES ('old1', 'bob@x')" % USERS)
pause()
T = now_ms()
pause()

print("step after")
rc, out, err = unico("insert", "users", '{"id":"u3","email":"carol@x"}')
expect(rc == 0, "insert u3: rc %d %s %s" % (rc, out, err))
db.execute("INSERT INTO %s (id, email) VALUES ('new1', 'alice@x')" % USERS)
pause()
T2 = now_ms()

print("step since")
rc, out, err = unico("check", "--since", str(T))
rep = report(out)
found = [(v["kind"], v["record"]) for v in rep.get("violations", [])]
expect(rc == 7, "check --since T: rc %d %s %s" % (rc, out, err))
expect(("claim_owner_mismatch", '["users","new1"]') in
       [(k, r.replace('"r",', '')) for k, r in found] or
       any(k == "claim_owner_mismatch" and "new1" in r for k, r in found),
       "the row written after T with alice's email is not reported: %s" % out)
expect(not any("old1" in r for _, r in found),
       "the row written before T is reported by --since T: %s" % out)
expect(not any("u3" in r for _, r in found),
       "unico's own write after T is reported: %s" % out)
expect(rep.get("records_audited", 0) >= 2,
       "u3 and new1 were not both audited: %s" % out)
expect(rep.get("claims_audited", 0) >= 1,
       "the claim unico wrote for u3 after T was not audited: %s" % out)
expect(rep.get("keys_scanned", 0) >= rep.get("records_audited", 0) + 3,
       "the scan did not read every key's write time: %s" % out)
expect("keys' write times read" in err, "no progress on stderr: %r" % err)

print("step rfc3339")
iso = datetime.fromtimestamp(T / 1000, timezone.utc).strftime(
    "%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (T % 1000)
rc2, out2, err2 = unico("check", "--since", iso)
rep2 = report(out2)
expect(rc2 == 7 and rep2.get("records_audited") == rep.get("records_audited")
       and rep2.get("since_ms") == T,
       "--since %s audits otherwise than --since %d: %s / %s" % (iso, T, out2, out))

# the same instant two hours east of UTC
east = datetime.fromtimestamp(T / 1000, timezone(timedelta(hours=2))).strftime(
    "%Y-%m-%d %H:%M:%S.") + "%03d+02:00" % (T % 1000)
rc3, out3, err3 = unico("check", "--since", east)
expect(report(out3).get("since_ms") == T,
       "--since %s is not %d ms: %s %s" % (east, T, out3, err3))

print("step full")
rc, out, err = unico("check")
expect(rc == 7 and "old1" in out and "new1" in out,
       "a full check does not report both rows: rc %d %s" % (rc, out))

print("step own-writes-since")
rc, out, err = unico("check", "--since", str(T2))
rep = report(out)
expect(rc == 0 and rep.get("records_audited") == 0 and rep.get("ok") is True,
       "nothing written after T2, yet: rc %d %s %s" % (rc, out, err))
rc, out, err = unico("insert", "users", '{"id":"u4","email":"dave@x"}')
expect(rc == 0, "insert u4: rc %d %s %s" % (rc, out, err))
rc, out, err = unico("update", "users", "u3", '{"email":"carol2@x"}')
expect(rc == 0, "update u3: rc %d %s %s" % (rc, out, err))
rc, out, err = unico("check", "--since", str(T2))
rep = report(out)
expect(rc == 0 and rep.get("records_audited") == 2 and rep.get("ok") is True
       and rep.get("claims_audited", 0) >= 2,
       "unico's own writes after T2 (u4, u3 updated) audited clean: rc %d %s %s"
       % (rc, out, err))

print("step bad")
for bad in ("yesterday", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z",
            "2026-11-29T03:00:00", "2026-11-29T03:00:00+1:00", "-5", ""):
    rc, out, err = unico("check", "--since", bad)
    expect(rc == 1 and "--since needs a time" in err and
           json.loads(out or "{}").get("error") == "usage",
           "--since %r: rc %d %s %s" % (bad, rc, out, err))
rc, out, err = unico("get", "users", "u1", "--since", str(T))
expect(rc == 1 and "--since applies to check only" in err,
       "--since on get: rc %d %s %s" % (rc, out, err))
with tempfile.TemporaryDirectory() as d:
    rc, out, err = unico("check", "--since", str(T), url="lmdb:" + d)
    expect(rc == 1 and "keeps no write times" in err and
           json.loads(out).get("error") == "unsupported",
           "--since on lmdb: rc %d %s %s" % (rc, out, err))

print("step bulk (%d rows, 100 recent)" % NROWS)
ins = db.prepare("INSERT INTO %s (id, code) VALUES (?, ?)" % BULK)
execute_concurrent_with_args(
    db, ins, [("b%d" % i, "c%d" % i) for i in range(NROWS - 100)],
    concurrency=64)
pause()
TB = now_ms()
pause()
execute_concurrent_with_args(
    db, ins, [("b%d" % i, "c%d" % i) for i in range(NROWS - 100, NROWS)],
    concurrency=64)
t0 = time.time()
rc, out, err = unico("check", "--no-settle")
full_s = time.time() - t0
t0 = time.time()
rcs, outs, errs = unico("check", "--since", str(TB))
since_s = time.time() - t0
reps = report(outs)
expect(rcs == 0 and reps.get("records_audited") == 100 and
       reps.get("unclaimed_values") == 100,
       "--since on the bulk table: rc %d %s %s" % (rcs, outs, errs))
lines = [l for l in errs.splitlines() if "keys' write times read" in l]
expect(len(lines) >= 1 + NROWS // 5000,
       "progress lines every 5000 keys: %r" % errs)
print("figure: %d rows, 100 recent: full check %.1f s (rc %d), check --since "
      "%.1f s, %d keys' write times read, %d records audited"
      % (NROWS, full_s, rc, since_s, reps.get("keys_scanned", -1),
         reps.get("records_audited", -1)))

cluster.shutdown()
if failures:
    print("%d failed" % len(failures))
    sys.exit(1)
print("ok")
