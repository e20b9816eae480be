#!/usr/bin/env python3
"""store_health.py - the embedded store's files taken away or filled up
under a running `unico serve` (issue 32): what the server answers, what
/healthz, /readyz and /metrics say, and that no acknowledged write is lost.

- lock_unlinked: unico.lock deleted (a cleaner of /tmp does it) under a
  log-mode server: another process must not take the store over (which
  replayed and deleted the server's live log, let a duplicate in, and lost
  an acknowledged write at the server's kill -9).
- store_removed, store_removed_plain: the store's directory removed under
  the server: /readyz 503 `store_removed` (/healthz stays 200: the process
  is alive, liveness alone), unico_store_up 0, unico_ready 0, writes 503,
  the exit status 7.
- disk_full: the store on an 8 MiB tmpfs (where mounting one is permitted:
  the server must start on it at all), else a disk made full by the
  LD_PRELOAD library tests/support/nospace_preload.c (PRELOAD): writes
  past a full disk are refused 507 while /readyz says 503 `disk_full`,
  unico_store_degraded 1, /healthz 200 (alive) and reads work; they
  resume once room is freed (/readyz 200 again);
  a stop on a full disk exits 7 (no final checkpoint) and the next open,
  on a full disk, says to free space; every acknowledged write is there
  afterwards.

usage: store_health.py PATH/TO/unico WORKDIR PRELOAD.so [TEST...]

Every HTTP answer is held to docs/openapi.json (tests/support/openapi_check.py)."""

import http.client
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
import openapi_check  # noqa: E402

OPENAPI = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "openapi.json")
SPEC = openapi_check.Spec(OPENAPI)

BIN = os.path.abspath(sys.argv[1])
WORK = os.path.abspath(sys.argv[2])
PRELOAD = os.path.abspath(sys.argv[3])
ONLY = sys.argv[4:]
ENV = dict(os.environ)  # the servers' and commands' (disk_full sets more)

SCHEMA = """
CREATE TABLE users (
  id       text PRIMARY KEY,
  username text,
  CONSTRAINT users_username UNIQUE (username)
);
"""


def check(cond, what, detail=None):
    if not cond:
        frame = sys._getframe(1)
        msg = "%s:%d: %s" % (os.path.basename(frame.f_code.co_filename), frame.f_lineno, what)
        if detail is not None:
            msg += "\n    got: %r" % (detail,)
        raise AssertionError(msg)


class Server:
    def __init__(self, dir, store, *args):
        self.dir = dir
        self.store = store
        self.log_path = os.path.join(dir, "stderr.txt")
        schema = os.path.join(dir, "schema.cql")
        with open(schema, "w") as f:
            f.write(SCHEMA)
        cmd = [BIN, "serve", "--store", store, "--schema", schema,
               "--listen", "127.0.0.1:0"] + list(args)
        self.err = open(self.log_path, "a")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.err, env=ENV)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else b""
        check(line, "server %s did not start" % cmd, self.stderr())
        hp = urllib.parse.urlsplit(json.loads(line)["listen"])
        self.host, self.port = hp.hostname, hp.port

    def stderr(self):
        if not self.err.closed:
            self.err.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc.stdout.close()
        self.err.close()
        return rc


class Resp:
    def __init__(self, status, headers, data, method, target):
        self.status = status
        self.headers = {k.lower(): v for k, v in headers}
        self.data = data
        try:
            self.json = json.loads(data) if data else None
        except ValueError:
            self.json = None
        SPEC.check(method, target, status, self.headers, data)

    def __repr__(self):
        return "<%d %r>" % (self.status, self.data[:400])


def call(srv, method, path, body=None):
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=30)
    headers = {}
    if body is not None:
        body = json.dumps(body)
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    out = Resp(r.status, r.getheaders(), r.read(), method, path)
    conn.close()
    return out


def metric(srv, name):
    r = call(srv, "GET", "/metrics")
    check(r.status == 200, "GET /metrics", r)
    for line in r.data.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    check(False, "no metric %s" % name, r.data[:2000])


def metric_labelled(srv, series):
    """The value of one labelled series (its text up to the value), 0 when absent."""
    r = call(srv, "GET", "/metrics")
    check(r.status == 200, "GET /metrics", r)
    for line in r.data.decode().splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0


def cli(store, *args):
    p = subprocess.run([BIN, "--store", store] + list(args), capture_output=True, text=True, timeout=60,
                       env=ENV)
    return p.returncode, p.stdout + p.stderr


def fresh(name):
    d = os.path.join(WORK, name)
    if os.path.ismount(d):
        subprocess.run(["umount", "-l", d])
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def logs_in(d):
    return sorted(f for f in os.listdir(d) if f.startswith("log-"))


# ---------------------------------------------------------------------------


def test_lock_unlinked():
    top = fresh("lock")
    data = os.path.join(top, "data")
    srv = Server(top, "lmdb:" + data + "?wal=on")
    try:
        r = call(srv, "POST", "/v1/users", {"id": "u1", "username": "alice"})
        check(r.status == 201, "insert u1", r)
        logs = logs_in(data)
        check(logs, "the server's log file", os.listdir(data))
        os.unlink(os.path.join(data, "unico.lock"))
        # another process must not own the store now: busy (exit 6)
        rc, out = cli("lmdb:" + data, "check")
        check(rc == 6 and "log mode" in out, "check refused while the server owns the store", (rc, out))
        rc, out = cli("lmdb:" + data, "insert", "users", '{"id":"u2","username":"alice"}')
        check(rc == 6, "a duplicate through another process refused", (rc, out))
        rc, out = cli("lmdb:" + data + "?wal=on", "get", "users", "u1")
        check(rc == 6, "a log-mode open refused", (rc, out))
        check(logs_in(data) == logs, "the server's log is left alone", os.listdir(data))
        r = call(srv, "POST", "/v1/users", {"id": "u3", "username": "alice"})
        check(r.status == 409, "the server still refuses the duplicate", r)
    finally:
        rc = srv.stop(signal.SIGKILL)
    rc, out = cli("lmdb:" + data, "get", "users", "u1")
    check(rc == 0 and '"alice"' in out, "the acknowledged u1 after kill -9", (rc, out))
    rc, out = cli("lmdb:" + data, "get", "users", "u2")
    check(rc == 2, "no u2", (rc, out))


def store_removed(query):
    top = fresh("removed" + ("-log" if query else "-plain"))
    data = os.path.join(top, "data")
    srv = Server(top, "lmdb:" + data + query)
    try:
        r = call(srv, "POST", "/v1/users", {"id": "u1", "username": "alice"})
        check(r.status == 201, "insert u1", r)
        r = call(srv, "GET", "/healthz")
        check(r.status == 200 and r.json == {"status": "ok"}, "alive first", r)
        check(metric(srv, "unico_store_up") == 1, "unico_store_up 1")
        r = call(srv, "GET", "/readyz")
        check(r.status == 200 and r.json["status"] == "ready", "ready first", r)
        check(metric(srv, "unico_ready") == 1, "unico_ready 1")
        shutil.rmtree(data)
        r = call(srv, "GET", "/healthz")
        check(r.status == 200 and r.json == {"status": "ok"},
              "healthz: still alive with the store removed (liveness alone)", r)
        check(metric(srv, "unico_store_up") == 0, "unico_store_up 0")
        r = call(srv, "GET", "/readyz")
        check(r.status == 503 and r.json["status"] == "not_ready" and r.json["reason"] == "store_removed"
              and "removed" in r.json["message"] and r.headers.get("retry-after") == "1",
              "readyz: 503 store_removed", r)
        check(metric(srv, "unico_ready") == 0, "unico_ready 0")
        check(metric_labelled(srv, 'unico_not_ready{reason="store_removed"}') == 1, "unico_not_ready says why")
        time.sleep(1.1)  # writes check the files at most once a second
        r = call(srv, "POST", "/v1/users", {"id": "u2", "username": "bob"})
        check(r.status == 503 and r.json["error"] == "unavailable" and "removed" in r.json["message"],
              "a write refused once the store is gone", r)
        r = call(srv, "POST", "/v1/users", {"id": "u3", "username": "carol"})
        check(r.status == 503, "and the next", r)
    finally:
        rc = srv.stop()
    check(rc == 7, "the exit status says the store was lost", (rc, srv.stderr()[-600:]))
    check("removed" in srv.stderr(), "stderr says why", srv.stderr()[-600:])


def test_store_removed():
    store_removed("?wal=on")


def test_store_removed_plain():
    store_removed("")


class Disk:
    """Full or not: a real small file system, filled with a file, or the
    LD_PRELOAD library's flag."""

    def __init__(self, top, mnt, real):
        self.real = real
        self.filler = os.path.join(mnt, "filler") if real else os.path.join(top, "full")

    def fill(self):
        if not self.real:
            open(self.filler, "w").close()
            return
        with open(self.filler, "ab") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass

    def free(self):
        os.unlink(self.filler)


def test_disk_full():
    top = fresh("full")
    mnt = os.path.join(top, "fs")
    os.makedirs(mnt)
    # (UNICO_TEST_NO_MOUNT=1: the LD_PRELOAD way even where mount works)
    cmd = ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt]
    if os.environ.get("UNICO_TEST_NO_MOUNT") == "1":
        cmd = ["false"]
    p = subprocess.run(cmd, capture_output=True)
    real = p.returncode == 0
    if not real:
        print("  disk_full: cannot mount a tmpfs here (%s): a disk full by LD_PRELOAD"
              % p.stderr.decode().strip())
        ENV.update(LD_PRELOAD=PRELOAD, UNICO_NOSPACE_DIR=os.path.join(mnt, "data"),
                   UNICO_NOSPACE_FLAG=os.path.join(top, "full"))
    try:
        disk_full(top, mnt, Disk(top, mnt, real))
    finally:
        for k in ("LD_PRELOAD", "UNICO_NOSPACE_DIR", "UNICO_NOSPACE_FLAG"):
            ENV.pop(k, None)
        if real:
            subprocess.run(["umount", "-l", mnt])


def disk_full(top, mnt, disk):
    data = os.path.join(mnt, "data")
    store = "lmdb:" + data + "?wal=on"
    # an 8 MiB file system: the log's zero-filled run ahead must fit
    srv = Server(top, store)
    acked = set()
    try:
        r = call(srv, "POST", "/v1/users", {"id": "u0", "username": "user0"})
        check(r.status == 201, "insert u0", r)
        acked.add("u0")
        disk.fill()
        refused = None
        for i in range(1, 20000):
            r = call(srv, "POST", "/v1/users", {"id": "u%d" % i, "username": "user%d-%s" % (i, "x" * 200)})
            if r.status == 201:
                acked.add("u%d" % i)
                continue
            check(r.status in (503, 507), "a write on a full disk", r)
            if r.status == 507:
                refused = r
                break
        check(refused is not None, "writes refused once the disk is full")
        check(refused.json["error"] == "store_full" and "full" in refused.json["message"], "store_full", refused)
        r = call(srv, "GET", "/healthz")
        check(r.status == 200 and r.json == {"status": "ok"}, "healthz: alive on a full disk", r)
        check(metric(srv, "unico_store_up") == 0 and metric(srv, "unico_store_degraded") == 1,
              "metrics: up 0, degraded 1")
        r = call(srv, "GET", "/readyz")
        check(r.status == 503 and r.json["status"] == "not_ready" and r.json["reason"] == "disk_full"
              and "full" in r.json["message"], "readyz: 503 disk_full", r)
        check(metric(srv, "unico_ready") == 0, "unico_ready 0 on a full disk")
        check(metric_labelled(srv, 'unico_not_ready{reason="disk_full"}') == 1, "unico_not_ready disk_full")
        r = call(srv, "GET", "/v1/users/u0")
        check(r.status == 200, "reads are answered", r)
        # room again: writes resume by themselves
        disk.free()
        r = call(srv, "GET", "/readyz")
        check(r.status == 200, "ready once there is room (the probe tries the store again)", r)
        check(metric(srv, "unico_store_up") == 1 and metric(srv, "unico_store_degraded") == 0,
              "metrics: up 1, degraded 0")
        r = call(srv, "GET", "/readyz")
        check(r.status == 200 and r.json == {"status": "ready", "schema_version": 1},
              "ready again once there is room", r)
        check(metric(srv, "unico_ready") == 1, "unico_ready 1 again")
        r = call(srv, "POST", "/v1/users", {"id": "again", "username": "again"})
        check(r.status == 201, "writes resume", r)
        acked.add("again")
        # full again, and the server stopped: no final checkpoint
        disk.fill()
        for i in range(20000, 40000):
            r = call(srv, "POST", "/v1/users", {"id": "u%d" % i, "username": "user%d-%s" % (i, "x" * 200)})
            if r.status == 201:
                acked.add("u%d" % i)
            elif r.status == 507:
                break
        check(r.status == 507, "full again", r)
    finally:
        rc = srv.stop()
    err = srv.stderr()
    check(rc == 7 and "final checkpoint" in err, "the exit status says the checkpoint was not made",
          (rc, err[-800:]))
    # still full: an open may fail, and then says what to do
    rc, out = cli(store, "get", "users", "u0")
    check(rc == 0 or ("full" in out and "free" in out), "an open on a full disk says to free space", (rc, out))
    print("  disk_full: the open on a full disk: %s" % ("replayed" if rc == 0 else out.strip().splitlines()[-1]))
    disk.free()
    missing = []
    for pk in sorted(acked):
        rc, out = cli(store, "get", "users", pk)
        if rc != 0:
            missing.append((pk, rc, out))
    check(not missing, "every acknowledged write is there (%d)" % len(acked), missing[:3])
    print("  disk_full (%s): %d writes acknowledged, all there"
          % ("an 8 MiB tmpfs" if disk.real else "LD_PRELOAD", len(acked)))


TESTS = [
    ("lock_unlinked", test_lock_unlinked),
    ("store_removed", test_store_removed),
    ("store_removed_plain", test_store_removed_plain),
    ("disk_full", test_disk_full),
]


def main():
    os.makedirs(WORK, exist_ok=True)
    failed, ran = [], 0
    for name, fn in TESTS:
        if ONLY and name not in ONLY:
            continue
        t0 = time.time()
        try:
            fn()
            ran += 1
            print("ok   %s (%.1fs)" % (name, time.time() - t0))
        except Exception as e:  # noqa: BLE001
            ran += 1
            failed.append(name)
            print("FAIL %s: %s" % (name, e))
    print("%d run, %d failed; %d responses checked against docs/openapi.json" % (ran, len(failed), SPEC.checked))
    if failed or not ran:
        sys.exit(1)


if __name__ == "__main__":
    main()
