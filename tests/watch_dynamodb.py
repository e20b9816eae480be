#!/usr/bin/env python3
"""watch_dynamodb.py - `unico watch` on DynamoDB Streams (issue 36 part 2):
writes behind unico's back, seen as they happen.

Run under tests/support/dynamodb_local.sh (UNICO_TEST_STORE_BASE is a
DynamoDB Local endpoint, with dummy credentials):

    watch_dynamodb.py UNICO_BINARY

Steps:
  1  a table whose stream is off: watch exits 1, saying the awscli
     command and the URL option that turn it on;
  2  schema apply with ?streams=on; unico's own writes (inserts, an
     update, a delete, a limit group filled to its limit) while watch
     runs: no line;
  3  awscli writes a duplicate email and a fresh unclaimed one, and a row
     over a limit: each reported within 5 s with its kind, constraint and
     value (the duplicate naming its owner); SIGTERM: exit 0, the counts;
  4  restart from the checkpoint with --repair: nothing reported again; a
     fresh unclaimed email written by awscli is claimed ("repaired":
     true): lookup finds the row, check reports nothing about it, and a
     unico insert of it by another record is refused (exit 3); the
     duplicate written meanwhile cannot be claimed ("repaired": false);
  5  unico serve --watch from a copy of that checkpoint: an unclaimed
     email written by awscli is counted in /metrics
     (unico_drift_total{table="users",kind="unclaimed_value"} 1) within 5 s,
     a unico insert through the HTTP API is not; SIGTERM: exit 0, its
     checkpoint moved on;
  6  check --since (Cassandra's write times) is refused here: unsupported,
     exit 1, saying the store keeps no write times.
Every failed expectation is printed; the exit code is 1 if any failed.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

UNICO = sys.argv[1] if len(sys.argv) > 1 else "build/unico"
BASE = os.environ.get("UNICO_TEST_STORE_BASE", "")
if not BASE.startswith("dynamodb://"):
    sys.exit("watch_dynamodb: UNICO_TEST_STORE_BASE must be a dynamodb:// "
             "URL (run under tests/support/dynamodb_local.sh)")
AWS = shutil.which("aws", path="/usr/bin:/usr/local/bin") or shutil.which("aws")
if not AWS:
    sys.exit("watch_dynamodb: awscli is not installed (scripts/deps.sh)")
ENDPOINT = "http://" + BASE[len("dynamodb://"):].split("/")[0]
RUN = "wa%d" % os.getpid()
PREFIX = RUN + "_"
URL = "%sunico_%s?table_prefix=%s&streams=on" % (BASE, RUN, PREFIX)
TMP = tempfile.mkdtemp(prefix="unico-watch-")
CP = os.path.join(TMP, "watch.checkpoint")
DDL = """
CREATE TABLE users (id text PRIMARY KEY, email text, team text,
  CONSTRAINT users_email UNIQUE (email),
  CONSTRAINT team_size LIMIT 2 PER (team));
"""
failures = []
step = "start"


def fail(msg):
    failures.append("%s: %s" % (step, msg))
    print("FAIL: %s: %s" % (step, msg), flush=True)
    if os.environ.get("UNICO_TEST_FAIL_FAST"):  # (the mutation check)
        sys.exit(1)


def expect(cond, msg):
    if not cond:
        fail(msg)


def unico(*args, url=URL, stdin=None):
    p = subprocess.run([UNICO, "--store", url] + list(args), input=stdin,
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def aws(*args):
    env = dict(os.environ, AWS_DEFAULT_REGION="us-east-1")
    p = subprocess.run([AWS, "--endpoint-url", ENDPOINT, "--output", "json",
                        "dynamodb"] + list(args), capture_output=True,
                       text=True, timeout=120, env=env)
    if p.returncode:
        raise RuntimeError("aws %s: %s" % (" ".join(args), p.stderr))
    return json.loads(p.stdout) if p.stdout.strip() else {}


def put(key, email, team=None):
    it = {"id": {"S": key}, "email": {"S": email}}
    if team:
        it["team"] = {"S": team}
    aws("put-item", "--table-name", PREFIX + "users", "--item", json.dumps(it))


class Watch:
    """`unico watch` running, its stdout lines gathered by a thread."""

    def __init__(self, *extra):
        self.p = subprocess.Popen(
            [UNICO, "--store", URL, "watch", "--checkpoint", CP,
             "--poll-ms", "200"] + list(extra),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.arrived = []  # when each line came
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            self.arrived.append(time.time())
            self.lines.append(line)

    def findings(self):
        out = []
        for i, line in enumerate(list(self.lines)):
            try:
                o = json.loads(line)
            except ValueError:
                fail("not a JSON line: %r" % line)
                continue
            if "kind" in o:
                o["_at"] = self.arrived[i]
                out.append(o)
        return out

    def wait_for(self, n, seconds):
        """Wait until n findings are there (at most seconds)."""
        end = time.time() + seconds
        while time.time() < end and len(self.findings()) < n:
            time.sleep(0.05)
        return self.findings()

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(timeout=60)
        self.t.join(timeout=10)
        err = self.p.stderr.read()
        return rc, err


def by_key(fs):
    return {json.dumps(f.get("key")) + f.get("kind", ""): f for f in fs}


def step1_stream_off():
    global step
    step = "step 1 (stream off)"
    off = "%sunico_%s_off?table_prefix=%soff_" % (BASE, RUN, RUN)
    rc, out, err = unico("schema", "apply", "-", url=off, stdin=DDL)
    expect(rc == 0, "schema apply without streams: rc %d %s" % (rc, err))
    rc, out, err = unico("watch", url=off)
    expect(rc == 1, "watch on a table without a stream: rc %d, want 1" % rc)
    want = ("aws dynamodb update-table --table-name %soff_users "
            "--stream-specification StreamEnabled=true" % RUN)
    expect(want in err, "the message says the awscli command: %r" % err)
    expect("streams=on" in err, "the message names ?streams=on: %r" % err)
    expect(json.loads(out).get("error") == "unsupported", "error: %r" % out)
    lmdb = "lmdb:" + os.path.join(TMP, "lmdb")
    rc, out, err = unico("watch", url=lmdb)
    expect(rc == 1 and "no change stream" in err,
           "watch on the embedded store: rc %d %r" % (rc, err))
    bad = os.path.join(TMP, "bad.checkpoint")
    with open(bad, "w") as f:
        f.write("{not json")
    rc, out, err = unico("watch", "--checkpoint", bad)
    expect(rc == 1 and "cursor is not JSON" in err,
           "a checkpoint that is not one: rc %d %r" % (rc, err))
    rc, out, err = unico("watch", "--poll-ms", "5")
    expect(rc == 1 and "--poll-ms" in err, "--poll-ms 5: rc %d %r" % (rc, err))


def step2_own_writes(w):
    global step
    step = "step 2 (unico's own writes)"
    for rec in ({"id": "u1", "email": "a@x", "team": "t1"},
                {"id": "u2", "email": "b@x", "team": "t1"},
                {"id": "u3", "email": "c@x"}):
        rc, out, err = unico("insert", "users", json.dumps(rec))
        expect(rc == 0, "insert %s: rc %d %s" % (rec["id"], rc, err))
    rc, out, err = unico("update", "users", "u3", '{"email":"c2@x"}')
    expect(rc == 0, "update u3: rc %d %s" % (rc, err))
    rc, out, err = unico("delete", "users", "u3")
    expect(rc == 0, "delete u3: rc %d %s" % (rc, err))


def step3_other_writes(w):
    global step
    step = "step 3 (awscli's writes)"
    done = {}  # key -> when awscli had its answer (the write was made)
    put("o1", "a@x")             # a duplicate of u1's
    done["o1"] = time.time()
    put("o2", "fresh@x")         # nobody claims it
    done["o2"] = time.time()
    put("o3", "d@x", team="t1")  # a third member of a group limited to 2
    done["o3"] = time.time()
    fs = w.wait_for(3, 5.0)
    keys = by_key(fs)
    dup = keys.get('"o1"claim_owner_mismatch')
    expect(dup is not None, "the duplicate reported: %r" % fs)
    if dup:
        expect(dup.get("constraint") == "users_email" and
               dup.get("value") == ["a@x"] and dup.get("owner") == "u1" and
               dup.get("table") == "users", "the duplicate's line: %r" % dup)
    fresh = keys.get('"o2"unclaimed_value')
    expect(fresh is not None and fresh.get("value") == ["fresh@x"],
           "the fresh value reported: %r" % fs)
    over = keys.get('"o3"over_limit')
    expect(over is not None and over.get("constraint") == "team_size" and
           over.get("value") == ["t1"], "the limit reported: %r" % fs)
    for f in fs:
        if f.get("key") in done:
            took = f["_at"] - done[f["key"]]
            print("%s (%s) reported %.2f s after its write" % (f["key"], f["kind"], took))
            expect(took <= 5.0, "%s reported within 5 s of its write (%.1f s)"
                   % (f["key"], took))
    time.sleep(1.5)  # (a line about unico's own writes would be here now)
    fs = w.findings()
    own = [f for f in fs if f.get("key") in ("u1", "u2", "u3")]
    expect(not own, "no line about unico's own writes: %r" % own)
    rc, err = w.stop()
    expect(rc == 0, "watch ends 0 on SIGTERM: rc %d %s" % (rc, err))
    last = json.loads(w.lines[-1]) if w.lines else {}
    expect(last.get("findings") == len(fs) and last.get("changes", 0) >= 8,
           "the counts at exit: %r (findings %d)" % (last, len(fs)))
    expect(os.path.exists(CP), "the checkpoint is written")
    return len(fs)


def step4_restart_repair():
    global step
    step = "step 4 (restart, --repair)"
    w = Watch("--repair")
    time.sleep(2.0)
    expect(not w.findings(), "nothing reported again after a restart "
           "from the checkpoint: %r" % w.findings())
    put("o4", "new@x")
    put("o5", "b@x")  # u2's: cannot be claimed
    fs = w.wait_for(2, 7.0)
    keys = by_key(fs)
    new = keys.get('"o4"unclaimed_value')
    expect(new is not None and new.get("repaired") is True,
           "the fresh value claimed: %r" % fs)
    dup = keys.get('"o5"claim_owner_mismatch')
    expect(dup is not None and dup.get("repaired") is False,
           "the duplicate left: %r" % fs)
    rc, err = w.stop()
    expect(rc == 0, "watch --repair ends 0: rc %d %s" % (rc, err))
    rc, out, err = unico("lookup", "users", "users_email", "new@x")
    expect(rc == 0 and json.loads(out).get("pk") == "o4",
           "lookup finds the claimed row: rc %d %s" % (rc, out))
    rc, out, err = unico("check")
    expect("new@x" not in out and '"o4"' not in out,
           "check says nothing about the claimed row: %s" % out)
    rc, out, err = unico("insert", "users", '{"id":"u9","email":"new@x"}')
    expect(rc == 3 and json.loads(out).get("owner") == "o4",
           "another record's insert of the claimed value refused: rc %d %s"
           % (rc, out))


def metric(base, name):
    """The /metrics lines starting with name."""
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return [l for l in text.splitlines() if l.startswith(name)]


def step5_serve_watch():
    global step
    step = "step 5 (serve --watch)"
    cp2 = CP + ".serve"
    shutil.copyfile(CP, cp2)
    before = open(cp2).read()
    p = subprocess.Popen([UNICO, "--store", URL, "serve", "--listen",
                          "127.0.0.1:0", "--access-log", "off", "--watch",
                          "--watch-checkpoint", cp2],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        base = json.loads(p.stdout.readline())["listen"]
        want = 'unico_drift_total{table="users",kind="unclaimed_value"} 1'
        put("o6", "srv@x")
        req = urllib.request.Request(
            base + "/v1/users", data=b'{"id":"u7","email":"u7@x"}',
            headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            expect(r.status == 201, "POST /v1/users: %d" % r.status)
        end, lines = time.time() + 5.0, []
        while time.time() < end:
            lines = metric(base, "unico_drift_total{")
            if want in lines:
                break
            time.sleep(0.1)
        time.sleep(1.0)  # (a count of unico's own insert would be here now)
        lines = metric(base, "unico_drift_total{")
        expect(lines == [want], "/metrics counts the drift, and only it: %r"
               % lines)
        up = metric(base, "unico_drift_watch_up ")
        expect(up == ["unico_drift_watch_up 1"], "the watch is up: %r" % up)
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=60)
    err = p.stderr.read()
    expect(rc == 0, "serve ends 0: rc %d %s" % (rc, err[-2000:]))
    expect("drift: " in err and '"o6"' in err, "the drift is logged: %r"
           % err[-2000:])
    expect(open(cp2).read() != before, "serve's checkpoint moved on")


def step6_since_refused():
    """check --since needs write times, which DynamoDB items do not carry:
    refused (unsupported, exit 1) saying so, nothing read."""
    global step
    step = "check --since refused"
    rc, out, err = unico("check", "--since", "2026-11-29T03:00:00Z")
    j = json.loads(out or "{}")
    expect(rc == 1 and j.get("error") == "unsupported" and
           "dynamodb store keeps no write times" in err,
           "check --since on DynamoDB: rc %d %s %s" % (rc, out, err))


def main():
    global step
    try:
        step1_stream_off()
        step = "schema apply (streams=on)"
        rc, out, err = unico("schema", "apply", "-", stdin=DDL)
        expect(rc == 0, "schema apply: rc %d %s" % (rc, err))
        desc = aws("describe-table", "--table-name", PREFIX + "users")
        expect(desc["Table"].get("StreamSpecification", {}).get("StreamEnabled"),
               "streams=on turned the stream on: %r" % desc)
        w = Watch()
        time.sleep(1.0)
        step2_own_writes(w)
        step3_other_writes(w)
        step4_restart_repair()
        step5_serve_watch()
        step6_since_refused()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("watch_dynamodb: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
