#!/usr/bin/env python3
"""http_api.py - `unico serve` through real HTTP clients (urllib, http.client
and raw sockets; tests/http_curl.sh does the same with curl).

usage: http_api.py PATH/TO/unico WORKDIR [TEST...]

Starts servers on free ports with fresh stores under WORKDIR and checks every
status code of docs/http.md, the limits (body, headers, stalled clients),
racing writers, the bearer token, /healthz and /metrics, a store that is not
there yet, and a graceful shutdown that loses no acknowledged write.

Every response it receives is also held to docs/openapi.json
(tests/support/openapi_check.py): a status the document does not list for that
path and method, a body that does not match its schema or a required header
that is missing fails the test that received it. GET /v1/openapi.json must
be that file, byte for byte.
Standard library, and jsonschema (Debian's python3-jsonschema) for the
document's schemas."""

import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
import openapi_check  # noqa: E402

OPENAPI = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "openapi.json")
SPEC = openapi_check.Spec(OPENAPI)

BIN = os.path.abspath(sys.argv[1])
WORK = os.path.abspath(sys.argv[2])
ONLY = sys.argv[3:]

SCHEMA = """
CREATE TABLE users (
  id               text PRIMARY KEY,
  username         text,
  email            text,
  phone            text,
  oauth_provider   text,
  external_user_id text,
  CONSTRAINT users_username UNIQUE (username) NORMALIZE casefold NAMESPACE logins,
  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,
  UNIQUE (phone),
  UNIQUE (oauth_provider, external_user_id)
);

CREATE TABLE votes (
  poll_id text,
  voter   text,
  choice  text,
  PRIMARY KEY (poll_id, voter)
);

CREATE TABLE items (
  id   int PRIMARY KEY,
  code text,
  UNIQUE (code)
);

CREATE TABLE _schema (
  id text PRIMARY KEY
);

CREATE TABLE _batch (
  id text PRIMARY KEY
);

CREATE TABLE orgs (
  id   text PRIMARY KEY,
  name text,
  CONSTRAINT orgs_login UNIQUE (name) NORMALIZE casefold NAMESPACE logins
);

CREATE TABLE subs (
  id      text PRIMARY KEY,
  poll_id text,
  name    text,
  option  text,
  UNIQUE (poll_id, name) NORMALIZE casefold,
  CONSTRAINT per_option LIMIT 2 PER (poll_id, option)
);
"""

FAILS = []


def check(cond, what, detail=None):
    if not cond:
        frame = sys._getframe(1)
        msg = "%s:%d: %s" % (os.path.basename(frame.f_code.co_filename), frame.f_lineno, what)
        if detail is not None:
            msg += "\n    got: %r" % (detail,)
        raise AssertionError(msg)


# ---------------------------------------------------------------------------
# the server under test


class Server:
    def __init__(self, name, *args, store=None, expect_start=True):
        self.dir = os.path.join(WORK, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.store = store or ("lmdb:" + os.path.join(self.dir, "data")
                               + os.environ.get("UNICO_TEST_STORE_QUERY", ""))
        self.args = list(args)
        # UNICO_TEST_SERVE_ARGS: options for every server (e.g. the whole
        # suite with a thread per connection: "--event-loop 0")
        extra = os.environ.get("UNICO_TEST_SERVE_ARGS", "").split()
        if extra and extra[0] not in self.args:
            self.args += extra
        self.log_path = os.path.join(self.dir, "stderr.txt")
        self.start(expect_start)

    def start(self, expect_start=True):
        cmd = [BIN, "serve", "--store", self.store] + self.args
        if not any(a.startswith("--listen") for a in self.args):
            cmd += ["--listen", "127.0.0.1:0"]
        self.err = open(self.log_path, "a")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.err)
        self.url = None
        if not expect_start:
            return
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else b""
        check(line, "server %s did not start" % cmd, self.stderr())
        info = json.loads(line)
        self.url = info["listen"]
        hp = urllib.parse.urlsplit(self.url)
        self.host, self.port = hp.hostname, hp.port

    def stderr(self):
        if not self.err.closed:
            self.err.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=30):
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
    """A response, checked against docs/openapi.json as it is made (an
    OpenAPIMismatch is an AssertionError: the test that got it fails)."""

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
        return "<%d %r %r>" % (self.status, self.headers, self.data[:300])


def call(srv, method, path, body=None, headers=None, timeout=20):
    """One request with http.client: any method, any headers, raw bodies."""
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=timeout)
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    out = Resp(r.status, r.getheaders(), r.read(), method, path)
    conn.close()
    return out


def fetch(srv, method, path, body=None, headers=None):
    """One request with urllib, the way most Python programs would."""
    data = None
    if body is not None:
        data = (json.dumps(body) if isinstance(body, (dict, list)) else body).encode()
    rq = urllib.request.Request(srv.url + path, data=data, method=method,
                                headers=dict({"Content-Type": "application/json"}, **(headers or {})))
    try:
        with urllib.request.urlopen(rq, timeout=20) as r:
            return Resp(r.status, r.getheaders(), r.read(), method, path)
    except urllib.error.HTTPError as e:
        return Resp(e.code, e.headers.items(), e.read(), method, path)


def raw(srv, data, timeout=10):
    """Send bytes on a fresh socket; return everything the server sends."""
    s = socket.create_connection((srv.host, srv.port), timeout=timeout)
    s.sendall(data)
    out = read_response(s)
    s.close()
    return checked_raw(data, out)


def checked_raw(sent, out):
    """Check a raw answer (bytes, as read_response read it) to the request
    whose head is in `sent` against docs/openapi.json; return it."""
    if not out.startswith(b"HTTP/1."):
        return out  # closed without an answer: nothing to check
    head, _, body = out.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = body[:int(headers["content-length"])]
    method, target = sent.decode("latin-1").split(" ", 2)[:2]
    SPEC.check(method, target, int(lines[0].split(" ", 2)[1]), headers, body)
    return out


def read_response(s):
    """One response from a socket: to the end of its Content-Length body,
    or to the end of the connection."""
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
            if b"\r\n\r\n" in out:
                head, _, rest = out.partition(b"\r\n\r\n")
                cl = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                if cl and len(rest) >= int(cl[0].split(b":")[1]):
                    break
    except (ConnectionResetError, BrokenPipeError):
        pass
    return out


def status_of_raw(out):
    return int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/1.") else None


def metric(srv, name, headers=None, **labels):
    """The value of one sample of /metrics (0 when absent)."""
    text = call(srv, "GET", "/metrics", headers=headers).data.decode()
    want = ",".join('%s="%s"' % kv for kv in labels.items())
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        key, _, val = line.rpartition(" ")
        if key == name + ("{%s}" % want if labels else ""):
            return float(val)
    return 0.0


def metric_settled(srv, name, want, **labels):
    """The value of one sample once it reads `want`, or the last value read
    after 3 s. Request counters and the in-flight gauge move when
    libmicrohttpd reports a request completed, which may come after the
    client already has its response (a thread per connection runs it on its
    own schedule): a test reading them at once would race that thread."""
    end = time.monotonic() + 3
    while True:
        v = metric(srv, name, **labels)
        if v == want or time.monotonic() > end:
            return v
        time.sleep(0.01)


# ---------------------------------------------------------------------------
# tests on one shared server (S)

S = None


def t_schema():
    r = call(S, "GET", "/v1/_schema")
    check(r.status == 404 and r.json["error"] == "not_found", "no schema yet: 404", r)
    r = call(S, "PUT", "/v1/_schema", SCHEMA, {"Content-Type": "text/plain"})
    check(r.status == 200 and r.json["changed"] is True, "schema apply", r)
    check(r.json["tables"] == ["users", "votes", "items", "_schema", "_batch", "orgs", "subs"], "tables", r.json)
    r = fetch(S, "PUT", "/v1/_schema", {"ddl": SCHEMA})
    check(r.status == 200 and r.json["changed"] is False, "same schema as JSON: unchanged", r)
    r = call(S, "GET", "/v1/_schema")
    check(r.status == 200 and r.json["ddl"] == SCHEMA and r.json["schema_version"] == 1, "schema show", r)
    r = call(S, "PUT", "/v1/_schema", "CREATE TABLE x (id texx PRIMARY KEY);")
    check(r.status == 400 and r.json["error"] == "invalid" and "line 1" in r.json["message"], "bad DDL: 400", r)
    r = fetch(S, "PUT", "/v1/_schema", {"sql": "x"})
    check(r.status == 400, "JSON schema body without ddl: 400", r)


def t_insert_get():
    r = fetch(S, "POST", "/v1/users", {"id": "u1", "username": "alice", "email": "Alice@Example.COM",
                                       "phone": "+15550001"})
    check(r.status == 201, "insert: 201", r)
    check(r.json == {"pk": "u1", "version": 1}, "insert body", r.json)
    check(r.headers.get("etag") == '"1"', "ETag", r.headers)
    check(r.headers.get("location") == "/v1/users/u1", "Location", r.headers)
    check(r.headers.get("content-type") == "application/json", "content type", r.headers)
    r = fetch(S, "GET", r.headers["location"])
    check(r.status == 200 and r.headers.get("etag") == '"1"', "GET: 200 with ETag", r)
    check(r.json["record"]["email"] == "Alice@Example.COM" and r.json["version"] == 1, "GET body", r.json)
    r = call(S, "HEAD", "/v1/users/u1")
    check(r.status == 200 and r.data == b"" and r.headers.get("etag") == '"1"', "HEAD", r)


def t_conflict():
    r = fetch(S, "POST", "/v1/users", {"id": "u2", "username": "bob", "email": "ALICE@example.com"})
    check(r.status == 409, "same email, other case: 409", r)
    check(r.json["error"] == "conflict" and r.json["constraint"] == "users_email", "constraint named", r.json)
    check(r.json["value"] == ["alice@example.com"] and r.json["owner"] == "u1", "value and owner", r.json)
    check("taken" in r.json["message"], "message", r.json)
    r = fetch(S, "POST", "/v1/users", {"id": "u1", "username": "other"})
    check(r.status == 409 and r.json["constraint"] == "PRIMARY KEY" and r.json["owner"] == "u1",
          "same primary key: 409 PRIMARY KEY", r)
    r = fetch(S, "GET", "/v1/users/u2")
    check(r.status == 404, "a refused insert left nothing", r)


def t_namespace():
    # users' usernames and orgs' names are one set of logins (NAMESPACE)
    r = fetch(S, "POST", "/v1/orgs", {"id": "o1", "name": "ALICE"})
    check(r.status == 409 and r.json["constraint"] == "orgs_login" and r.json["value"] == ["alice"],
          "an org named like a user: 409 on orgs_login", r)
    check(r.json.get("owner") == "u1" and r.json.get("owner_table") == "users",
          "the owner is the user, in table users", r.json)
    r = fetch(S, "GET", "/v1/orgs/by/orgs_login?v=Alice")
    check(r.status == 200 and r.json["table"] == "users" and r.json["pk"] == "u1",
          "lookup by the orgs' constraint finds the user and names its table", r)
    r = fetch(S, "POST", "/v1/orgs", {"id": "o1", "name": "Acme"})
    check(r.status == 201, "a free name: 201", r)
    r = fetch(S, "POST", "/v1/users", {"id": "u7", "username": "acme"})
    check(r.status == 409 and r.json.get("owner") == "o1" and r.json.get("owner_table") == "orgs",
          "a user named like an org: 409, owner o1 of table orgs", r)
    r = fetch(S, "GET", "/v1/users/by/users_username?v=ACME")
    check(r.status == 200 and r.json["table"] == "orgs" and r.json["record"] == {"id": "o1", "name": "Acme"},
          "lookup by the users' constraint finds the org", r)
    check(fetch(S, "DELETE", "/v1/orgs/o1").status == 200, "the org goes")
    r = fetch(S, "GET", "/v1/users/by/users_username?v=acme")
    check(r.status == 404, "its name is free for everyone", r)
    # a hold taken through orgs reserves the login for users too, and is
    # released through either table of the namespace, not another
    r = fetch(S, "POST", "/v1/orgs/holds", {"constraint": "orgs_login", "value": "Zed", "ttl": 60})
    check(r.status in (200, 201) and "token" in r.json, "hold a login through orgs", r)
    tok = r.json.get("token", "")
    r = fetch(S, "POST", "/v1/users", {"id": "u8", "username": "zed"})
    check(r.status == 409 and r.json["error"] == "busy", "a user cannot take the held login", r)
    r = call(S, "DELETE", "/v1/votes/holds/" + tok)
    check(r.status == 404, "not released through a table outside the namespace", r)
    r = call(S, "DELETE", "/v1/users/holds/" + tok)
    check(r.status == 200 and r.json["released"] is True and r.json["table"] == "users",
          "released through users", r)
    r = fetch(S, "POST", "/v1/users", {"id": "u8", "username": "zed"})
    check(r.status == 201, "then the user takes it", r)


def t_bad_input():
    r = call(S, "POST", "/v1/users", '{"id":"u9",')
    check(r.status == 400 and r.json["error"] == "invalid" and "JSON" in r.json["message"], "malformed JSON: 400", r)
    r = call(S, "POST", "/v1/users", '{"id":"u9","age":3}')
    check(r.status == 400 and r.json.get("column") == "age", "unknown column named", r)
    r = call(S, "POST", "/v1/users", '{"id":"u9","email":42}')
    check(r.status == 400 and r.json.get("column") == "email", "wrong type: column named", r)
    r = call(S, "POST", "/v1/users", "[1,2]")
    check(r.status == 400, "not an object: 400", r)
    r = call(S, "POST", "/v1/users", "")
    check(r.status == 400, "empty body: 400", r)
    r = call(S, "POST", "/v1/users", b'{"id":"u9\x00"}')
    check(r.status == 400 and "NUL" in r.json["message"], "NUL byte in body: 400", r)
    r = call(S, "GET", "/v1/items/abc")
    check(r.status == 400 and r.json["error"] == "invalid", "int key given text: 400", r)
    r = call(S, "GET", "/v1/votes/p1")
    check(r.status == 400 and "2 columns" in r.json["message"], "one segment for a 2-column key: 400", r)
    r = call(S, "GET", "/v1/users/a%zz")
    check(r.status == 400, "bad %-escape: 400", r)
    r = call(S, "GET", "/v1/users/a%00b")
    check(r.status == 400, "escaped NUL: 400", r)
    r = raw(S, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nno colon here\r\n\r\n")
    check(status_of_raw(r) == 400, "malformed header: 400", r[:100])


def t_not_found():
    r = fetch(S, "GET", "/v1/users/nobody")
    check(r.status == 404 and r.json["error"] == "not_found", "no record: 404", r)
    r = fetch(S, "GET", "/v1/nosuch/u1")
    check(r.status == 404 and r.json["error"] == "not_found" and "nosuch" in r.json["message"], "no table: 404", r)
    r = fetch(S, "POST", "/v1/nosuch", {"id": "x"})
    check(r.status == 404, "insert into no table: 404", r)
    for path in ("/", "/v2/users", "/v1/", "/v1/users/", "/v1//x", "/healthz/x"):
        r = call(S, "GET", path)
        check(r.status == 404 and r.json["error"] == "not_found", "no route %s: 404" % path, r)
    r = fetch(S, "GET", "/v1/users/by/nosuch?v=x")
    check(r.status == 404, "no constraint: 404", r)
    r = fetch(S, "GET", "/v1/users/by/users_email?v=nobody@example.com")
    check(r.status == 404 and r.json["error"] == "not_found", "nobody holds the value: 404", r)
    r = call(S, "PATCH", "/v1/users/nobody", {"phone": "1"})
    check(r.status == 404, "PATCH no record: 404", r)
    r = call(S, "DELETE", "/v1/users/nobody")
    check(r.status == 404, "DELETE no record: 404", r)


def t_method_not_allowed():
    for method, path, allow in (("PUT", "/v1/users", "POST"), ("GET", "/v1/users", "POST"),
                                ("POST", "/v1/users/u1", "GET, HEAD, PATCH, DELETE"),
                                ("DELETE", "/healthz", "GET, HEAD"),
                                ("POST", "/v1/_schema", "GET, HEAD, PUT"),
                                ("PATCH", "/v1/users/by/users_email", "GET, HEAD"),
                                ("OPTIONS", "/v1/users/u1", "GET, HEAD, PATCH, DELETE")):
        r = call(S, method, path, "{}" if method in ("PUT", "POST", "PATCH") else None)
        check(r.status == 405 and r.headers.get("allow") == allow and r.json["error"] == "method_not_allowed",
              "%s %s: 405 Allow %s" % (method, path, allow), r)


def t_versions():
    fetch(S, "POST", "/v1/users", {"id": "v1", "username": "vera"})
    r = fetch(S, "PATCH", "/v1/users/v1", {"phone": "+100"}, {"If-Match": '"1"'})
    check(r.status == 200 and r.json["version"] == 2 and r.headers.get("etag") == '"2"', "PATCH If-Match: 200", r)
    r = fetch(S, "PATCH", "/v1/users/v1", {"phone": "+101"}, {"If-Match": '"1"'})
    check(r.status == 412 and r.json["error"] == "version_mismatch" and r.json["current_version"] == 2,
          "stale If-Match: 412", r)
    r = fetch(S, "GET", "/v1/users/v1")
    check(r.json["record"]["phone"] == "+100", "the stale write changed nothing", r.json)
    r = fetch(S, "PATCH", "/v1/users/v1", {"phone": "+102"}, {"If-Match": "2"})
    check(r.status == 200 and r.json["version"] == 3, "bare version in If-Match", r)
    r = fetch(S, "PATCH", "/v1/users/v1", {"phone": "+103"}, {"If-Match": "*"})
    check(r.status == 200 and r.json["version"] == 4, "If-Match: *", r)
    # version 0 is a version (a record adopted from a native table has
    # it): a record at version 4 is not at it
    r = fetch(S, "PATCH", "/v1/users/v1", {"phone": "+1"}, {"If-Match": '"0"'})
    check(r.status == 412 and r.json.get("current_version") == 4, "If-Match \"0\": 412", r)
    for bad in ('W/"4"', '"x"', "00", '"4", "5"', '" 4"', '"4 "', '"+4"', "+4", '"-4"', '"04"', "04",
                '"4 4"', '""'):
        r = fetch(S, "PATCH", "/v1/users/v1", {"phone": "+1"}, {"If-Match": bad})
        check(r.status == 400, "If-Match %s: 400" % bad, r)
    # two If-Match lines are a list too (MHD shows only the first)
    for first, second in (('"4"', '"1"'), ('"1"', '"4"')):
        out = raw(S, b'DELETE /v1/users/v1 HTTP/1.1\r\nHost: localhost\r\nIf-Match: %s\r\nIf-Match: %s\r\n\r\n'
                  % (first.encode(), second.encode()))
        check(status_of_raw(out) == 400 and b"lists" in out, "two If-Match headers: 400", out)
    r = fetch(S, "DELETE", "/v1/users/v1", None, {"If-Match": '"3"'})
    check(r.status == 412 and r.json["current_version"] == 4, "stale DELETE: 412", r)
    r = fetch(S, "DELETE", "/v1/users/v1", None, {"If-Match": '"4"'})
    check(r.status == 200 and r.json == {"pk": "v1", "version": 4}, "DELETE: 200", r)
    # inserted again, the key goes on counting: no ETag of the deleted
    # record matches the new one
    r = fetch(S, "POST", "/v1/users", {"id": "v1", "username": "vera"})
    check(r.status == 201 and r.json["version"] == 5 and r.headers.get("etag") == '"5"',
          "insert after delete: version 5", r)
    for old in ("1", "2", "3", "4"):
        r = fetch(S, "PATCH", "/v1/users/v1", {"phone": "+9"}, {"If-Match": '"%s"' % old})
        check(r.status == 412 and r.json["current_version"] == 5, "If-Match of the deleted record: 412", r)
    r = call(S, "PATCH", "/v1/users/u1", {"id": "other"})
    check(r.status == 400 and r.json.get("column") == "id", "primary key change: 400 with column", r)


def t_move_values():
    fetch(S, "POST", "/v1/users", {"id": "m1", "username": "mover", "email": "move@example.com"})
    r = fetch(S, "POST", "/v1/users", {"id": "m2", "username": "taker", "email": "MOVE@example.com"})
    check(r.status == 409 and r.json["owner"] == "m1", "taken", r)
    r = fetch(S, "PATCH", "/v1/users/m1", {"email": "moved@example.com"})
    check(r.status == 200, "PATCH moves the email", r)
    r = fetch(S, "POST", "/v1/users", {"id": "m2", "username": "taker", "email": "MOVE@example.com"})
    check(r.status == 201, "the old email is free at once", r)
    r = fetch(S, "PATCH", "/v1/users/m1", {"email": "move@example.com"})
    check(r.status == 409 and r.json["owner"] == "m2", "PATCH onto a taken value: 409", r)
    r = fetch(S, "DELETE", "/v1/users/m2")
    check(r.status == 200, "DELETE", r)
    r = fetch(S, "PATCH", "/v1/users/m1", {"email": "move@example.com"})
    check(r.status == 200, "DELETE freed the value", r)


def t_lookup():
    r = fetch(S, "GET", "/v1/users/by/users_username?v=ALICE")
    check(r.status == 200 and r.json["pk"] == "u1" and r.json["value"] == ["alice"], "casefold lookup", r)
    check(r.headers.get("etag") == '"1"', "lookup ETag is the record's version", r.headers)
    fetch(S, "POST", "/v1/users", {"id": "g1", "username": "gh", "oauth_provider": "GitHub",
                                   "external_user_id": "a b&c/d+e"})
    q = urllib.parse.urlencode([("v", "GitHub"), ("v", "a b&c/d+e")])
    r = fetch(S, "GET", "/v1/users/by/users_oauth_provider_external_user_id_key?" + q)
    check(r.status == 200 and r.json["pk"] == "g1", "composite lookup with repeated v", r)
    r = fetch(S, "GET", "/v1/users/by/users_oauth_provider_external_user_id_key?v=GitHub")
    check(r.status == 400, "one v for a 2-column constraint: 400", r)
    r = fetch(S, "GET", "/v1/users/by/users_email")
    check(r.status == 400 and "?v=" in r.json["message"], "no v: 400", r)
    r = fetch(S, "GET", "/v1/users/by/users_phone_key?v=%2B15550001")
    check(r.status == 200 and r.json["pk"] == "u1", "%2B is a plus", r)
    r = fetch(S, "GET", "/v1/users/by/users_phone_key?v=+15550001")
    check(r.status == 404, "a bare + is a space, as in any query string", r)
    r = fetch(S, "GET", "/v1/users/by/users_email?v=%zz")
    check(r.status == 400, "bad escape in v: 400", r)


def t_keys():
    r = fetch(S, "POST", "/v1/votes", {"poll_id": "p/1", "voter": "ann smith", "choice": "yes"})
    check(r.status == 201 and r.json["pk"] == ["p/1", "ann smith"], "composite insert", r)
    check(r.headers["location"] == "/v1/votes/p%2F1/ann%20smith", "Location percent-encodes", r.headers)
    r = fetch(S, "GET", r.headers["location"])
    check(r.status == 200 and r.json["record"]["choice"] == "yes", "GET by composite key with %2F", r)
    r = fetch(S, "POST", "/v1/votes", {"poll_id": "by", "voter": "x"})
    r = fetch(S, "GET", "/v1/votes/%62y/x")
    check(r.status == 200 and r.json["pk"] == ["by", "x"], "a key segment 'by' escaped as %62y", r)
    r = fetch(S, "POST", "/v1/items", {"id": 42, "code": "A"})
    check(r.status == 201 and r.headers["location"] == "/v1/items/42", "int key", r)
    r = fetch(S, "GET", "/v1/items/42")
    check(r.status == 200 and r.json["pk"] == 42, "int key from the path", r)
    r = fetch(S, "GET", "/v1/items/by/items_code_key?v=A")
    check(r.status == 200 and r.json["pk"] == 42, "lookup in an int-keyed table", r)
    # Location escapes what would read as a route word, as clients must
    r = fetch(S, "POST", "/v1/users", {"id": "holds"})
    check(r.status == 201 and r.headers["location"] == "/v1/users/%68olds", "Location of pk holds", r)
    r = fetch(S, "GET", r.headers["location"])
    check(r.status == 200 and r.json["pk"] == "holds", "GET the Location of pk holds", r)
    # a key whose answer has an escape, and one beyond ASCII: percent-encoded bytes
    r = fetch(S, "POST", "/v1/users", {"id": 'q"b\\c/d'})
    check(r.status == 201 and r.headers["location"] == "/v1/users/q%22b%5Cc%2Fd", "Location of a key with escapes", r)
    r = fetch(S, "GET", r.headers["location"])
    check(r.status == 200 and r.json["pk"] == 'q"b\\c/d', "GET the Location of a key with escapes", r)
    r = fetch(S, "POST", "/v1/users", {"id": "back\\slash"})
    check(r.status == 201 and r.headers["location"] == "/v1/users/back%5Cslash", "Location of a key with a backslash", r)
    r = fetch(S, "POST", "/v1/users", {"id": "by"})
    check(r.status == 201 and r.headers["location"] == "/v1/users/%62y", "Location of pk by", r)
    r = fetch(S, "POST", "/v1/users", {"id": "z\u00e9 x"})
    check(r.status == 201 and r.headers["location"] == "/v1/users/z%C3%A9%20x", "Location of a key beyond ASCII", r)
    r = fetch(S, "GET", r.headers["location"])
    check(r.status == 200 and r.json["pk"] == "z\u00e9 x", "GET the Location of a key beyond ASCII", r)
    r = fetch(S, "POST", "/v1/votes", {"poll_id": "by", "voter": "y"})
    check(r.status == 201 and r.headers["location"] == "/v1/votes/%62y/y", "Location of pk (by, y)", r)
    r = fetch(S, "GET", r.headers["location"])
    check(r.status == 200 and r.json["pk"] == ["by", "y"], "GET the Location of pk (by, y)", r)
    r = fetch(S, "POST", "/v1/votes", {"poll_id": "holds", "voter": "z"})
    r = fetch(S, "GET", r.headers["location"])
    check(r.status == 200 and r.json["pk"] == ["holds", "z"], "GET the Location of pk (holds, z)", r)
    # a table named _schema: /v1/_schema is the schema; the table is %5Fschema
    r = fetch(S, "POST", "/v1/%5Fschema", {"id": "k1"})
    check(r.status == 201, "insert into table _schema through /v1/%5Fschema", r)
    r = fetch(S, "GET", r.headers["location"])
    check(r.status == 200 and r.json["pk"] == "k1", "GET the Location of a _schema record", r)


def t_idempotency():
    body = {"id": "i1", "username": "idem", "email": "idem@example.com"}
    r1 = fetch(S, "POST", "/v1/users", body, {"Idempotency-Key": "signup-i1"})
    r2 = fetch(S, "POST", "/v1/users", body, {"Idempotency-Key": "signup-i1"})
    check(r1.status == 201 and r2.status == 201, "replay: 201 twice", (r1, r2))
    check(r1.data == r2.data and r1.headers["etag"] == r2.headers["etag"], "replay: same answer", (r1, r2))
    r = fetch(S, "POST", "/v1/users", dict(body, id="i2"), {"Idempotency-Key": "signup-i1"})
    check(r.status == 422 and r.json["error"] == "op_id_reused", "same key, other body: 422", r)
    r = fetch(S, "GET", "/v1/users/i2")
    check(r.status == 404, "nothing written", r)
    r1 = fetch(S, "PATCH", "/v1/users/i1", {"phone": "+7"}, {"Idempotency-Key": "i1-phone"})
    r2 = fetch(S, "PATCH", "/v1/users/i1", {"phone": "+7"}, {"Idempotency-Key": "i1-phone"})
    check(r1.status == 200 and r2.status == 200 and r1.json == r2.json == {"pk": "i1", "version": 2},
          "PATCH replay applied once", (r1, r2))
    r = fetch(S, "POST", "/v1/users", {"id": "i3"}, {"Idempotency-Key": "x" * 200})
    check(r.status == 400, "an over-long key: 400", r)


def t_batch():
    for i, name in ((1, "bat-a"), (2, "bat-b")):
        r = fetch(S, "POST", "/v1/users", {"id": "bt%d" % i, "username": name})
        check(r.status == 201, "batch: insert bt%d" % i, r)
    swap = [{"op": "update", "table": "users", "key": "bt1", "patch": {"username": "BAT-B"}, "if_version": 1},
            {"op": "update", "table": "users", "key": "bt2", "patch": {"username": "bat-a"}}]
    r1 = fetch(S, "POST", "/v1/_batch", swap, {"Idempotency-Key": "swap-bt"})
    want = {"results": [{"pk": "bt1", "version": 2}, {"pk": "bt2", "version": 2}]}
    check(r1.status == 200 and r1.json == want and "etag" not in r1.headers, "batch: a swap is 200", r1)
    r2 = fetch(S, "POST", "/v1/_batch", swap, {"Idempotency-Key": "swap-bt"})
    check(r2.status == 200 and r2.data == r1.data, "batch: a repeat returns the first answer", r2)
    r = fetch(S, "GET", "/v1/users/by/users_username?v=bat-b")
    check(r.status == 200 and r.json["pk"] == "bt1", "batch: the swapped value's owner", r)
    r = fetch(S, "POST", "/v1/_batch", swap)
    check(r.status == 412 and r.json["report"] == {"index": 0, "op": "update", "table": "users"}
          and r.json["current_version"] == 2, "batch: a stale if_version is 412 naming op 0", r)
    bad = [{"op": "insert", "table": "users", "record": {"id": "bt3", "email": "bt3@x.org"}},
           {"op": "update", "table": "users", "key": "bt1", "patch": {"username": "Bat-A"}}]
    r = fetch(S, "POST", "/v1/_batch", bad)
    check(r.status == 409 and r.json["error"] == "conflict" and r.json["owner"] == "bt2"
          and r.json["report"]["index"] == 1 and r.json["message"].startswith("op 1: "),
          "batch: a conflict of op 1 is 409 naming it and the owner", r)
    r = fetch(S, "GET", "/v1/users/bt3")
    check(r.status == 404, "batch: the refused batch wrote nothing", r)
    r = fetch(S, "POST", "/v1/_batch", [{"op": "delete", "table": "users", "key": "nobody"}])
    check(r.status == 404 and r.json["report"]["index"] == 0, "batch: a missing record is 404", r)
    subs = [{"op": "insert", "table": "subs", "record": {"id": "bs%d" % i, "poll_id": "bp", "name": "n%d" % i,
                                                         "option": "o"}} for i in range(3)]
    r = fetch(S, "POST", "/v1/_batch", subs)
    check(r.status == 422 and r.json["error"] == "limit" and r.json["report"]["index"] == 2,
          "batch: a group over its limit is 422 naming the op that does not fit", r)
    r = fetch(S, "POST", "/v1/_batch", subs[:2])
    check(r.status == 200, "batch: two places of a limit of 2", r)
    for body, what in (("[{\"op\":", "not valid JSON"), ({"op": "insert"}, "JSON array of ops"),
                       ([{"op": "merge", "table": "users"}], '"op" must be')):
        r = call(S, "POST", "/v1/_batch", body, {"Content-Type": "application/json"})
        check(r.status == 400 and what in r.json["message"], "batch: malformed (%s) is 400" % what, r)
    r = call(S, "GET", "/v1/_batch")
    check(r.status == 405 and r.headers.get("allow") == "POST", "batch: GET is 405", r)
    # a table named _batch: /v1/_batch is the batch; the table is %5Fbatch
    r = fetch(S, "POST", "/v1/%5Fbatch", {"id": "k1"})
    check(r.status == 201, "insert into table _batch through /v1/%5Fbatch", r)
    r = fetch(S, "GET", "/v1/_batch/k1")
    check(r.status == 200 and r.json["pk"] == "k1", "GET a record of table _batch", r)


def t_head_rules():
    # RFC 9112: a request's framing must be unambiguous (else 400 and close)
    s = socket.create_connection((S.host, S.port), timeout=5)
    s.sendall(b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\nContent-Length: 20\r\n\r\n"
              b'{"id":"q"}')
    out = checked_raw(b"POST /v1/users ", read_response(s))
    s.close()
    check(status_of_raw(out) == 400 and b"Content-Length" in out and b"Connection: close" in out,
          "two Content-Length headers: 400 and close", out)
    r = fetch(S, "GET", "/v1/users/q")
    check(r.status == 404, "nothing written", r)
    out = raw(S, b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nContent-Length: 11\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b'b\r\n{"id":"q2"}\r\n0\r\n\r\n')
    check(status_of_raw(out) == 400 and b"Connection: close" in out, "Content-Length and chunked: 400", out)
    # HTTP/1.1 needs exactly one Host; HTTP/1.0 needs none
    out = raw(S, b"GET /healthz HTTP/1.1\r\n\r\n")
    check(status_of_raw(out) == 400 and b"Host" in out, "HTTP/1.1 without Host: 400", out)
    out = raw(S, b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
    check(status_of_raw(out) == 400 and b"Host" in out, "two Host headers: 400", out)
    out = raw(S, b"GET /healthz HTTP/1.0\r\n\r\n")
    check(status_of_raw(out) == 200, "HTTP/1.0 without Host: 200", out)


def t_cross_site():
    # issue 32 #5: a web page the user visits must not write to the
    # default (loopback, no token) server: no form body (415), no other
    # origin (403), no other host name (421, DNS rebinding)
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                  "application/jsonx", "text/json"):
        r = call(S, "POST", "/v1/users", '{"id":"csrf1"}', {"Content-Type": ctype})
        check(r.status == 415 and r.json["error"] == "unsupported_media_type"
              and "application/json" in r.json["message"], "POST with Content-Type %s: 415" % ctype, r)
    r = call(S, "PATCH", "/v1/users/u1", '{"phone":"+1"}', {"Content-Type": "text/plain"})
    check(r.status == 415, "PATCH with a form Content-Type: 415", r)
    r = call(S, "POST", "/v1/users/holds", '{"constraint":"users_username","value":"cs","ttl":5}',
             {"Content-Type": "text/plain;charset=UTF-8"})
    check(r.status == 415, "POST holds with a form Content-Type: 415", r)
    r = call(S, "POST", "/v1/users", '{"id":"csrf1"}',
             {"Content-Type": "text/plain", "Origin": "https://evil.example"})
    check(r.status == 403 and r.json["error"] == "forbidden" and "evil.example" in r.json["message"],
          "POST from another origin: 403", r)
    r = call(S, "POST", "/v1/users", '{"id":"csrf1"}',
             {"Content-Type": "application/json", "Origin": "https://evil.example"})
    check(r.status == 403, "another origin, even with a JSON body: 403", r)
    for origin in ("null", "http://localhost", "http://127.0.0.1:%d.evil.example" % S.port):
        r = call(S, "GET", "/v1/users/u1", headers={"Origin": origin})
        check(r.status == 403, "Origin %s: 403" % origin, r)
    r = call(S, "OPTIONS", "/v1/users", headers={"Origin": "https://evil.example",
                                                  "Access-Control-Request-Method": "POST"})
    check(r.status == 403 and "access-control-allow-origin" not in r.headers,
          "a preflight from another origin: 403, no CORS header", r)
    r = call(S, "POST", "/v1/users", '{"id":"csrf1"}', {"Content-Type": "text/plain", "Host": "evil.example"})
    check(r.status == 421 and r.json["error"] == "misdirected_request" and "evil.example" in r.json["message"],
          "Host evil.example (DNS rebinding): 421", r)
    r = call(S, "GET", "/v1/users/csrf1")
    check(r.status == 404, "none of them wrote", r)
    for host in ("evil.example", "evil.example:%d" % S.port, "localhost.evil.example", "127.0.0.1.nip.io",
                 "[::2]:%d" % S.port, "10.0.0.1", "localhost:x", "[::1", ""):
        r = call(S, "GET", "/healthz", headers={"Host": host})
        check(r.status == 421, "Host %r: 421" % host, r)
    for host in ("localhost", "LocalHost:%d" % S.port, "127.0.0.1", "127.0.0.1:%d" % S.port, "[::1]",
                 "[::1]:8080", "127.0.0.1:80", " localhost\t"):
        r = call(S, "GET", "/healthz", headers={"Host": host})
        check(r.status == 200, "Host %r: 200" % host, r)
    # HTTP/1.0 needs no Host (browsers always send one)
    out = raw(S, b"GET /healthz HTTP/1.0\r\n\r\n")
    check(status_of_raw(out) == 200, "HTTP/1.0 without Host: 200", out)
    # its own origin, and bodies typed as JSON or not typed at all, pass
    own = "http://127.0.0.1:%d" % S.port
    r = call(S, "POST", "/v1/users", '{"id":"cs-own"}', {"Content-Type": "application/json", "Origin": own})
    check(r.status == 201 and "access-control-allow-origin" not in r.headers, "its own origin: 201", r)
    r = call(S, "POST", "/v1/users", '{"id":"cs-utf8"}', {"Content-Type": "Application/JSON ; charset=utf-8"})
    check(r.status == 201, "application/json with a charset: 201", r)
    r = call(S, "POST", "/v1/users", '{"id":"cs-none"}')
    check(r.status == 201, "no Content-Type at all: 201 (taken as JSON)", r)
    out = raw(S, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nOrigin: %s\r\nOrigin: %s\r\n\r\n"
              % (own.encode(), own.encode()))
    check(status_of_raw(out) == 400 and b"Origin" in out, "two Origin headers: 400", out)
    # no other origin may be read either: a preflight-free GET gets no CORS header
    r = call(S, "OPTIONS", "/v1/users/u1", headers={"Origin": own})
    check(r.status == 405, "OPTIONS from its own origin: 405 (no preflight needed)", r)


def t_allow_origin():
    tok = os.path.join(WORK, "token-cors.txt")
    with open(tok, "w") as f:
        f.write("cors-token-0123456789\n")
    auth = {"Authorization": "Bearer cors-token-0123456789"}
    app = "http://app.example:3000"
    srv = Server("cors", "--token-file", tok, "--allow-origin", app, "--allow-origin=https://b.example")
    try:
        r = call(srv, "PUT", "/v1/_schema", SCHEMA, auth)
        check(r.status == 200, "schema", r)
        # a preflight: 204 without the token, for an allowed origin only
        r = call(srv, "OPTIONS", "/v1/users/u1", headers={
            "Origin": app, "Access-Control-Request-Method": "PATCH",
            "Access-Control-Request-Headers": "authorization, content-type, if-match"})
        check(r.status == 204 and r.data == b"", "preflight: 204, no body", r)
        check(r.headers.get("access-control-allow-origin") == app, "preflight: the origin allowed", r.headers)
        check("PATCH" in r.headers.get("access-control-allow-methods", ""), "preflight: methods", r.headers)
        ah = r.headers.get("access-control-allow-headers", "").lower()
        for h in ("authorization", "content-type", "if-match", "idempotency-key", "unico-hold"):
            check(h in ah, "preflight allows the header " + h, r.headers)
        check("origin" in r.headers.get("vary", "").lower(), "preflight: Vary: Origin", r.headers)
        r = call(srv, "OPTIONS", "/nowhere", headers={"Origin": app, "Access-Control-Request-Method": "GET"})
        check(r.status == 404, "preflight on no route: 404", r)
        r = call(srv, "OPTIONS", "/v1/users", headers={"Origin": "https://c.example",
                                                        "Access-Control-Request-Method": "POST"})
        check(r.status == 403 and "access-control-allow-origin" not in r.headers, "preflight, other origin: 403", r)
        # the request itself: the token as always, and CORS headers
        r = call(srv, "POST", "/v1/users", '{"id":"c1"}', {"Origin": app, "Content-Type": "application/json"})
        check(r.status == 401 and r.headers.get("access-control-allow-origin") == app,
              "no token: 401 that the page can read", r)
        r = call(srv, "POST", "/v1/users", '{"id":"c1"}',
                 dict(auth, **{"Origin": "HTTPS://B.example", "Content-Type": "application/json"}))
        check(r.status == 201 and r.headers.get("access-control-allow-origin") == "HTTPS://B.example",
              "an allowed origin (any case): 201 with Access-Control-Allow-Origin", r)
        check("etag" in r.headers.get("access-control-expose-headers", "").lower(), "ETag exposed", r.headers)
        r = call(srv, "POST", "/v1/users", '{"id":"c2"}',
                 dict(auth, **{"Origin": "https://evil.example", "Content-Type": "application/json"}))
        check(r.status == 403, "another origin, with the token: 403", r)
        # with a token, any Host name will do (a proxy in front)
        r = call(srv, "GET", "/v1/users/c1", headers=dict(auth, Host="api.example.com"))
        check(r.status == 200 and "access-control-allow-origin" not in r.headers,
              "with a token, Host api.example.com: 200", r)
        r = call(srv, "GET", "/v1/users/c1", headers=dict(auth, Host="api.example.com",
                                                         Origin="https://api.example.com"))
        check(r.status == 200, "the origin of the Host it was reached by is its own", r)
    finally:
        check(srv.stop() == 0, "cors server exits 0")
    for bad in ("app.example", "http://app.example/", "http://app.example/x", "*", "ftp://x", "http://",
                "http://a b"):
        srv = Server("cors-bad", "--allow-origin", bad, expect_start=False)
        rc = srv.proc.wait(30)
        out = srv.proc.stdout.read().decode()
        srv.stop()
        check(rc == 1 and json.loads(out)["error"] == "usage" and "--allow-origin" in srv.stderr(),
              "--allow-origin %r: exit 1" % bad, (rc, out, srv.stderr()))


def t_header_whitespace():
    # issue 32 #11: Idempotency-Key, If-Match and Authorization: optional
    # whitespace trimmed at both ends, a repeated header refused
    def post(key_line, pk="ws1"):
        body = json.dumps({"id": pk}).encode()
        return raw(S, b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\n%sContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n%s" % (key_line, len(body), body))
    out = post(b"Idempotency-Key: ws-1\r\n")
    check(status_of_raw(out) == 201, "insert under ws-1", out)
    first = out.partition(b"\r\n\r\n")[2]
    for line in (b"Idempotency-Key: ws-1 \r\n", b"Idempotency-Key: ws-1\t\r\n", b"Idempotency-Key:  \tws-1 \t \r\n"):
        out = post(line)
        check(status_of_raw(out) == 201 and out.partition(b"\r\n\r\n")[2] == first,
              "%r is the key ws-1: the first answer again" % line, out)
    out = post(b"Idempotency-Key: ws-1 \r\n", pk="ws2")
    check(status_of_raw(out) == 422 and b"op_id_reused" in out, "ws-1 with another body: 422", out)
    out = post(b"Idempotency-Key: ws-3\r\nIdempotency-Key: ws-4\r\n", pk="ws3")
    check(status_of_raw(out) == 400 and b"2 Idempotency-Key headers" in out, "two Idempotency-Key headers: 400", out)
    out = raw(S, b"GET /v1/users/ws3 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    check(status_of_raw(out) == 404, "nothing written under either key", out)
    out = raw(S, b"DELETE /v1/users/ws1 HTTP/1.1\r\nHost: localhost\r\nIf-Match: \"1\"\r\nIf-Match: \"1\"\r\n\r\n")
    check(status_of_raw(out) == 400 and b"2 If-Match headers" in out, "two If-Match headers: 400", out)
    out = raw(S, b"PATCH /v1/users/ws1 HTTP/1.1\r\nHost: localhost\r\nIf-Match: \t\"1\" \t\r\n"
                 b"Content-Length: 15\r\n\r\n{\"phone\":\"+42\"}")
    check(status_of_raw(out) == 200, "If-Match with blanks around it: 200", out)
    out = raw(S, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer a\r\n"
                 b"Authorization: Bearer b\r\n\r\n")
    check(status_of_raw(out) == 400 and b"2 Authorization headers" in out, "two Authorization headers: 400", out)


def t_transfer_encoding():
    # issue 32 #12: a transfer coding other than chunked: 501 at once
    for te in (b"gzip, chunked", b"gzip", b"chunked, chunked", b"identity"):
        t0 = time.monotonic()
        out = raw(S, b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: %s\r\n\r\n"
                     b"b\r\n{\"id\":\"te\"}\r\n0\r\n\r\n" % te, timeout=5)
        check(status_of_raw(out) == 501 and b'"not_implemented"' in out and b"Connection: close" in out
              and time.monotonic() - t0 < 3, "Transfer-Encoding %s: 501 at once" % te, out)
    out = raw(S, b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
                 b"Transfer-Encoding: gzip\r\n\r\nb\r\n{\"id\":\"te\"}\r\n0\r\n\r\n", timeout=5)
    check(status_of_raw(out) == 501, "two Transfer-Encoding headers: 501", out)
    out = raw(S, b"GET /v1/users/te HTTP/1.1\r\nHost: localhost\r\n\r\n")
    check(status_of_raw(out) == 404, "nothing written", out)
    out = raw(S, b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked \r\n\r\n"
                 b"b\r\n{\"id\":\"te\"}\r\n0\r\n\r\n", timeout=5)
    check(status_of_raw(out) == 501, "Transfer-Encoding: chunked and a blank (libmicrohttpd would not "
          "decode it): 501", out)
    out = raw(S, b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: Chunked\r\n"
                 b"Connection: close\r\n\r\nb\r\n{\"id\":\"te\"}\r\n0\r\n\r\n", timeout=5)
    check(status_of_raw(out) == 201, "Transfer-Encoding: Chunked (any case): 201", out)


def t_hold_retry_after():
    # issue 32 #15: a value held by a hold is busy until the hold expires:
    # Retry-After says how long, not 1
    for ttl in (600, 2592000):
        r = fetch(S, "POST", "/v1/users/holds", {"constraint": "users_username", "value": "ra%d" % ttl, "ttl": ttl})
        check(r.status == 201, "hold for %d s" % ttl, r)
        for what, method, path, body in (
                ("insert", "POST", "/v1/users", {"id": "ra%d" % ttl, "username": "RA%d" % ttl}),
                ("another hold", "POST", "/v1/users/holds",
                 {"constraint": "users_username", "value": "ra%d" % ttl, "ttl": 5})):
            r = fetch(S, method, path, body)
            ra = int(r.headers.get("retry-after", "0"))
            check(r.status == 409 and r.json["error"] == "busy" and ttl - 15 <= ra <= ttl,
                  "%s on a %d s hold: Retry-After %d" % (what, ttl, ra), r)
    r = fetch(S, "POST", "/v1/users/holds", {"constraint": "users_username", "value": "ra-short", "ttl": 0.3})
    r = fetch(S, "POST", "/v1/users", {"id": "ra-short", "username": "ra-short"})
    check(r.status == 409 and r.headers.get("retry-after") == "1", "a hold about to expire: Retry-After 1", r)


def utf8_json(out):
    """The JSON body of a raw response, decoded strictly as UTF-8."""
    body = out.partition(b"\r\n\r\n")[2]
    return json.loads(body.decode("utf-8", "strict"))


def t_error_utf8():
    # "message" is always there and valid UTF-8, whatever bytes came in
    def post(pk):
        body = json.dumps({"id": pk}).encode()
        return raw(S, b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nIdempotency-Key: caf\xc3\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    check(status_of_raw(post("utf1")) == 201, "insert with a non-UTF-8 op id")
    out = post("utf2")
    j = utf8_json(out)
    check(status_of_raw(out) == 422 and j["error"] == "op_id_reused" and "caf\\xC3" in j["message"],
          "reused op id caf\\xc3: 422 with a message", out)
    out = raw(S, b"GET /v1/%ff/x HTTP/1.1\r\nHost: localhost\r\n\r\n")
    j = utf8_json(out)
    check(status_of_raw(out) == 404 and "\\xFF" in j["message"], "table %ff: 404 with a message", out)
    out = raw(S, b"GET /v1/\xff\xfe/x HTTP/1.1\r\nHost: localhost\r\n\r\n")
    j = utf8_json(out)
    check(status_of_raw(out) == 404 and j.get("message"), "raw bytes in the path: 404 with a message", out)
    q = urllib.parse.urlencode([("v", "a" + "\u00e9" * 150)])
    out = raw(S, b"GET /v1/users/by/users_username?%s HTTP/1.1\r\nHost: localhost\r\n\r\n" % q.encode())
    j = utf8_json(out)
    check(status_of_raw(out) == 404 and j["message"].startswith("no record"),
          "a message cut inside a character: still there", out[:300])
    # the CLI prints its errors through the same object
    store = "lmdb:" + os.path.join(WORK, "utf8-cli")
    shutil.rmtree(os.path.join(WORK, "utf8-cli"), ignore_errors=True)
    schema = os.path.join(WORK, "utf8-schema.cql")
    with open(schema, "w") as f:
        f.write("CREATE TABLE t (id text PRIMARY KEY);")
    subprocess.run([BIN, "--store", store, "schema", "apply", schema], capture_output=True, check=True)
    cmd = [BIN.encode(), b"--store", store.encode(), b"insert", b"t", None, b"--op-id", b"caf\xc3"]
    cmd[5] = b'{"id":"a"}'
    subprocess.run(cmd, capture_output=True, check=True)
    cmd[5] = b'{"id":"b"}'
    out = subprocess.run(cmd, capture_output=True)
    j = json.loads(out.stdout.decode("utf-8", "strict"))
    check(out.returncode == 1 and j["error"] == "op_id_reused" and "caf\\xC3" in j["message"],
          "the CLI's error object keeps its message", out)


def t_limits():
    big = '{"id":"' + "x" * (1 << 20) + '"}'
    r = call(S, "POST", "/v1/users", big)
    check(r.status == 413 and r.json["error"] == "payload_too_large", "Content-Length over --max-body: 413", r)
    # chunked: no length up front; refused once it outgrows the limit
    s = socket.create_connection((S.host, S.port), timeout=10)
    s.sendall(b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"x" * 65536
    try:
        for _ in range(20):
            s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        s.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    out = checked_raw(b"POST /v1/users ", read_response(s))
    s.close()
    check(status_of_raw(out) == 413, "chunked body over --max-body: 413", out[:200])
    # a client that waits for 100 Continue is answered at once
    r = raw(S, b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5000000\r\n"
               b"Expect: 100-continue\r\n\r\n")
    check(status_of_raw(r) == 413, "Expect: 100-continue and too large: 413 at once", r[:200])
    # an early answer (405 here) to a client busy sending a body still arrives
    for _ in range(3):
        r = call(S, "PUT", "/v1/users", "z" * 300000)
        check(r.status == 405, "405 while a large body arrives", r)
    r = call(S, "GET", "/v1/users/u1", headers={"X-Filler": "y" * 40000})
    check(r.status == 431, "headers over --max-header: 431", r)
    r = raw(S, b"GET /v1/users/" + b"a" * 40000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
    check(status_of_raw(r) in (414, 431), "an over-long URL: 414/431", r[:100])
    r = call(S, "GET", "/healthz")
    check(r.status == 200, "still serving", r)


def t_holds():
    # reserve, others busy (409 busy), the token takes it (Unico-Hold), release
    r = fetch(S, "POST", "/v1/users/holds", {"constraint": "users_username", "value": "Hana", "ttl": 60})
    check(r.status == 201 and r.json["value"] == ["hana"] and r.json["token"].startswith("uh_"), "reserve: 201", r)
    tok = r.json["token"]
    r = fetch(S, "POST", "/v1/users/holds", {"constraint": "users_username", "value": ["hana"], "ttl": 60})
    check(r.status == 409 and r.json["error"] == "busy", "second hold: 409 busy", r)
    check(r.headers.get("retry-after") is not None, "busy has Retry-After", r.headers)
    r = fetch(S, "POST", "/v1/users", {"id": "h1", "username": "HANA"})
    check(r.status == 409 and r.json["error"] == "busy" and r.json["constraint"] == "users_username",
          "insert without the token: 409 busy", r)
    r = fetch(S, "POST", "/v1/users", {"id": "h1", "username": "hana"}, {"Unico-Hold": "uh_nope, " + tok})
    check(r.status == 201, "insert with the token: 201", r)
    r = call(S, "DELETE", "/v1/users/holds/" + tok)
    check(r.status == 404, "the taken hold is gone: 404", r)
    r = fetch(S, "POST", "/v1/users/holds", {"constraint": "users_username", "value": "hana", "ttl": 60})
    check(r.status == 409 and r.json["error"] == "conflict" and r.json["owner"] == "h1", "reserve a taken value: 409", r)
    # an update needs the token too; release frees the value at once
    r = fetch(S, "POST", "/v1/users/holds", {"constraint": "users_email", "value": "h@x.org", "ttl": 60})
    tok = r.json["token"]
    r = fetch(S, "PATCH", "/v1/users/h1", {"email": "H@X.org"})
    check(r.status == 409 and r.json["error"] == "busy", "update without the token: 409 busy", r)
    r = call(S, "DELETE", "/v1/users/holds/" + tok)
    check(r.status == 200 and r.json["released"] is True, "release: 200", r)
    r = fetch(S, "PATCH", "/v1/users/h1", {"email": "H@X.org"})
    check(r.status == 200, "then the update: 200", r)
    # bad requests
    for body in ({"constraint": "users_username", "value": "x"}, {"constraint": "users_username", "value": "x", "ttl": 0},
                 {"value": "x", "ttl": 5}, {"constraint": "users_username", "ttl": 5}, [1]):
        r = fetch(S, "POST", "/v1/users/holds", body)
        check(r.status == 400 and r.json["error"] == "invalid", "bad hold request: 400 %s" % body, r)
    r = fetch(S, "POST", "/v1/users/holds", {"constraint": "nope", "value": "x", "ttl": 5})
    check(r.status == 404, "unknown constraint: 404 (as for lookups)", r)
    r = call(S, "GET", "/v1/users/holds")
    check(r.status == 405, "GET on holds: 405", r)
    # DELETE /v1/{table}/holds/{token} releases only a hold of that table
    r = fetch(S, "POST", "/v1/users/holds", {"constraint": "users_username", "value": "tbl", "ttl": 60})
    tok = r.json["token"]
    r = call(S, "DELETE", "/v1/nosuchtable/holds/" + tok)
    check(r.status == 404 and "nosuchtable" in r.json["message"], "release through an unknown table: 404", r)
    r = call(S, "DELETE", "/v1/votes/holds/" + tok)
    check(r.status == 404 and r.json["error"] == "not_found", "release through another table: 404", r)
    r = fetch(S, "POST", "/v1/users/holds", {"constraint": "users_username", "value": "tbl", "ttl": 60})
    check(r.status == 409 and r.json["error"] == "busy", "the hold was not released through them", r)
    r = call(S, "DELETE", "/v1/users/holds/" + tok)
    check(r.status == 200 and r.json["released"] is True, "released through its own table", r)
    # a value nested too deeply: the answer says so
    deep = '{"constraint":"users_username","value":' + "[" * 3000 + "]" * 3000 + ',"ttl":5}'
    r = call(S, "POST", "/v1/users/holds", deep)
    check(r.status == 400 and "deep" in r.json["message"], "a too deep hold body: 400 saying so", r)
    r = call(S, "POST", "/v1/users/holds", '{"constraint":"users_username",')
    check(r.status == 400 and "not valid JSON" in r.json["message"], "malformed hold body: 400 saying so", r)
    # Idempotency-Key: a repeat is the first answer (same token), another
    # request under the key (or a write's key) is 422 op_id_reused
    hk = {"Idempotency-Key": "hk-1"}
    r = fetch(S, "POST", "/v1/users/holds", {"constraint": "users_username", "value": "Idmp", "ttl": 60}, hk)
    check(r.status == 201, "hold with Idempotency-Key: 201", r)
    first = r.json
    r = fetch(S, "POST", "/v1/users/holds", {"constraint": "users_username", "value": "Idmp", "ttl": 60}, hk)
    check(r.status == 201 and r.json == first, "the repeat: 201 with the same token", r)
    r = fetch(S, "POST", "/v1/users/holds", {"constraint": "users_username", "value": "Other", "ttl": 60}, hk)
    check(r.status == 422 and r.json["error"] == "op_id_reused", "the key with another value: 422", r)
    r = fetch(S, "POST", "/v1/users", {"id": "hk", "username": "other"}, hk)
    check(r.status == 422 and r.json["error"] == "op_id_reused", "the key for an insert: 422", r)
    r = fetch(S, "POST", "/v1/users", {"id": "hk2", "username": "other2"}, {"Idempotency-Key": "hk-2"})
    check(r.status == 201, "an insert under hk-2", r)
    r = fetch(S, "POST", "/v1/users/holds", {"constraint": "users_username", "value": "x3", "ttl": 60},
              {"Idempotency-Key": "hk-2"})
    check(r.status == 422 and r.json["error"] == "op_id_reused", "a hold under an insert's key: 422", r)
    r = fetch(S, "POST", "/v1/users", {"id": "hk3", "username": "idmp"}, {"Unico-Hold": first["token"]})
    check(r.status == 201, "the repeated hold's token takes the value", r)
    # a short hold expires: then anyone takes the value
    r = fetch(S, "POST", "/v1/users/holds", {"constraint": "users_phone_key", "value": "+1999", "ttl": 0.2})
    check(r.status == 201, "a 0.2 s hold", r)
    time.sleep(0.4)
    r = fetch(S, "POST", "/v1/users", {"id": "h2", "phone": "+1999"})
    check(r.status == 201, "after expiry the value is free", r)


def t_count_limits():
    for i, opt in enumerate(["a", "a", "b"]):
        r = fetch(S, "POST", "/v1/subs", {"id": "s%d" % i, "poll_id": "p", "name": "n%d" % i, "option": opt})
        check(r.status == 201, "subscriber %d" % i, r)
    r = fetch(S, "POST", "/v1/subs", {"id": "s9", "poll_id": "p", "name": "n9", "option": "a"})
    check(r.status == 422 and r.json["error"] == "limit" and r.json["constraint"] == "per_option"
          and r.json["value"] == ["p", "a"], "full option: 422 naming limit and group", r)
    r = fetch(S, "PATCH", "/v1/subs/s2", {"option": "a"})
    check(r.status == 422, "moving into a full option: 422", r)
    r = fetch(S, "GET", "/v1/subs/s2")
    check(r.json["record"]["option"] == "b" and r.json["version"] == 1, "record unchanged", r)
    r = call(S, "DELETE", "/v1/subs/s0")
    check(r.status == 200, "delete frees a slot", r)
    r = fetch(S, "PATCH", "/v1/subs/s2", {"option": "a"})
    check(r.status == 200, "then the move: 200", r)
    r = fetch(S, "POST", "/v1/subs", {"id": "s3", "poll_id": "p", "name": "N1", "option": "b"})
    check(r.status == 409 and r.json["constraint"] == "subs_poll_id_name_key", "name unique per poll: 409", r)


def t_stalled(srv=None):
    # Stalled clients: half a request line, half the headers, headers without
    # the body; more of them than S has turns in the store (--threads 4), and
    # than the event-loop server of t_event_loop has threads.
    S = srv or globals()["S"]
    stalls = []
    for part in (b"GET /v1/us", b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nContent-Le",
                 b'POST /v1/users HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{"id":'):
        for _ in range(3):
            s = socket.create_connection((S.host, S.port), timeout=10)
            s.sendall(part)
            stalls.append(s)
    time.sleep(0.2)
    answered = []
    errors = []

    def worker(k):
        for i in range(10):
            try:
                r = fetch(S, "GET", "/v1/users/u1") if i % 2 else \
                    fetch(S, "POST", "/v1/users", {"id": "st%d-%d" % (k, i), "username": "st%d-%d" % (k, i)})
            except Exception as e:  # a timeout too: it must not end the thread unseen
                errors.append(repr(e))
                continue
            (answered if r.status in (200, 201) else errors).append(r)

    ths = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    check(not errors and len(answered) == 80, "requests beside stalled clients succeed",
          (len(answered), errors[:3]))
    # No request waited on a stalled client: a stall ends only when the
    # server cuts it off (its request and idle timeouts, 30 s), so every
    # request was answered while all the stalls were still open, unanswered.
    cut = [s for s in stalls if select.select([s], [], [], 0)[0]]
    check(not cut, "every request answered while the stalls lasted (%d of %d cut off first)"
          % (len(cut), len(stalls)))
    for s in stalls:
        s.close()


def t_race(srv=None):
    S = srv or globals()["S"]
    n = 16
    barrier = threading.Barrier(n)
    results = [None] * n

    def racer(k):
        conn = http.client.HTTPConnection(S.host, S.port, timeout=20)
        conn.connect()
        body = json.dumps({"id": "race%d" % k, "username": "racer%d" % k, "email": "Contested@Example.com"})
        barrier.wait()
        conn.request("POST", "/v1/users", body)
        r = conn.getresponse()
        data = r.read()
        try:
            Resp(r.status, r.getheaders(), data, "POST", "/v1/users")
            results[k] = (r.status, json.loads(data))
        except AssertionError as e:
            results[k] = (r.status, str(e))
        conn.close()

    ths = [threading.Thread(target=racer, args=(k,)) for k in range(n)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    wins = [k for k in range(n) if results[k][0] == 201]
    check(len(wins) == 1, "exactly one 201", results)
    winner = "race%d" % wins[0]
    for k in range(n):
        if k != wins[0]:
            st, body = results[k]
            check(st == 409 and body["constraint"] == "users_email" and body["owner"] == winner,
                  "the others: 409 naming the winner", results[k])
    r = fetch(S, "GET", "/v1/users/by/users_email?v=contested@example.com")
    check(r.json["pk"] == winner, "the winner holds it", r)


def t_health_metrics():
    r = fetch(S, "GET", "/healthz")
    check(r.status == 200 and r.json == {"status": "ok"}, "healthz: liveness alone", r)
    r = fetch(S, "GET", "/readyz")
    check(r.status == 200 and r.json == {"status": "ready", "schema_version": 1}, "readyz", r)
    before = metric(S, "unico_http_requests_total", method="POST", route="/v1/{table}", status="201")
    conf = metric(S, "unico_unique_conflicts_total", table="users", constraint="users_email")
    ops = metric(S, "unico_store_operations_total", op="insert", outcome="ok")
    fetch(S, "POST", "/v1/users", {"id": "mx1", "email": "metrics@example.com"})
    fetch(S, "POST", "/v1/users", {"id": "mx2", "email": "METRICS@example.com"})
    check(metric_settled(S, "unico_http_requests_total", before + 1,
                         method="POST", route="/v1/{table}", status="201") == before + 1,
          "requests_total moves")
    check(metric(S, "unico_unique_conflicts_total", table="users", constraint="users_email") == conf + 1,
          "conflicts_total moves")
    check(metric(S, "unico_store_operations_total", op="insert", outcome="ok") == ops + 1, "store ops move")
    check(metric(S, "unico_store_operations_total", op="insert", outcome="conflict") >= 1, "conflict outcome")
    r = call(S, "GET", "/metrics")
    check(r.status == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4"), "metrics type", r)
    text = r.data.decode()
    for want in ('unico_http_request_duration_seconds_bucket{route="/v1/{table}",le="+Inf"}',
                 'unico_store_operation_duration_seconds_count{op="insert"}',
                 "# TYPE unico_http_requests_total counter", "unico_store_up 1",
                 'status="404"', 'status="405"'):
        check(want in text, "metrics has " + want, text[:2000])
    # the /metrics request reading it is the one in flight
    check(metric_settled(S, "unico_http_requests_in_flight", 1) == 1, "in_flight 1")
    inf = metric(S, "unico_http_request_duration_seconds_bucket", route="/v1/{table}", le="+Inf")
    cnt = metric(S, "unico_http_request_duration_seconds_count", route="/v1/{table}")
    check(inf == cnt and cnt > 0, "histogram +Inf bucket equals count", (inf, cnt))


def t_access_log():
    log = S.stderr()
    lines = [l for l in log.splitlines() if " POST /v1/users 201 " in l]
    check(lines, "access log lines", log[-2000:])
    f = lines[0].split()
    check(f[0].endswith("Z") and f[1] == "127.0.0.1" and f[-1].endswith("us"), "log fields", lines[0])
    # raw bytes in a path (t_error_utf8 sent \xff\xfe) are logged as ?
    check(" GET /v1/??/x 404 " in log, "non-ASCII path bytes logged as ?", log[-3000:])


def t_openapi():
    # the server serves docs/openapi.json as built, byte for byte
    r = call(S, "GET", "/v1/openapi.json")
    check(r.status == 200 and r.data == SPEC.raw, "GET /v1/openapi.json is docs/openapi.json byte for byte",
          (r.status, len(r.data), len(SPEC.raw)))
    check(r.headers.get("content-type") == "application/json", "as application/json", r.headers)
    check(r.json["openapi"].startswith("3.1"), "an OpenAPI 3.1 document", r.json.get("openapi"))
    r = call(S, "HEAD", "/v1/openapi.json")
    check(r.status == 200 and r.data == b"", "HEAD", r)
    r = call(S, "POST", "/v1/openapi.json", "{}")
    check(r.status == 405 and r.headers.get("allow") == "GET, HEAD", "POST: 405", r)
    r = fetch(S, "POST", "/v1/openapi%2Ejson", {"id": "x"})
    check(r.status == 404 and "openapi.json" in r.json["message"], "%2E: the table openapi.json", r)
    # The check can fail: answers the document does not describe are refused.
    bad = [("GET", "/healthz", 418, {"content-type": "application/json"}, b'{"status":"ok"}\n',
            "not documented"),
           ("GET", "/readyz", 200, {"content-type": "application/json"}, b'{"status":"ready","schema_version":"1"}\n',
            "is not of type"),
           ("POST", "/v1/users", 201, {"content-type": "application/json", "etag": '"1"'},
            b'{"pk":"u1","version":1}\n', "Location"),
           ("POST", "/v1/users", 409, {"content-type": "application/json"},
            b'{"error":"conflict","message":"taken","constraint":"c","value":["x"]}\n', "owner"),
           ("GET", "/v1/users/u1", 200, {"content-type": "application/json", "etag": '"1"'},
            b'{"pk":"u1","version":1,"record":{},"extra":1}\n', "extra"),
           ("PUT", "/v1/users", 405, {"content-type": "application/json", "allow": "POST, PUT"},
            b'{"error":"method_not_allowed","message":"no"}\n', "Allow"),
           ("GET", "/nowhere", 200, {"content-type": "application/json"}, b'{}\n', "404")]
    for method, path, status, headers, body, why in bad:
        try:
            SPEC.check(method, path, status, headers, body)
        except openapi_check.OpenAPIMismatch as e:
            check(why in str(e), "the mismatch says why (%s)" % why, str(e))
            continue
        check(False, "%s %s -> %d does not fit docs/openapi.json: refused" % (method, path, status))


SHARED = [t_schema, t_openapi, t_insert_get, t_conflict, t_namespace, t_bad_input, t_not_found, t_method_not_allowed,
          t_versions, t_move_values, t_lookup, t_keys, t_idempotency, t_batch, t_holds, t_count_limits,
          t_head_rules, t_cross_site, t_header_whitespace, t_transfer_encoding, t_hold_retry_after,
          t_error_utf8,
          t_limits, t_stalled, t_race,
          t_health_metrics, t_access_log]


# ---------------------------------------------------------------------------
# tests with servers of their own


def t_token():
    tok = os.path.join(WORK, "token.txt")
    with open(tok, "w") as f:
        f.write("s3cret-token-0123456789\n")
    srv = Server("token", "--token-file", tok)
    try:
        r = fetch(srv, "GET", "/v1/_schema")
        check(r.status == 401 and r.json["error"] == "unauthorized", "no token: 401", r)
        check(r.headers.get("www-authenticate", "").startswith("Bearer"), "WWW-Authenticate", r.headers)
        r = fetch(srv, "GET", "/metrics", headers={"Authorization": "Bearer wrong-token-0123456789"})
        check(r.status == 401, "wrong token: 401", r)
        r = fetch(srv, "GET", "/v1/_schema", headers={"Authorization": "Bearer s3cret-token-012345678"})
        check(r.status == 401, "a prefix of the token: 401", r)
        r = fetch(srv, "POST", "/v1/users", {"id": "x"}, {"Authorization": "Basic czNjcmV0"})
        check(r.status == 401, "other scheme: 401", r)
        r = call(srv, "POST", "/v1/users", '{"id":"' + "x" * 500000 + '"}')
        check(r.status == 401, "no token, large body: 401 all the same", r)
        r = fetch(srv, "GET", "/healthz")
        check(r.status == 200, "/healthz needs no token", r)
        r = fetch(srv, "GET", "/v1/openapi.json")
        check(r.status == 200 and r.data == SPEC.raw, "nor does /v1/openapi.json", r)
        r = fetch(srv, "PUT", "/v1/_schema", {"ddl": SCHEMA},
                  {"Authorization": "Bearer s3cret-token-0123456789"})
        check(r.status == 200, "right token: 200", r)
        r = fetch(srv, "GET", "/metrics", headers={"Authorization": "bearer s3cret-token-0123456789"})
        check(r.status == 200, "scheme is case-insensitive", r)
        # blanks around the value are not part of it; a second line is refused
        out = raw(srv, b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n"
                       b"Authorization: \t Bearer s3cret-token-0123456789 \t\r\n\r\n")
        check(status_of_raw(out) == 200, "Authorization with blanks around it: 200", out[:300])
        out = raw(srv, b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer s3cret-token-0123456789"
                       b"\r\nAuthorization: Bearer s3cret-token-0123456789\r\n\r\n")
        check(status_of_raw(out) == 400 and b"2 Authorization headers" in out, "two Authorization lines: 400", out)
    finally:
        check(srv.stop() == 0, "token server exits 0")
    # Off loopback, a token is required.
    srv = Server("open", "--listen", "0.0.0.0:0", "--allow-plaintext", expect_start=False)
    rc = srv.proc.wait(30)
    out = srv.proc.stdout.read().decode()
    srv.stop()
    check(rc == 1, "0.0.0.0 without a token: exit 1", rc)
    check(json.loads(out)["error"] == "usage" and "token" in srv.stderr(), "a clear message", (out, srv.stderr()))
    srv = Server("open2", "--listen", "0.0.0.0:0", "--token-file", tok, "--allow-plaintext")
    try:
        r = fetch(srv, "GET", "/healthz")
        check(r.status == 200, "0.0.0.0 with a token serves", r)
    finally:
        check(srv.stop() == 0, "exits 0")


def t_plaintext():
    # Secure by default: plain HTTP off the loopback interface is refused
    # (exit 1, saying how to serve HTTPS or to allow it), even with a token;
    # --allow-plaintext serves it, with a warning and a gauge.
    tok = os.path.join(WORK, "token-plain.txt")
    with open(tok, "w") as f:
        f.write("plain-token-0123456789\n")
    auth = {"Authorization": "Bearer plain-token-0123456789"}
    for listen in ("0.0.0.0:0", "[::]:0"):
        srv = Server("plain-refused", "--listen", listen, "--token-file", tok, expect_start=False)
        try:
            rc = srv.proc.wait(15)
        except subprocess.TimeoutExpired:
            srv.stop()
            check(False, "%s in plain HTTP: the server started" % listen)
        out = srv.proc.stdout.read().decode()
        srv.stop()
        err = srv.stderr()
        check(rc == 1, "%s in plain HTTP: exit 1" % listen, (rc, err))
        check(json.loads(out)["error"] == "usage" and "plain HTTP" in err and "--tls-cert" in err
              and "--allow-plaintext" in err, "a clear message", (out, err))
    srv = Server("plain-allowed", "--listen", "0.0.0.0:0", "--token-file", tok, "--allow-plaintext")
    try:
        r = fetch(srv, "GET", "/healthz")
        check(r.status == 200, "--allow-plaintext serves", r)
        # (logged just after the ready line: the log may trail the first
        # answer, by much under ThreadSanitizer)
        deadline = time.time() + 10
        while "warning: plain HTTP" not in srv.stderr() and time.time() < deadline:
            time.sleep(0.05)
        check("warning: plain HTTP" in srv.stderr(), "a warning at start", srv.stderr())
        check(metric(srv, "unico_http_plaintext_exposed", headers=auth) == 1, "the gauge says 1")
    finally:
        check(srv.stop() == 0, "exits 0")
    # loopback needs neither, and says nothing
    srv = Server("plain-loopback", "--token-file", tok)
    try:
        check(metric(srv, "unico_http_plaintext_exposed", headers=auth) == 0, "0 on loopback")
        check("warning" not in srv.stderr(), "no warning on loopback", srv.stderr())
    finally:
        check(srv.stop() == 0, "exits 0")


def t_log_json():
    # --log-format json: the access log and the server's own messages as
    # one JSON object a line; X-Request-Id taken or made, echoed back.
    tok = os.path.join(WORK, "token-json.txt")
    with open(tok, "w") as f:
        f.write("signup json-token-0123456789\n")
    auth = {"Authorization": "Bearer json-token-0123456789"}
    srv = Server("logjson", "--log-format", "json", "--token-file", tok)
    try:
        r = call(srv, "PUT", "/v1/_schema", SCHEMA, auth)
        check(r.status == 200, "schema", r)
        r = call(srv, "POST", "/v1/users", {"id": "j1", "username": "jay"},
                 dict(auth, **{"X-Request-Id": "req-abc.123"}))
        check(r.status == 201 and r.headers.get("x-request-id") == "req-abc.123", "the caller's id echoed", r)
        r = call(srv, "POST", "/v1/users", {"id": "j2", "username": "jay"}, auth)
        made = r.headers.get("x-request-id", "")
        check(r.status == 409 and re.fullmatch("[0-9a-f]{32}", made), "an id made when none is sent", r)
        r2 = call(srv, "GET", "/v1/users/j1", headers=dict(auth, **{"X-Request-Id": "has space"}))
        other = r2.headers.get("x-request-id", "")
        check(re.fullmatch("[0-9a-f]{32}", other) and other != made, "an unusable id replaced, ids differ", r2)
        r = call(srv, "GET", "/v1/users/j1", headers=dict(auth, **{"X-Request-Id": "x" * 129}))
        check(len(r.headers.get("x-request-id", "")) == 32, "an id over 128 characters replaced", r)
    finally:
        rc = srv.stop()
    check(rc == 0, "exits 0", rc)
    objs = []
    for line in srv.stderr().splitlines():
        try:
            objs.append(json.loads(line))
        except ValueError:
            check(False, "every line of stderr is JSON", line)
    for o in objs:
        check(o.get("level") in ("info", "warn", "error") and o.get("time", "").endswith("Z") and "msg" in o,
              "time, level, msg in every line", o)
    msgs = [o["msg"] for o in objs]
    check(any(m.startswith("listening on http://") for m in msgs) and "stopped" in msgs,
          "the server's own messages too", msgs)
    reqs = {o["request_id"]: o for o in objs if o["msg"] == "request"}
    a = reqs.get("req-abc.123")
    check(a and a["method"] == "POST" and a["route"] == "/v1/{table}" and a["path"] == "/v1/users"
          and a["status"] == 201 and a["table"] == "users" and a["outcome"] == "ok" and a["token"] == "signup"
          and a["remote"] == "127.0.0.1" and isinstance(a["duration_ms"], float), "the insert's line", a)
    b = reqs.get(made)
    check(b and b["status"] == 409 and b["outcome"] == "conflict", "the conflict's line, by its made id", b)
    c = reqs.get(other)
    check(c and c["route"] == "/v1/{table}/{pk}" and c["outcome"] == "ok", "the read's line", c)
    srv = Server("logjson-bad", "--log-format", "yaml", expect_start=False)
    try:
        rc = srv.proc.wait(15)
    except subprocess.TimeoutExpired:
        srv.stop()
        check(False, "--log-format yaml: started")
    srv.stop()
    check(rc == 1 and "--log-format needs text or json" in srv.stderr(), "--log-format yaml: exit 1", srv.stderr())


def t_otlp():
    # --otlp-endpoint: one span per request, in the caller's trace
    # (traceparent), its store call a child span, sent by OTLP/HTTP (JSON)
    # to a tiny collector here; a caller's "not sampled" is followed.
    import http.server
    got = []

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            got.append((self.path, self.headers.get("Content-Type"), body))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *a):
            pass

    col = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    th = threading.Thread(target=col.serve_forever, daemon=True)
    th.start()
    trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    srv = Server("otlp", "--otlp-endpoint", "http://127.0.0.1:%d" % col.server_address[1])
    try:
        r = call(srv, "PUT", "/v1/_schema", SCHEMA)
        check(r.status == 200, "schema", r)
        r = call(srv, "POST", "/v1/users", {"id": "t1", "username": "tia"},
                 {"traceparent": "00-%s-%s-01" % (trace, parent)})
        check(r.status == 201, "insert", r)
        r = call(srv, "GET", "/v1/users/t1", headers={"traceparent": "00-%s-%s-00" % ("1" * 32, parent)})
        check(r.status == 200, "a read not sampled by its caller", r)
        r = call(srv, "GET", "/v1/users/t1", headers={"traceparent": "00-%s-%s-01" % ("0" * 32, parent)})
        check(r.status == 200, "a read with an invalid traceparent", r)
        deadline = time.time() + 5
        spans = []
        while time.time() < deadline:
            spans = [s for _, _, b in list(got) for rs in json.loads(b)["resourceSpans"]
                     for ss in rs["scopeSpans"] for s in ss["spans"]]
            if len(spans) >= 5:
                break
            time.sleep(0.1)
    finally:
        check(srv.stop() == 0, "exits 0")
        col.shutdown()
        col.server_close()
    check(got and all(p == "/v1/traces" and ct == "application/json" for p, ct, _ in got),
          "POSTs of JSON to /v1/traces", [(p, ct) for p, ct, _ in got])
    res = json.loads(got[0][2])["resourceSpans"][0]["resource"]["attributes"]
    check({"key": "service.name", "value": {"stringValue": "unico"}} in res, "service.name unico", res)
    ins = [s for s in spans if s["name"] == "POST /v1/{table}"]
    check(len(ins) == 1 and ins[0]["traceId"] == trace and ins[0]["parentSpanId"] == parent
          and ins[0]["kind"] == 2 and re.fullmatch("[0-9a-f]{16}", ins[0]["spanId"]),
          "the insert's span: the caller's trace id, its parent the caller's span", spans)
    attrs = {a["key"]: list(a["value"].values())[0] for a in ins[0]["attributes"]}
    check(attrs.get("http.response.status_code") == "201" and attrs.get("unico.table") == "users"
          and attrs.get("http.route") == "/v1/{table}", "its attributes", attrs)
    kids = [s for s in spans if s.get("parentSpanId") == ins[0]["spanId"]]
    check(len(kids) == 1 and kids[0]["name"] == "unico insert" and kids[0]["traceId"] == trace
          and int(ins[0]["startTimeUnixNano"]) <= int(kids[0]["startTimeUnixNano"])
          <= int(kids[0]["endTimeUnixNano"]) <= int(ins[0]["endTimeUnixNano"]),
          "the store call under it, within it", kids)
    check(not [s for s in spans if s["traceId"] == "1" * 32], "a not-sampled request is not exported", spans)
    reads = [s for s in spans if s["name"] == "GET /v1/{table}/{pk}"]
    check(len(reads) == 1 and reads[0]["traceId"] not in (trace, "0" * 32) and "parentSpanId" not in reads[0]
          and re.fullmatch("[0-9a-f]{32}", reads[0]["traceId"]), "an invalid traceparent: a new trace", reads)
    srv = Server("otlp-bad", "--otlp-endpoint", "collector:4318", expect_start=False)
    try:
        rc = srv.proc.wait(15)
    except subprocess.TimeoutExpired:
        srv.stop()
        check(False, "a bad --otlp-endpoint: started")
    srv.stop()
    check(rc == 1 and "--otlp-endpoint needs an http://" in srv.stderr(), "a bad endpoint: exit 1", srv.stderr())


def t_readyz():
    # /readyz: 200 only while writes can be served; 503 with the reason
    # (no schema yet, draining), no token needed, the unico_ready gauge.
    tok = os.path.join(WORK, "token-ready.txt")
    with open(tok, "w") as f:
        f.write("ready-token-0123456789\n")
    auth = {"Authorization": "Bearer ready-token-0123456789"}
    srv = Server("readyz", "--token-file", tok)
    try:
        r = fetch(srv, "GET", "/healthz")
        check(r.status == 200 and r.json == {"status": "ok"}, "healthz: alive", r)
        r = fetch(srv, "GET", "/readyz")
        check(r.status == 503 and r.json["status"] == "not_ready" and r.json["reason"] == "no_schema"
              and "schema" in r.json["message"] and r.headers.get("retry-after") == "1",
              "readyz without a schema: 503 no_schema, and no token needed", r)
        check(metric(srv, "unico_ready", headers=auth) == 0, "unico_ready 0")
        check(metric(srv, "unico_not_ready", headers=auth, reason="no_schema") == 1, "unico_not_ready no_schema")
        r = fetch(srv, "PUT", "/v1/_schema", {"ddl": SCHEMA}, auth)
        check(r.status == 200, "schema", r)
        r = fetch(srv, "GET", "/readyz")
        check(r.status == 200 and r.json == {"status": "ready", "schema_version": 1}, "readyz: 200 ready", r)
        r = call(srv, "HEAD", "/readyz")
        check(r.status == 200 and not r.data, "HEAD /readyz", r)
        r = call(srv, "POST", "/readyz", "{}")
        check(r.status == 405 and r.headers.get("allow") == "GET, HEAD", "POST /readyz: 405", r)
        check(metric(srv, "unico_ready", headers=auth) == 1, "unico_ready 1")
        check(metric(srv, "unico_http_requests_total", headers=auth, method="GET", route="/readyz",
                     status="200") >= 1, "the route is counted as /readyz")
        # draining: a connection kept open asks once SIGTERM arrived
        conn = http.client.HTTPConnection(srv.host, srv.port, timeout=20)
        conn.request("GET", "/readyz")
        r = conn.getresponse()
        Resp(r.status, r.getheaders(), r.read(), "GET", "/readyz")
        live = http.client.HTTPConnection(srv.host, srv.port, timeout=20)
        live.request("GET", "/healthz")
        r = live.getresponse()
        Resp(r.status, r.getheaders(), r.read(), "GET", "/healthz")
        slow = socket.create_connection((srv.host, srv.port), timeout=20)
        body = json.dumps({"id": "late", "email": "late@example.com"}).encode()
        slow.sendall(b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ready-token-0123456789"
                     b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:5])
        time.sleep(0.2)
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        conn.request("GET", "/readyz")
        r = conn.getresponse()
        rr = Resp(r.status, r.getheaders(), r.read(), "GET", "/readyz")
        check(rr.status == 503 and rr.json["reason"] == "draining", "readyz while draining: 503 draining", rr)
        conn.close()
        live.request("GET", "/healthz")
        r = live.getresponse()
        rr = Resp(r.status, r.getheaders(), r.read(), "GET", "/healthz")
        check(rr.status == 200 and rr.json == {"status": "ok"}, "healthz while draining: 200 (alive)", rr)
        live.close()
        slow.sendall(body[5:])
        read_response(slow)
        slow.close()
    finally:
        check(srv.stop() == 0, "exits 0")


def t_unavailable():
    base = os.path.join(WORK, "unavail")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    blocker = os.path.join(base, "blocker")
    with open(blocker, "w") as f:
        f.write("a file where the store's parent directory should be\n")
    srv = Server("unavail-srv", store="lmdb:" + os.path.join(blocker, "data"))
    try:
        r = fetch(srv, "GET", "/healthz")
        check(r.status == 200 and r.json == {"status": "ok"}, "healthz: alive without a store", r)
        r = fetch(srv, "GET", "/readyz")
        check(r.status == 503 and r.json["reason"] == "store_unavailable"
              and r.headers.get("retry-after") == "1", "readyz: 503 store_unavailable", r)
        r = fetch(srv, "POST", "/v1/users", {"id": "x"})
        check(r.status == 503 and r.json["error"] == "unavailable" and r.headers.get("retry-after") == "1",
              "write: 503 with Retry-After", r)
        r = fetch(srv, "GET", "/v1/users/x")
        check(r.status == 503, "read: 503", r)
        check(metric(srv, "unico_store_up") == 0, "store_up 0")
        os.remove(blocker)
        os.makedirs(blocker)
        deadline = time.time() + 10
        while time.time() < deadline:
            r = fetch(srv, "GET", "/readyz")
            if r.status == 200 or r.json.get("reason") == "no_schema":
                break
            time.sleep(0.2)
        check(r.json.get("reason") == "no_schema", "the store opens once it can (then wants a schema)", r)
        r = fetch(srv, "PUT", "/v1/_schema", {"ddl": SCHEMA})
        r = fetch(srv, "POST", "/v1/users", {"id": "x"})
        check(r.status == 201, "then writes work", r)
    finally:
        check(srv.stop() == 0, "exits 0")
    # a store URL that is wrong (not merely absent) is a configuration error
    srv = Server("badurl", store="lmdb:" + os.path.join(base, "d") + "?sync=maybe", expect_start=False)
    rc = srv.proc.wait(30)
    srv.stop()
    check(rc == 1, "a bad store URL: exit 1", rc)


def t_secrets():
    # A store URL is shown (stdout's JSON line, stderr, error objects, 503s)
    # without its secrets, and a '"' in it leaves stdout valid JSON.
    base = os.path.join(WORK, "secrets")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    secrets = ["hunter2-pw", "s3cr3t-pw", "k3y-pass-pw"]

    def no_secret(what, text):
        for sec in secrets:
            check(sec not in text, "%s shows no secret" % what, text)

    def first_json_line(srv):
        ready, _, _ = select.select([srv.proc.stdout], [], [], 30)
        line = srv.proc.stdout.readline() if ready else b""
        check(line, "a line on stdout", srv.stderr())
        try:
            return line, json.loads(line)
        except ValueError:
            check(False, "stdout is valid JSON", line)

    # a store not there yet (nothing listens on port 1): serve starts, 503s
    # (over TLS: the key's passphrase is a secret too)
    url = ('cassandras://127.0.0.1:1/ks?user=bob&password=s3cr3t-pw&tls_key_password=k3y-pass-pw'
           '&replication=x"y')
    srv = Server("secrets-unavail", store=url, expect_start=False)
    try:
        line, info = first_json_line(srv)
        no_secret("stdout", line.decode())
        check(info["store"] == 'cassandras://127.0.0.1:1/ks?user=bob&password=***&tls_key_password=***'
              '&replication=x"y', "the store, masked", info)
        srv.url = info["listen"]
        hp = urllib.parse.urlsplit(srv.url)
        srv.host, srv.port = hp.hostname, hp.port
        r = fetch(srv, "GET", "/healthz")
        check(r.status == 200, "healthz: alive", r)
        r = fetch(srv, "GET", "/readyz")
        check(r.status == 503 and r.json["reason"] == "store_unavailable", "readyz: 503", r)
        no_secret("a 503", r.data.decode())
        r = fetch(srv, "POST", "/v1/users", {"id": "x"})
        check(r.status == 503, "write: 503", r)
        no_secret("a 503", r.data.decode())
    finally:
        check(srv.stop() == 0, "exits 0")
    no_secret("stderr", srv.stderr())
    check("password=***" in srv.stderr(), "stderr names the store, masked", srv.stderr())

    # refused URLs: the library's message quotes the URL, or names an option
    # (a key that cannot be read with its passphrase: a bad option)
    bad_key = os.path.join(base, "bad-key.pem")
    with open(bad_key, "w") as f:
        f.write("not a key\n")
    for name, url in [("secrets-userinfo", "cassandra://bob:hunter2-pw@127.0.0.1:1/ks?password=s3cr3t-pw"),
                      ("secrets-tls-key", "cassandras://127.0.0.1:1/ks?tls_cert=%s&tls_key=%s"
                       "&tls_key_password=k3y-pass-pw" % (bad_key, bad_key)),
                      ("secrets-lmdb", 'lmdb:' + os.path.join(base, 'a"b') + "?password=s3cr3t-pw")]:
        srv = Server(name, store=url, expect_start=False)
        rc = srv.proc.wait(30)
        out = srv.proc.stdout.read().decode()
        srv.stop()
        check(rc == 1, "%s: exit 1" % name, (rc, out, srv.stderr()))
        no_secret(name + " stdout", out)
        no_secret(name + " stderr", srv.stderr())
        check(json.loads(out)["error"] == "invalid", "%s: an error object" % name, out)
        # and the CLI, on the same URL
        cli = subprocess.run([BIN, "--store", url, "get", "users", "x"], capture_output=True)
        check(cli.returncode == 1, "%s: the CLI exits 1" % name, cli)
        no_secret(name + " CLI stdout", cli.stdout.decode())
        no_secret(name + " CLI stderr", cli.stderr.decode())

    # a DynamoDB store not there yet, with AWS keys in the environment: the
    # secret key and session token appear nowhere (503s, /metrics, stdout,
    # stderr), nor in the CLI's error
    aws = {"AWS_ACCESS_KEY_ID": "AKIAHTTPAPITEST", "AWS_SECRET_ACCESS_KEY": "aws-key-s3cr3t-pw",
           "AWS_SESSION_TOKEN": "aws-token-s3cr3t-pw", "AWS_EC2_METADATA_DISABLED": "true"}
    saved = {k: os.environ.get(k) for k in aws}
    os.environ.update(aws)
    secrets += ["aws-key-s3cr3t-pw", "aws-token-s3cr3t-pw"]
    try:
        url = "dynamodb://127.0.0.1:1/unico_secrets"
        srv = Server("secrets-dynamodb", store=url, expect_start=False)
        try:
            line, info = first_json_line(srv)
            no_secret("dynamodb stdout", line.decode())
            srv.url = info["listen"]
            hp = urllib.parse.urlsplit(srv.url)
            srv.host, srv.port = hp.hostname, hp.port
            for method, path, body in [("GET", "/healthz", None), ("POST", "/v1/users", {"id": "x"}),
                                       ("GET", "/metrics", None)]:
                r = fetch(srv, method, path, body)
                no_secret("dynamodb %s %s" % (method, path), r.data.decode())
        finally:
            check(srv.stop() == 0, "exits 0")
        no_secret("dynamodb stderr", srv.stderr())
        cli = subprocess.run([BIN, "--store", url, "get", "users", "x"], capture_output=True)
        check(cli.returncode == 7, "dynamodb: the CLI exits 7", cli)
        no_secret("dynamodb CLI", cli.stdout.decode() + cli.stderr.decode())
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    # a store that opens, with a '"' in its path: stdout stays JSON
    url = "lmdb:" + os.path.join(base, 'da"ta') + os.environ.get("UNICO_TEST_STORE_QUERY", "")
    srv = Server("secrets-quote", store=url, expect_start=False)
    try:
        line, info = first_json_line(srv)
        check(info["store"] == url and info["listen"].startswith("http://127.0.0.1:"),
              "the store as given", info)
    finally:
        check(srv.stop() == 0, "exits 0")


def t_idle_timeout():
    srv = Server("idle", "--idle-timeout", "1", "--request-timeout", "2", "--max-per-ip", "3")
    try:
        fetch(srv, "PUT", "/v1/_schema", {"ddl": SCHEMA})
        # (closed before the socket's 10 s timeout, not before --idle-timeout:
        # t0 is taken before the last byte leaves, the server's timer after)
        s = socket.create_connection((srv.host, srv.port), timeout=10)
        t0 = time.time()
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost")
        d = s.recv(100)
        check(d == b"" and time.time() - t0 > 0.5, "an idle connection is closed", (d, time.time() - t0))
        s.close()
        # a body trickling in, byte by byte: cut off at --request-timeout
        # (before it is whole: 100 bytes, one every 0.5 s, never idle for
        # 1 s; and not before --request-timeout, counted from its first byte)
        s = socket.create_connection((srv.host, srv.port), timeout=10)
        t0 = time.time()
        s.sendall(b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n")
        closed, sent = False, 0
        try:
            while sent < 99:
                s.sendall(b" ")
                sent += 1
                time.sleep(0.5)
                r, _, _ = select.select([s], [], [], 0)
                if r and s.recv(100) == b"":
                    closed = True
                    break
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        check(closed and time.time() - t0 > 1.5, "a slow body is cut off", (sent, time.time() - t0))
        s.close()
        time.sleep(0.2)
        # --max-per-ip 3: a fourth connection from one address is refused
        held = [socket.create_connection((srv.host, srv.port), timeout=5) for _ in range(3)]
        time.sleep(0.2)
        s = socket.create_connection((srv.host, srv.port), timeout=5)
        try:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            d = s.recv(100)
        except (ConnectionResetError, BrokenPipeError):
            d = b""
        check(d == b"", "a connection over --max-per-ip is closed", d)
        s.close()
        for h in held:
            h.close()
        time.sleep(0.2)
        r = fetch(srv, "GET", "/healthz")
        check(r.status == 200, "still serving", r)
    finally:
        check(srv.stop() == 0, "exits 0")


def closed_soon(sock, within):
    """Whether the server closes sock (EOF or reset) within `within` s."""
    sock.settimeout(within)
    try:
        return sock.recv(100) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def t_max_connections():
    # Over --max-connections a client is closed at once, in both threading
    # models (with event loops it used to wait in the kernel's backlog).
    for model in ("2", "0"):
        srv = Server("maxconn" + model, "--event-loop", model, "--max-connections", "4")
        try:
            held = [socket.create_connection((srv.host, srv.port), timeout=5) for _ in range(4)]
            time.sleep(0.3)
            # at once: while the four are still open (waiting in the backlog,
            # it would wait for one of them to close: their idle timeout is 30 s)
            extra = socket.create_connection((srv.host, srv.port), timeout=5)
            check(closed_soon(extra, 10.0) and not select.select(held, [], [], 0)[0],
                  "event loop %s: a fifth connection is closed at once" % model)
            extra.close()
            held.pop().close()
            time.sleep(0.2)
            r = fetch(srv, "GET", "/healthz")
            check(r.status == 200, "event loop %s: served again below the cap" % model, r)
            for h in held:
                h.close()
            time.sleep(0.2)
            check(metric(srv, "unico_http_connections_refused_total") == 1, "counted as refused")
        finally:
            check(srv.stop() == 0, "exits 0")


def t_slow_heads():
    # Headers trickled a line at a time never let the idle timeout fire;
    # --request-timeout counts from a request's first byte, headers
    # included. Both threading models.
    for model in ("0", "2"):
        srv = Server("slowheads" + model, "--event-loop", model, "--max-connections", "4",
                     "--idle-timeout", "5", "--request-timeout", "1")
        try:
            trick = [socket.create_connection((srv.host, srv.port), timeout=5) for _ in range(4)]
            for t in trick:
                t.sendall(b"GET /healthz HTTP/1.1\r\n")
            t0 = time.time()
            cut = [None] * 4
            t_first = t0
            # (trickled for up to 4.5 s: what cuts them is the request
            # timeout, the only one that can, not a bound on when)
            while time.time() - t_first < 4.5 and None in cut:
                for i, t in enumerate(trick):
                    if cut[i] is None:
                        try:
                            t.sendall(b"X-Slow: 1\r\n")
                            if closed_soon(t, 0.05):
                                cut[i] = time.time() - t_first
                        except OSError:
                            cut[i] = time.time() - t_first
                time.sleep(0.2)
            check(None not in cut and min(cut) > 0.8,
                  "event loop %s: trickled headers are cut by the request timeout, not before it" % model, cut)
            for t in trick:
                t.close()
            time.sleep(0.1)
            r = fetch(srv, "GET", "/healthz")
            check(r.status == 200, "then new clients are served", r)
            check(metric(srv, "unico_http_request_timeouts_total") == 4, "counted as request timeouts")
            # a request that arrives whole in time is not cut, idle or not
            c = http.client.HTTPConnection(srv.host, srv.port, timeout=5)
            c.request("GET", "/healthz")
            r = c.getresponse()
            Resp(r.status, r.getheaders(), r.read(), "GET", "/healthz")
            time.sleep(1.3)  # idle on a keep-alive connection: not a slow request
            c.request("GET", "/healthz")
            r = c.getresponse()
            r = Resp(r.status, r.getheaders(), r.read(), "GET", "/healthz")
            check(r.status == 200, "an idle keep-alive connection lives on")
            c.close()
        finally:
            check(srv.stop() == 0, "exits 0")


def t_per_ip():
    # Off loopback a client address gets a quarter of --max-connections by
    # default (here 2 of 8).
    tok = os.path.join(WORK, "token.txt")
    with open(tok, "w") as f:
        f.write("s3cret-token-0123456789\n")
    srv = Server("perip", "--listen", "0.0.0.0:0", "--token-file", tok, "--allow-plaintext",
                 "--max-connections", "8")
    try:
        held = [socket.create_connection(("127.0.0.1", srv.port), timeout=5) for _ in range(2)]
        time.sleep(0.2)
        third = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        check(closed_soon(third, 1.0), "bound beyond loopback: a third connection from one address is closed")
        third.close()
        for h in held:
            h.close()
    finally:
        check(srv.stop() == 0, "exits 0")


def t_store_owned():
    # A second server on a store another process owns (log mode) answers
    # 503 at once, /readyz included (/healthz: 200, it is alive), and takes
    # the store over once the owner is gone (a rolling restart).
    first = Server("owned", "--event-loop", "0", store="lmdb:" + os.path.join(WORK, "owned-data") + "?wal=on")
    second = Server("owned2", "--event-loop", "0", store=first.store)
    try:
        # "at once": answered while the owner still holds the store (a
        # server that waited for it would still be waiting), not by a
        # wall-clock bound a loaded machine could break
        for path in ("/readyz", "/readyz", "/v1/users/x"):
            r = fetch(second, "GET", path)
            check(r.status == 503 and first.proc.poll() is None,
                  "%s on a store owned elsewhere: 503 while the owner holds it" % path, r)
        check(r.json["error"] == "unavailable" and "another process" in r.json["message"], "says why", r)
        r = fetch(second, "GET", "/healthz")
        check(r.status == 200 and first.proc.poll() is None, "healthz: alive meanwhile", r)
        check(first.stop() == 0, "the owner exits 0")
        deadline = time.time() + 10
        while time.time() < deadline:
            r = fetch(second, "GET", "/readyz")
            if r.status == 200 or r.json.get("reason") == "no_schema":
                break
            time.sleep(0.2)
        check(r.json.get("reason") == "no_schema" or r.status == 200,
              "the second server takes the store over", r)
    finally:
        first.stop()
        check(second.stop() == 0, "exits 0")


def t_shutdown():
    srv = Server("shutdown", "--threads", "4")
    fetch(srv, "PUT", "/v1/_schema", {"ddl": SCHEMA})
    acked = []
    mismatches = []  # answers docs/openapi.json does not describe
    lock = threading.Lock()
    stop = threading.Event()

    def streamer(k):
        conn = http.client.HTTPConnection(srv.host, srv.port, timeout=20)
        i = 0
        while not stop.is_set():
            pk = "s%d-%d" % (k, i)
            i += 1
            try:
                conn.request("POST", "/v1/users", json.dumps({"id": pk, "email": pk + "@example.com"}))
                r = conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException):
                return  # the server went away: this write is not acknowledged
            try:
                Resp(r.status, r.getheaders(), data, "POST", "/v1/users")
            except AssertionError as e:
                mismatches.append(str(e))
            if r.status == 201:
                with lock:
                    acked.append(pk)
            if r.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = http.client.HTTPConnection(srv.host, srv.port, timeout=20)

    # A request in flight at SIGTERM: headers and half the body sent.
    slow = socket.create_connection((srv.host, srv.port), timeout=20)
    body = json.dumps({"id": "inflight", "email": "inflight@example.com"}).encode()
    slow.sendall(b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:10])
    ths = [threading.Thread(target=streamer, args=(k,)) for k in range(4)]
    for t in ths:
        t.start()
    time.sleep(0.6)
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    slow.sendall(body[10:])  # the rest arrives after the signal: still answered
    answer = read_response(slow)
    slow.close()
    stop.set()
    for t in ths:
        t.join()
    rc = srv.stop()
    check(rc == 0, "SIGTERM: exit 0", (rc, srv.stderr()[-2000:]))
    check(status_of_raw(answer) == 201, "the request in flight at SIGTERM is answered", answer[:200])
    checked_raw(b"POST /v1/users ", answer)
    check(not mismatches, "the streamers' answers fit docs/openapi.json", mismatches[:3])
    check(len(acked) > 10, "writes were acknowledged before the signal", len(acked))
    acked.append("inflight")
    log = srv.stderr()
    check("draining" in log and "stopped" in log, "shutdown is logged", log[-1000:])
    # Every acknowledged write is there, read back by a new server.
    srv.args = ["--threads", "4"]
    srv.start()
    try:
        missing = [pk for pk in acked if fetch(srv, "GET", "/v1/users/" + pk).status != 200]
        check(not missing, "every acknowledged write survives (%d)" % len(acked), missing[:10])
    finally:
        check(srv.stop() == 0, "exits 0")
    # and by the CLI, straight from the store
    out = subprocess.run([BIN, "--store", srv.store, "get", "users", acked[0]], capture_output=True)
    check(out.returncode == 0 and json.loads(out.stdout)["pk"] == acked[0], "unico get agrees", out)


def t_event_loop():
    srv = Server("eventloop", "--event-loop", "2")
    try:
        r = fetch(srv, "PUT", "/v1/_schema", {"ddl": SCHEMA})
        check(r.status == 200, "schema", r)
        r = fetch(srv, "POST", "/v1/users", {"id": "u1", "username": "alice"})
        check(r.status == 201, "insert", r)
        t_stalled(srv)
        t_race(srv)
    finally:
        check(srv.stop() == 0, "exits 0")


def t_client_gone():
    # Clients that leave while their answers wait for a sync (event loops on
    # a log-mode store, where each answer is held until durable): every
    # held answer is accounted for when its connection ends, so SIGTERM
    # afterwards drains to exit 0 (it once found answers "still waiting"
    # for connections long gone and exited 7).
    store = "lmdb:" + os.path.join(WORK, "gone-data") + "?wal=on"
    shutil.rmtree(os.path.join(WORK, "gone-data"), ignore_errors=True)
    srv = Server("gone", "--event-loop", "2", store=store)
    try:
        r = fetch(srv, "PUT", "/v1/_schema", {"ddl": SCHEMA})
        check(r.status == 200, "schema", r)

        def leaver(k):
            for i in range(150):
                body = json.dumps({"id": "g%d-%d" % (k, i), "username": "g%d-%d" % (k, i)}).encode()
                s = socket.create_connection((srv.host, srv.port), timeout=20)
                s.sendall(b"POST /v1/users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(body) + body)
                s.close()  # gone before the answer

        ths = [threading.Thread(target=leaver, args=(k,)) for k in range(8)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        time.sleep(1.0)  # the last syncs end, the last connections with them
        r = fetch(srv, "GET", "/v1/users/g0-0")
        check(r.status in (200, 404), "still serving", r)
    finally:
        rc = srv.stop()
    log = srv.stderr()
    check(rc == 0, "SIGTERM after clients left: exit 0", (rc, log[-1500:]))
    check("still wait" not in log and "stopped" in log, "nothing left waiting", log[-1500:])


OWN = [t_event_loop, t_client_gone, t_token, t_readyz, t_plaintext, t_log_json, t_otlp, t_allow_origin, t_unavailable, t_secrets, t_idle_timeout, t_max_connections, t_slow_heads, t_per_ip, t_store_owned, t_shutdown]


def run(t):
    t0 = time.time()
    try:
        t()
        print("ok   %-20s %.2fs" % (t.__name__[2:], time.time() - t0), flush=True)
    except Exception as e:  # report every failure, then go on
        FAILS.append(t.__name__)
        import traceback
        print("FAIL %-20s %s" % (t.__name__[2:], e), flush=True)
        if not isinstance(e, AssertionError):
            traceback.print_exc()


def main():
    global S
    os.makedirs(WORK, exist_ok=True)
    want = lambda t: not ONLY or t.__name__[2:] in ONLY
    S = Server("shared", "--threads", "4", "--max-header", "16384")
    # UNICO_TEST_FAIL_FAST (the mutation check): stop at the first failure
    fast = lambda: FAILS and os.environ.get("UNICO_TEST_FAIL_FAST")
    try:
        for t in SHARED:
            if fast():
                break
            if want(t) or (t is t_schema and ONLY):
                run(t)
    finally:
        rc = S.stop()
        if rc != 0:
            FAILS.append("shared server exit %d" % rc)
            print(S.stderr()[-3000:])
    for t in OWN:
        if want(t) and not fast():
            run(t)
    n = len([t for t in SHARED + OWN if want(t)])
    print("%d responses checked against docs/openapi.json" % SPEC.checked)
    if not SPEC.checked:
        FAILS.append("no response checked against docs/openapi.json")
    if FAILS:
        print("%d of %d failed: %s" % (len(FAILS), n, ", ".join(FAILS)))
        sys.exit(1)
    print("all %d passed" % n)


if __name__ == "__main__":
    main()
