#!/usr/bin/env python3
"""http_tls.py - `unico serve` over HTTPS (issue 38), with certificates made
by openssl in the suite (tests/support/tls_certs.sh):

- https: the right CA works (GET, a write with the token); the server's
  certificate served with its chain (leaf, intermediate) verifies against
  the root alone; a client that trusts another CA refuses the server; a
  client offering only TLS 1.1 is refused; the listen URL says https.
- start_refused: an expired certificate, a key that is not the
  certificate's, a file that is no PEM, --tls-cert without --tls-key:
  exit 1 saying which.
- mutual: with --tls-client-ca, the CA's client certificate works and its
  subject is in the access log; no client certificate, one of another CA,
  and an expired one are refused in the handshake.
- off_loopback: 0.0.0.0 with HTTPS needs no --allow-plaintext; with
  client certificates no token either.
- rotation: a token file of several named tokens; SIGHUP under a running
  load (writes over kept-alive and new HTTPS connections) with a new token
  file and a new certificate: no request fails, the new token works, the
  removed one is refused, new handshakes get the new certificate, the
  access log names the token; then a broken token file and a key that is
  not the certificate's: the server keeps serving with what it had, says
  why, and counts the failed reload.
- token_file: what a token file may hold (names, comments, blank lines)
  and the start refused on a bad one, saying which line.

usage: http_tls.py PATH/TO/unico WORKDIR [TEST...]

Every HTTP answer is held to docs/openapi.json (tests/support/openapi_check.py)."""

import http.client
import json
import os
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "support"))
import openapi_check  # noqa: E402

SPEC = openapi_check.Spec(os.path.join(os.path.dirname(HERE), "docs", "openapi.json"))
BIN = os.path.abspath(sys.argv[1])
WORK = os.path.abspath(sys.argv[2])
ONLY = sys.argv[3:]
CERTS = os.path.join(WORK, "certs")
TOKEN = "tls-token-0123456789abcdef"
AUTH = {"Authorization": "Bearer " + TOKEN}
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


def cert(name):
    return os.path.join(CERTS, name)


class Server:
    def __init__(self, name, *args, expect_start=True):
        self.dir = os.path.join(WORK, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        tok = os.path.join(self.dir, "token")
        with open(tok, "w") as f:
            f.write(TOKEN + "\n")
        schema = os.path.join(self.dir, "schema.cql")
        with open(schema, "w") as f:
            f.write(SCHEMA)
        args = list(args)
        if "--no-token" in args:
            args.remove("--no-token")
        else:
            args += ["--token-file", tok]
        if not any(a == "--listen" for a in args):
            args += ["--listen", "127.0.0.1:0"]
        # UNICO_TEST_STORE_QUERY=?wal=on: the log-mode store, where unico
        # serve runs event loops that park each answer until it is durable
        store = "lmdb:" + os.path.join(self.dir, "data") + os.environ.get("UNICO_TEST_STORE_QUERY", "")
        cmd = [BIN, "serve", "--store", store, "--schema", schema] + args
        self.log_path = os.path.join(self.dir, "stderr.txt")
        self.err = open(self.log_path, "a")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.err)
        self.url = None
        if not expect_start:
            return
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else b""
        check(line, "server %s did not start" % cmd, self.stderr())
        self.url = json.loads(line)["listen"]
        hp = urllib.parse.urlsplit(self.url)
        self.host, self.port = hp.hostname, hp.port

    def exit_code(self):
        """The exit status of a server that should not start (one that
        does start is stopped, and the status is None)."""
        try:
            rc = self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.stop()
            return None, "", self.stderr()
        out = self.proc.stdout.read().decode()
        self.stop()
        return rc, out, self.stderr()

    def stderr(self):
        if not self.err.closed:
            self.err.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc.stdout.close()
        self.err.close()
        return rc


def context(ca="ca.pem", client=None):
    ctx = ssl.create_default_context(cafile=cert(ca))
    if client:
        ctx.load_cert_chain(cert(client + ".pem"), cert(client + ".key"))
    return ctx


class Resp:
    def __init__(self, status, headers, data, method, target):
        self.status = status
        self.headers = {k.lower(): v for k, v in headers}
        self.data = data
        self.json = json.loads(data) if data and data[:1] == b"{" else None
        SPEC.check(method, target, status, self.headers, data)

    def __repr__(self):
        return "<%d %r>" % (self.status, self.data[:300])


def call(srv, method, path, body=None, headers=None, ctx=None, host="localhost"):
    conn = http.client.HTTPSConnection(host, srv.port, timeout=20, context=ctx or context())
    hdrs = dict(headers or {})
    if body is not None:
        body = json.dumps(body)
        hdrs["Content-Type"] = "application/json"
    conn.request(method, path, body=body, headers=hdrs)
    r = conn.getresponse()
    out = Resp(r.status, r.getheaders(), r.read(), method, path)
    conn.close()
    return out


def refused(srv, ctx, host="localhost"):
    """The TLS error a client meets (handshake or first read), or None when
    it got an answer."""
    try:
        call(srv, "GET", "/healthz", ctx=ctx, host=host)
        return None
    except (ssl.SSLError, ConnectionError, http.client.RemoteDisconnected) as e:
        return e


# ---------------------------------------------------------------------------


def t_https():
    srv = Server("https", "--tls-cert", cert("server.pem"), "--tls-key", cert("server.key"))
    try:
        check(srv.url.startswith("https://127.0.0.1:"), "the listen URL says https", srv.url)
        r = call(srv, "GET", "/healthz")
        check(r.status == 200 and r.json["status"] == "ok", "HTTPS with the right CA", r)
        r = call(srv, "POST", "/v1/users", {"id": "u1", "username": "alice"}, AUTH)
        check(r.status == 201, "a write over HTTPS", r)
        r = call(srv, "GET", "/v1/users/u1")
        check(r.status == 401, "the token is still needed", r)
        r = call(srv, "GET", "/v1/users/u1", headers=AUTH, host="127.0.0.1")
        check(r.status == 200 and r.json["record"]["username"] == "alice", "by address too (IP SAN)", r)
        e = refused(srv, context("rogue-ca.pem"))
        check(isinstance(e, ssl.SSLCertVerificationError), "a client trusting another CA refuses", e)
        # TLS 1.1 only: the server refuses (the client allows it at level 0)
        old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        old.load_verify_locations(cert("ca.pem"))
        old.set_ciphers("DEFAULT:@SECLEVEL=0")
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
        e = refused(srv, old)
        check(e is not None and "no protocols available" not in str(e), "TLS 1.1 is refused by the server", e)
        for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = context()
            ctx.minimum_version = ctx.maximum_version = v
            with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as raw:
                with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                    check(tls.version() == v.name.replace("v1_", "v1."), "%s is served" % v.name, tls.version())
        # plain HTTP on the HTTPS port gets no answer
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as raw:
            raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            got = b""
            try:
                got = raw.recv(100)
            except OSError:
                pass
            check(not got.startswith(b"HTTP/1.1 200"), "plain HTTP is not served", got)
    finally:
        check(srv.stop() == 0, "exits 0")
    # a chain: leaf then intermediate; the client trusts only the root
    srv = Server("chain", "--tls-cert", cert("chain.pem"), "--tls-key", cert("chained.key"))
    try:
        r = call(srv, "GET", "/healthz")
        check(r.status == 200, "a certificate chain verifies against the root", r)
    finally:
        check(srv.stop() == 0, "exits 0")


def t_start_refused():
    cases = [
        (("--tls-cert", cert("expired.pem"), "--tls-key", cert("expired.key")), "expired"),
        (("--tls-cert", cert("server.pem"), "--tls-key", cert("rogue.key")), "not the key"),
        (("--tls-cert", cert("server.key"), "--tls-key", cert("server.key")), "not a PEM certificate"),
        (("--tls-cert", cert("server.pem"), "--tls-key", cert("server.pem")), "not a PEM private key"),
        (("--tls-cert", cert("nothere.pem"), "--tls-key", cert("server.key")), "No such file"),
        (("--tls-cert", cert("server.pem")), "go together"),
        (("--tls-client-ca", cert("ca.pem")), "needs HTTPS"),
        (("--tls-cert", cert("server.pem"), "--tls-key", cert("server.key"),
          "--tls-client-ca", cert("server.key")), "no PEM certificate"),
    ]
    for args, want in cases:
        srv = Server("refused", *args, expect_start=False)
        rc, out, err = srv.exit_code()
        check(rc == 1, "%s: exit 1" % want, (rc, err))
        check(json.loads(out)["error"] == "usage" and want in err, "%s: says so" % want, (out, err))


def t_mutual():
    srv = Server("mutual", "--tls-cert", cert("server.pem"), "--tls-key", cert("server.key"),
                 "--tls-client-ca", cert("ca.pem"))
    try:
        r = call(srv, "GET", "/healthz", ctx=context(client="client"))
        check(r.status == 200, "the CA's client certificate works", r)
        r = call(srv, "POST", "/v1/users", {"id": "m1", "username": "mallory"}, AUTH, ctx=context(client="client"))
        check(r.status == 201, "and writes with the token", r)
        for what, ctx in (("no client certificate", context()),
                          ("another CA's client certificate", context(client="rogue-client")),
                          ("an expired client certificate", context(client="expired-client"))):
            e = refused(srv, ctx)
            check(e is not None, "%s: refused" % what, e)
        time.sleep(0.3)
        log = srv.stderr()
        lines = [l for l in log.splitlines() if " POST /v1/users 201 " in l]
        check(lines and lines[0].endswith(" subject=CN=unico-client"), "the subject in the access log", log[-1500:])
        check(" 200 " not in "".join(l for l in log.splitlines() if "expired" in l), "no answer to them", log)
    finally:
        check(srv.stop() == 0, "exits 0")


def t_off_loopback():
    srv = Server("offlo", "--listen", "0.0.0.0:0", "--tls-cert", cert("server.pem"), "--tls-key", cert("server.key"))
    try:
        r = call(srv, "GET", "/healthz")
        check(r.status == 200, "0.0.0.0 with HTTPS serves without --allow-plaintext", r)
        check("warning" not in srv.stderr(), "no plaintext warning", srv.stderr())
        r = call(srv, "GET", "/metrics", headers=AUTH)
        check("unico_http_plaintext_exposed 0" in r.data.decode(), "the gauge says 0", r)
    finally:
        check(srv.stop() == 0, "exits 0")
    srv = Server("offlo-mtls", "--no-token", "--listen", "0.0.0.0:0", "--tls-cert", cert("server.pem"),
                 "--tls-key", cert("server.key"), "--tls-client-ca", cert("ca.pem"))
    try:
        r = call(srv, "POST", "/v1/users", {"id": "n1", "username": "nina"}, ctx=context(client="client"))
        check(r.status == 201, "client certificates without a token off loopback", r)
    finally:
        check(srv.stop() == 0, "exits 0")
    srv = Server("offlo-notoken", "--no-token", "--listen", "0.0.0.0:0", "--tls-cert", cert("server.pem"),
                 "--tls-key", cert("server.key"), expect_start=False)
    rc, out, err = srv.exit_code()
    check(rc == 1 and "without a token" in err, "HTTPS alone off loopback still needs a token", (rc, err))


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)  # as an operator's tool would: never half written


def wait_log(srv, text, count, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if srv.stderr().count(text) >= count:
            return True
        time.sleep(0.05)
    return False


def issuer_cn(srv):
    ctx = context()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            iss = dict(x[0] for x in tls.getpeercert()["issuer"])
            return iss["commonName"]


def t_rotation():
    import threading
    d = os.path.join(WORK, "rot-files")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    tokfile, crt, key = os.path.join(d, "tokens"), os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    app, old, new = "app-token-0123456789abcdef", "old-token-0123456789abcdef", "new-token-0123456789abcdef"
    write(tokfile, "# the load's token, and one to retire\napp %s\nold %s\n" % (app, old))
    shutil.copy(cert("server.pem"), crt)
    shutil.copy(cert("server.key"), key)
    srv = Server("rotation", "--no-token", "--token-file", tokfile, "--tls-cert", crt, "--tls-key", key)
    stop = threading.Event()
    fails, done = [], [0]
    lock = threading.Lock()

    def loader(k):
        conn = None
        i = 0
        while not stop.is_set():
            if conn is None or i % 10 == 0:  # kept alive, and new handshakes too
                if conn:
                    conn.close()
                conn = http.client.HTTPSConnection("localhost", srv.port, timeout=20, context=context())
            pk = "l%d-%d" % (k, i)
            i += 1
            try:
                conn.request("POST", "/v1/users", json.dumps({"id": pk, "username": pk}),
                             {"Authorization": "Bearer " + app, "Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                Resp(r.status, r.getheaders(), data, "POST", "/v1/users")
                if r.status != 201:
                    with lock:
                        fails.append((pk, r.status, data[:200]))
            except Exception as e:  # noqa: BLE001 - any failure counts
                with lock:
                    fails.append((pk, repr(e)))
                conn = None
            with lock:
                done[0] += 1
        if conn:
            conn.close()

    ths = [threading.Thread(target=loader, args=(k,)) for k in range(4)]
    try:
        check(issuer_cn(srv) == "unico test CA", "the first certificate", None)
        r = call(srv, "GET", "/v1/users/x", headers={"Authorization": "Bearer " + old})
        check(r.status == 404, "the old token works before", r)
        for t in ths:
            t.start()
        time.sleep(0.5)
        # rotate: "old" removed, "new" added; the certificate of the chain
        write(tokfile, "app %s\nnew %s\n" % (app, new))
        shutil.copy(cert("chain.pem"), crt + ".tmp")
        shutil.copy(cert("chained.key"), key + ".tmp")
        os.replace(crt + ".tmp", crt)
        os.replace(key + ".tmp", key)
        srv.proc.send_signal(signal.SIGHUP)
        check(wait_log(srv, "certificate %s and key %s loaded" % (crt, key), 1), "the reload is logged",
              srv.stderr()[-1500:])
        check("SIGHUP: 2 token(s) read" in srv.stderr(), "the tokens read are counted", srv.stderr()[-1500:])
        r = call(srv, "GET", "/v1/users/x", headers={"Authorization": "Bearer " + new})
        check(r.status == 404, "the new token works", r)
        r = call(srv, "GET", "/v1/users/x", headers={"Authorization": "Bearer " + old})
        check(r.status == 401, "the removed token is refused", r)
        check(issuer_cn(srv) == "unico test intermediate", "new handshakes get the new certificate", None)
        time.sleep(0.5)
        # broken: a token too short, then a key that is not the certificate's
        write(tokfile, "app %s\nbad short\n" % app)
        shutil.copy(cert("rogue.key"), key)
        srv.proc.send_signal(signal.SIGHUP)
        check(wait_log(srv, "the certificate in force is kept", 1), "a bad reload is logged", srv.stderr()[-1500:])
        err = srv.stderr()
        check("line 2: a token must have at least 16 characters" in err and "tokens in force are kept" in err,
              "the token file's fault, by line", err[-1500:])
        check("is not the key of the certificate" in err, "the key's fault", err[-1500:])
        r = call(srv, "GET", "/v1/users/x", headers={"Authorization": "Bearer " + new})
        check(r.status == 404, "the tokens in force still work", r)
        r = call(srv, "GET", "/v1/users/x")
        check(r.status == 401, "and a token is still needed", r)
        check(issuer_cn(srv) == "unico test intermediate", "the certificate in force is kept", None)
        time.sleep(0.5)
        r = call(srv, "GET", "/metrics", headers={"Authorization": "Bearer " + new})
        text = r.data.decode()
        check('unico_credential_reloads_total{outcome="ok"} 1' in text and
              'unico_credential_reloads_total{outcome="failed"} 1' in text, "the reloads are counted", text[-3000:])
    finally:
        stop.set()
        for t in ths:
            if t.is_alive() or t.ident:
                t.join()
        rc = srv.stop()
    check(not fails, "no request of the load failed (%d made)" % done[0], fails[:5])
    check(done[0] > 50, "the load ran", done[0])
    check(rc == 0, "exits 0", rc)
    log = srv.stderr()
    check(" POST /v1/users 201 " in log and " token=app" in log, "the access log names the token", log[-800:])


def t_token_file():
    d = os.path.join(WORK, "tokfiles")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    good = os.path.join(d, "good")
    write(good, "\n# comment\n  first-token-0123456789  \r\nnamed-2 second-token-0123456789\n\n")
    srv = Server("tokfile", "--no-token", "--token-file", good, "--tls-cert", cert("server.pem"),
                 "--tls-key", cert("server.key"))
    try:
        for tok in ("first-token-0123456789", "second-token-0123456789"):
            r = call(srv, "GET", "/v1/users/x", headers={"Authorization": "Bearer " + tok})
            check(r.status == 404, "each token of the file works", r)
        for tok in ("# comment", "named-2", "first-token-012345678", "second-token-0123456789x"):
            r = call(srv, "GET", "/v1/users/x", headers={"Authorization": "Bearer " + tok})
            check(r.status == 401, "nothing else: %r" % tok, r)
    finally:
        check(srv.stop() == 0, "exits 0")
    for text, want in (("short\n", "line 1: a token must have at least 16"),
                       ("ok-token-0123456789abc\na b c\n", "line 2: expected TOKEN or NAME TOKEN"),
                       ("n@me token-0123456789abcdef\n", "line 1: a token's name"),
                       ("a t1-0123456789abcdef\na t2-0123456789abcdef\n", "the name a is given twice"),
                       ("# only a comment\n\n", "holds no token")):
        bad = os.path.join(d, "bad")
        write(bad, text)
        srv = Server("tokfile-bad", "--no-token", "--token-file", bad, expect_start=False)
        rc, out, err = srv.exit_code()
        check(rc == 1 and want in err, "a bad token file: exit 1, %s" % want, (rc, err))
        check("0123456789" not in err, "the message shows no token", err)


TESTS = [("https", t_https), ("start_refused", t_start_refused), ("mutual", t_mutual),
         ("off_loopback", t_off_loopback), ("rotation", t_rotation), ("token_file", t_token_file)]


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    p = subprocess.run(["sh", os.path.join(HERE, "support", "tls_certs.sh"), CERTS], capture_output=True, text=True)
    check(p.returncode == 0, "tls_certs.sh", p.stderr)
    failed, ran = [], 0
    for name, fn in TESTS:
        if ONLY and name not in ONLY:
            continue
        t0 = time.time()
        ran += 1
        try:
            fn()
            print("ok   %s (%.1fs)" % (name, time.time() - t0), flush=True)
        except Exception as e:  # noqa: BLE001
            failed.append(name)
            print("FAIL %s: %s" % (name, e), flush=True)
            if os.environ.get("UNICO_TEST_FAIL_FAST"):
                break
    print("%d run, %d failed; %d responses checked against docs/openapi.json" % (ran, len(failed), SPEC.checked))
    if failed or not ran or not SPEC.checked:
        sys.exit(1)


if __name__ == "__main__":
    main()
