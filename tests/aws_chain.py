#!/usr/bin/env python3
"""The AWS credential chain (src/store/dynamodb/aws_creds.c) end to end: unico (the
CLI and `unico serve`) on DynamoDB Local, with its credentials from each
source of the chain in turn, and small stand-ins, written here, for the
services that hand them out:

  - an IMDSv2 instance metadata service (PUT a session token, then GET the
    role and its credentials with it; an IMDSv1-only mode answers without
    a token and must not be used),
  - an ECS container credentials endpoint (checks its Authorization token),
  - STS AssumeRoleWithWebIdentity (checks the web identity token, sees that
    the request is unsigned, answers XML),
  - in front of DynamoDB Local, a proxy that records the access key id of
    every SigV4 Authorization header and the session token sent with it.

The proxy shows which credentials each request was signed with: those the
stand-in issued, never one past its expiry. Credentials that expire in
seconds show `unico serve` refreshing them ahead of expiry while writing,
turning writes into 503 `unavailable` (with the cause) when the stand-in
goes away, and writing again when it comes back. The Region's endpoint
(`dynamodb:///TABLE`) is pointed at the proxy with AWS_ENDPOINT_URL_DYNAMODB.
Every secret planted or issued is then looked for in everything unico
printed (stdout, stderr, HTTP bodies, /metrics): none may appear.

Run through tests/support/dynamodb_local.sh run (UNICO_TEST_STORE_BASE):
  aws_chain.py BIN WORKDIR"""
import http.client
import http.server
import json
import os
import re
import select
import shutil
import signal
import socketserver
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

BIN, WORK = sys.argv[1], sys.argv[2]
BASE = os.environ.get("UNICO_TEST_STORE_BASE", "")
m = re.match(r"dynamodb://127\.0\.0\.1:(\d+)/$", BASE)
if not m:
    sys.exit("aws_chain.py: run it through tests/support/dynamodb_local.sh run")
DDB_PORT = int(m.group(1))
FAILS = []
OUTPUTS = []   # everything unico printed, for the secret check
SECRETS = set()  # every secret planted or issued
SCHEMA = "CREATE TABLE users (id text PRIMARY KEY, email text, UNIQUE (email));\n"


def check(cond, what, detail=""):
    if cond:
        print("ok   %s" % what)
    else:
        print("FAIL %s\n     %s" % (what, str(detail)[:3000]))
        FAILS.append(what)
        if os.environ.get("AWS_CHAIN_STOP") or os.environ.get("UNICO_TEST_FAIL_FAST"):
            raise SystemExit("stopped at the first failure")
    return cond


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class Issuer:
    """Credentials a stand-in hands out: key ids PREFIX1, PREFIX2, ...,
    each expiring `life` seconds after it is issued (None: in an hour)."""

    def __init__(self, prefix, life=None):
        self.prefix, self.life, self.n = prefix, life, 0
        self.issued = {}  # key id -> (issued at, expires at)
        self.lock = threading.Lock()

    def issue(self):
        with self.lock:
            self.n += 1
            now = time.time()
            exp = int(now) + (self.life or 3600)
            kid = "ASIA%s%04d" % (self.prefix, self.n)
            c = {"AccessKeyId": kid,
                 "SecretAccessKey": "sk-%s-%d-wJalrXUtnFEMI" % (self.prefix.lower(), self.n),
                 "Token": "tok-%s-%d-IQoJb3JpZ2luX2VjE" % (self.prefix.lower(), self.n),
                 "Expiration": iso(exp)}
            SECRETS.add(c["SecretAccessKey"])
            SECRETS.add(c["Token"])
            self.issued[kid] = (now, exp)
            return c


class Stand(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, body, ctype="text/plain"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def record(self, **kw):
        kw.update(method=self.command, path=self.path, t=time.time())
        self.server.seen.append(kw)

    def do_GET(self):
        self.server.owner.get(self)

    def do_PUT(self):
        self.server.owner.put(self)

    def do_POST(self):
        self.server.owner.post(self)


class Server:
    """A stand-in on a free loopback port that can go away and come back on
    the same port."""

    def __init__(self):
        self.port = 0
        self.seen = []
        self.up()

    def up(self):
        socketserver.TCPServer.allow_reuse_address = True
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Stand)
        self.httpd.daemon_threads = True
        self.httpd.owner, self.httpd.seen = self, self.seen
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def down(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def get(self, h):
        h.reply(404, "no")

    put = post = get


class Imds(Server):
    TOKEN = "imds-session-AQAEAPbH0Q"
    ROLE = "unico-test-role"

    def __init__(self, issuer, v1_only=False):
        self.issuer, self.v1_only = issuer, v1_only
        SECRETS.add(self.TOKEN)
        super().__init__()

    def put(self, h):
        h.body()
        ttl = h.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        h.record(ttl=ttl)
        if self.v1_only or h.path != "/latest/api/token" or not ttl:
            return h.reply(403, "Forbidden")
        h.reply(200, self.TOKEN)

    def get(self, h):
        tok = h.headers.get("X-aws-ec2-metadata-token")
        h.record(token=tok)
        if tok != self.TOKEN and not self.v1_only:
            return h.reply(401, "Unauthorized")
        base = "/latest/meta-data/iam/security-credentials/"
        if h.path == base:
            return h.reply(200, self.ROLE)
        if h.path == base + self.ROLE:
            c = dict(self.issuer.issue(), Code="Success", Type="AWS-HMAC",
                     LastUpdated=iso(time.time()))
            return h.reply(200, json.dumps(c), "application/json")
        h.reply(404, "Not Found")


class Ecs(Server):
    PATH = "/v2/credentials/6a1b0c0e"

    def __init__(self, issuer, auth):
        self.issuer, self.auth = issuer, auth
        super().__init__()

    def get(self, h):
        a = h.headers.get("Authorization")
        h.record(auth=a)
        if h.path != self.PATH:
            return h.reply(404, "no")
        if a != self.auth:
            return h.reply(401, json.dumps({"code": "Unauthorized"}), "application/json")
        c = self.issuer.issue()
        h.reply(200, json.dumps(c), "application/json")


class Sts(Server):
    def __init__(self, issuer, token, role):
        self.issuer, self.token, self.role = issuer, token, role
        super().__init__()

    def post(self, h):
        form = urllib.parse.parse_qs(h.body().decode())
        one = {k: v[0] for k, v in form.items()}
        h.record(form=one, auth=h.headers.get("Authorization"),
                 ctype=h.headers.get("Content-Type"))
        if one.get("Action") != "AssumeRoleWithWebIdentity" or one.get("RoleArn") != self.role:
            return h.reply(400, "<ErrorResponse><Error><Code>InvalidAction</Code></Error></ErrorResponse>", "text/xml")
        if one.get("WebIdentityToken") != self.token:
            return h.reply(400, "<ErrorResponse><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code>"
                                "<Message>the token is not valid</Message></Error></ErrorResponse>", "text/xml")
        c = self.issuer.issue()
        xml = ('<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
               "<AssumeRoleWithWebIdentityResult><SubjectFromWebIdentityToken>system:serviceaccount:x</SubjectFromWebIdentityToken>"
               "<AssumedRoleUser><Arn>%s/s</Arn><AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser>"
               "<Credentials><SessionToken>%s</SessionToken><SecretAccessKey>%s</SecretAccessKey>"
               "<Expiration>%s</Expiration><AccessKeyId>%s</AccessKeyId></Credentials>"
               "<Audience>sts.amazonaws.com</Audience></AssumeRoleWithWebIdentityResult>"
               "<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>"
               % (self.role, c["Token"].replace("-", "&#45;"), c["SecretAccessKey"],
                  c["Expiration"], c["AccessKeyId"]))
        h.reply(200, xml, "text/xml")


class Proxy(Server):
    """Forwards to DynamoDB Local; records the SigV4 key id, scope and
    session token of each request."""

    def post(self, h):
        body = h.body()
        a = h.headers.get("Authorization") or ""
        mm = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/\d{8}/([^/]+)/([^/]+)/aws4_request", a)
        h.record(key=mm.group(1) if mm else None, region=mm.group(2) if mm else None,
                 token=h.headers.get("X-Amz-Security-Token"),
                 target=h.headers.get("X-Amz-Target"))
        conn = http.client.HTTPConnection("127.0.0.1", DDB_PORT, timeout=30)
        hdrs = {k: v for k, v in h.headers.items() if k.lower() not in ("host", "connection")}
        conn.request("POST", "/", body, hdrs)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        h.reply(r.status, data, r.getheader("Content-Type") or "application/x-amz-json-1.0")

    def keys(self, since=0):
        return [s["key"] for s in self.seen[since:]]


PROXY = Proxy()
SEQ = [0]


def base_env(**kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    none = os.path.join(WORK, "none")
    env.update(AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
               AWS_CONFIG_FILE=none, AWS_SHARED_CREDENTIALS_FILE=none)
    for k, v in kw.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def table_url(name, query=""):
    """A fresh store: its own table, and its own native tables (the DDL's
    users table is a DynamoDB table of that name, after table_prefix)."""
    SEQ[0] += 1
    return "dynamodb://127.0.0.1:%d/unico_chain_%s_%d_%d?table_prefix=c%d_%d_%s" % (
        PROXY.port, re.sub(r"\W", "_", name), os.getpid(), SEQ[0], os.getpid(), SEQ[0],
        query.lstrip("?&") and "&" + query.lstrip("?&"))


def cli(env, store, *args, stdin=None):
    p = subprocess.run([BIN, "--store", store] + list(args), env=env, input=stdin,
                       capture_output=True, timeout=120)
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    OUTPUTS.append(("%s %s" % (store, args), out + err))
    return p.returncode, out, err


def write_file(name, text, mode=0o600):
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def insert_works(what, env, want_keys, query=""):
    """schema apply + insert + get through the proxy; every request signed
    with one of want_keys (a set of key ids)."""
    url = table_url(what, query)
    since = len(PROXY.seen)
    rc, out, err = cli(env, url, "schema", "apply", "-", stdin=SCHEMA.encode())
    check(rc == 0, "%s: schema apply exits 0" % what, out + err)
    rc, out, err = cli(env, url, "insert", "users", '{"id":"u1","email":"a@x.org"}')
    check(rc == 0, "%s: insert exits 0" % what, out + err)
    rc, out, err = cli(env, url, "get", "users", "u1")
    check(rc == 0 and '"a@x.org"' in out, "%s: get reads it back" % what, out + err)
    if isinstance(want_keys, Issuer):
        want_keys = set(want_keys.issued)
    used = set(PROXY.keys(since))
    check(used and used <= set(want_keys), "%s: every request signed with the issued key" % what,
          (used, want_keys))
    return PROXY.seen[since:]


def t_env():
    SECRETS.update(["envSecretKey0123456789abcdef", "envSessionToken0123456789"])
    env = base_env(AWS_ACCESS_KEY_ID="AKIAENVTEST00001", AWS_SECRET_ACCESS_KEY="envSecretKey0123456789abcdef",
                   AWS_SESSION_TOKEN="envSessionToken0123456789")
    seen = insert_works("env", env, {"AKIAENVTEST00001"})
    check(all(s["token"] == "envSessionToken0123456789" for s in seen),
          "env: the session token goes with every request", seen[:2])


def t_profile():
    SECRETS.add("profSecretKey0123456789abc")
    creds = write_file("credentials", "[default]\naws_access_key_id = AKIADEFAULT00001\n"
                       "aws_secret_access_key = notthisone0123456789\n\n"
                       "[prod]\naws_access_key_id = AKIAPROFILE00001\n"
                       "aws_secret_access_key = profSecretKey0123456789abc\n")
    SECRETS.add("notthisone0123456789")
    conf = write_file("config", "[default]\nregion = us-east-1\n[profile prod]\n"
                      "region = eu-central-1\ns3 =\n  max_concurrent_requests = 20\n")
    env = base_env(AWS_SHARED_CREDENTIALS_FILE=creds, AWS_CONFIG_FILE=conf, AWS_PROFILE="prod",
                   AWS_REGION=None)
    seen = insert_works("profile", env, {"AKIAPROFILE00001"})
    check(all(s["region"] == "eu-central-1" for s in seen),
          "profile: the Region of the profile in the config file signs", seen[:1])
    check(all(s["token"] is None for s in seen), "profile: no session token for long-term keys")
    # a profile named that is nowhere: unavailable, saying so
    env["AWS_PROFILE"] = "nosuch"
    rc, out, err = cli(env, table_url("profile"), "get", "users", "u1")
    check(rc == 7 and "nosuch" in out, "profile: an unknown AWS_PROFILE is unavailable (exit 7) and named", out + err)


def t_process():
    iss = Issuer("PROC")
    c = iss.issue()
    script = write_file("cred_process.py", "import json\nprint(json.dumps(%s))\n" % json.dumps(
        {"Version": 1, "AccessKeyId": c["AccessKeyId"], "SecretAccessKey": c["SecretAccessKey"],
         "SessionToken": c["Token"], "Expiration": c["Expiration"]}), 0o700)
    conf = write_file("config-proc", "[profile proc]\ncredential_process = %s %s\n" % (sys.executable, script))
    env = base_env(AWS_CONFIG_FILE=conf, AWS_PROFILE="proc")
    seen = insert_works("process", env, {c["AccessKeyId"]})
    check(all(s["token"] == c["Token"] for s in seen), "process: its session token is sent")
    # a process that fails: unavailable, with its exit status
    conf = write_file("config-proc-bad", "[profile proc]\ncredential_process = sh -c 'exit 3'\n")
    rc, out, err = cli(base_env(AWS_CONFIG_FILE=conf, AWS_PROFILE="proc"), table_url("process"), "get", "users", "u1")
    check(rc == 7 and "status 3" in out, "process: a failing credential_process is unavailable (exit 7)", out + err)


def t_web_identity():
    jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJl"
    SECRETS.add(jwt)
    role = "arn:aws:iam::123456789012:role/unico-writer"
    iss = Issuer("STS")
    sts = Sts(iss, jwt, role)
    tf = write_file("web-token", jwt + "\n")
    env = base_env(AWS_WEB_IDENTITY_TOKEN_FILE=tf, AWS_ROLE_ARN=role, AWS_ROLE_SESSION_NAME="unico-test",
                   AWS_ENDPOINT_URL_STS=sts.url())
    seen = insert_works("web identity", env, iss)
    check(len(sts.seen) >= 1, "web identity: STS was asked", sts.seen)
    first = sts.seen[0]
    check(first["form"].get("WebIdentityToken") == jwt and first["form"].get("RoleSessionName") == "unico-test"
          and first["form"].get("Version") == "2011-06-15",
          "web identity: AssumeRoleWithWebIdentity with the token file's token, the role and session name",
          first["form"].keys())
    check(all(s["auth"] is None for s in sts.seen), "web identity: the STS request is unsigned", sts.seen[0])
    check(all(s["token"] and s["token"].startswith("tok-sts-") for s in seen),
          "web identity: the STS session token is sent (XML entities decoded)", seen[:1])
    # a token STS refuses: unavailable, with STS's error code
    tf2 = write_file("web-token-bad", "not-the-token-XYZ123")
    SECRETS.add("not-the-token-XYZ123")
    rc, out, err = cli(dict(env, AWS_WEB_IDENTITY_TOKEN_FILE=tf2), table_url("web"), "get", "users", "u1")
    check(rc == 7 and "InvalidIdentityToken" in out, "web identity: a refused token is unavailable (exit 7), naming STS's error", out + err)
    sts.down()


def t_ecs():
    auth = "ecs-auth-token-8c4f0d2e91"
    SECRETS.add(auth)
    iss = Issuer("ECS")
    ecs = Ecs(iss, auth)
    env = base_env(AWS_CONTAINER_CREDENTIALS_FULL_URI=ecs.url() + Ecs.PATH,
                   AWS_CONTAINER_AUTHORIZATION_TOKEN=auth)
    insert_works("ecs", env, iss)
    check(ecs.seen and all(s["auth"] == auth for s in ecs.seen),
          "ecs: the endpoint saw the Authorization token", ecs.seen[:1])
    # the token from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE wins
    tf = write_file("ecs-token", auth + "\n")
    env2 = base_env(AWS_CONTAINER_CREDENTIALS_FULL_URI=ecs.url() + Ecs.PATH,
                    AWS_CONTAINER_AUTHORIZATION_TOKEN="wrong-token-abc", AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=tf)
    SECRETS.add("wrong-token-abc")
    rc, out, err = cli(env2, table_url("ecs"), "schema", "show")
    check(rc in (0, 2), "ecs: the token file's token is used", out + err)
    # a wrong token: refused, unavailable
    env3 = dict(env, AWS_CONTAINER_AUTHORIZATION_TOKEN="wrong-token-abc")
    rc, out, err = cli(env3, table_url("ecs"), "get", "users", "u1")
    check(rc == 7 and "HTTP 401" in out, "ecs: a refused token is unavailable (exit 7)", out + err)
    ecs.down()


def t_imds():
    iss = Issuer("IMDS")
    imds = Imds(iss)
    env = base_env(AWS_EC2_METADATA_DISABLED=None, AWS_EC2_METADATA_SERVICE_ENDPOINT=imds.url() + "/")
    insert_works("imds", env, iss)
    puts = [s for s in imds.seen if s["method"] == "PUT"]
    gets = [s for s in imds.seen if s["method"] == "GET"]
    check(puts and all(s["ttl"] for s in puts), "imds: a PUT for an IMDSv2 session token with its TTL header", puts[:1])
    check(gets and all(s["token"] == Imds.TOKEN for s in gets), "imds: every GET carries the session token", gets[:3])
    check(any(s["path"].endswith("/" + Imds.ROLE) for s in gets), "imds: the role's credentials were read")
    imds.down()
    # IMDSv1 only (the token refused): not used
    iss1 = Issuer("IMDSV1")
    v1 = Imds(iss1, v1_only=True)
    env = base_env(AWS_EC2_METADATA_DISABLED=None, AWS_EC2_METADATA_SERVICE_ENDPOINT=v1.url())
    rc, out, err = cli(env, table_url("imdsv1"), "get", "users", "u1")
    check(rc == 7 and "IMDSv2" in out, "imds: an IMDSv1-only service gives no credentials (exit 7)", out + err)
    check(not iss1.issued and not [s for s in v1.seen if s["method"] == "GET"],
          "imds: nothing was read without a session token", v1.seen)
    v1.down()
    # disabled: not asked
    rc, out, err = cli(base_env(), table_url("none"), "get", "users", "u1")
    check(rc == 7 and "AWS_ACCESS_KEY_ID" in out and "metadata is disabled" in out,
          "no source at all: unavailable (exit 7), saying where it looked", out + err)


def t_region_endpoint():
    env = base_env(AWS_ACCESS_KEY_ID="AKIAREGION000001", AWS_SECRET_ACCESS_KEY="regionSecret0123456789",
                   AWS_ENDPOINT_URL_DYNAMODB=PROXY.url())
    SECRETS.add("regionSecret0123456789")
    seen = insert_works("region", env, {"AKIAREGION000001"}, "")  # placeholder URL replaced below
    # the host-less form: AWS_ENDPOINT_URL_DYNAMODB points it at the proxy
    SEQ[0] += 1
    pfx = "table_prefix=r%d_%d_" % (os.getpid(), SEQ[0])
    url = "dynamodb:///unico_chain_regional_%d_%d?region=eu-west-1&%s" % (os.getpid(), SEQ[0], pfx)
    bare = url.split("?")[0] + "?" + pfx  # no region option
    since = len(PROXY.seen)
    rc, out, err = cli(env, url, "schema", "apply", "-", stdin=SCHEMA.encode())
    check(rc == 0, "region: dynamodb:///TABLE?region=eu-west-1 with AWS_ENDPOINT_URL_DYNAMODB works", out + err)
    seen = PROXY.seen[since:]
    check(seen and all(s["region"] == "eu-west-1" for s in seen),
          "region: signed for eu-west-1, sent to the override", seen[:1])
    # the Region from the config file's profile
    conf = write_file("config-region", "[default]\nregion = ap-southeast-2\n")
    since = len(PROXY.seen)
    rc, out, err = cli(dict(env, AWS_CONFIG_FILE=conf, AWS_REGION=""), bare, "schema", "show")
    check(rc == 0 and all(s["region"] == "ap-southeast-2" for s in PROXY.seen[since:]),
          "region: from the config file when the URL and the environment name none", out + err)
    # no Region anywhere: a usage error
    rc, out, err = cli(dict(env, AWS_REGION=""), bare, "schema", "show")
    check(rc == 1 and "Region" in out, "region: none anywhere is invalid (exit 1)", out + err)


class Serve:
    def __init__(self, env, store):
        SEQ[0] += 1
        self.log = open(os.path.join(WORK, "serve-%d.log" % SEQ[0]), "w+")
        self.proc = subprocess.Popen([BIN, "serve", "--store", store, "--listen", "127.0.0.1:0"],
                                     env=env, stdout=subprocess.PIPE, stderr=self.log)
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        line = self.proc.stdout.readline() if ready else b""
        OUTPUTS.append(("serve stdout", line.decode(errors="replace")))
        self.url = json.loads(line)["listen"]

    def req(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        rq = urllib.request.Request(self.url + path, data=data, method=method,
                                    headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(rq, timeout=60) as r:
                st, out = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            st, out = e.code, e.read().decode()
        OUTPUTS.append(("serve %s %s" % (method, path), out))
        return st, out

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.seek(0)
        OUTPUTS.append(("serve stderr", self.log.read()))
        check(self.proc.returncode == 0, "unico serve exits 0", self.proc.returncode)


def t_refresh(kind):
    """unico serve keeps writing across several expiries of credentials
    that live LIFE seconds; a stand-in that goes away makes writes 503
    unavailable once the keys expire, never signed with them; it comes
    back and writes succeed again."""
    LIFE = 6
    iss = Issuer("R" + kind.upper(), life=LIFE)
    if kind == "imds":
        stand = Imds(iss)
        env = base_env(AWS_EC2_METADATA_DISABLED=None, AWS_EC2_METADATA_SERVICE_ENDPOINT=stand.url())
    else:
        auth = "ecs-auth-refresh-77aa9"
        SECRETS.add(auth)
        stand = Ecs(iss, auth)
        env = base_env(AWS_CONTAINER_CREDENTIALS_FULL_URI=stand.url() + Ecs.PATH,
                       AWS_CONTAINER_AUTHORIZATION_TOKEN=auth)
    url = table_url("refresh_" + kind)
    rc, out, err = cli(env, url, "schema", "apply", "-", stdin=SCHEMA.encode())
    check(rc == 0, "refresh %s: schema apply" % kind, out + err)
    serve_at = time.time()
    srv = Serve(env, url)
    try:
        since = len(PROXY.seen)
        t0, i, bad = time.time(), 0, []
        while time.time() - t0 < 3 * LIFE:
            i += 1
            st, out = srv.req("POST", "/v1/users", {"id": "r%d" % i, "email": "r%d@x.org" % i})
            if st != 201:
                bad.append((st, out))
            time.sleep(0.05)
        check(not bad, "refresh %s: %d writes across %d expiries all succeed" % (kind, i, 3), bad[:3])
        seen = PROXY.seen[since:]
        keys = []
        for s in seen:
            if s["key"] not in keys:
                keys.append(s["key"])
        check(len(keys) >= 3, "refresh %s: the writes used %d successive keys" % (kind, len(keys)), keys)
        late = [s for s in seen if s["key"] not in iss.issued or s["t"] >= iss.issued[s["key"]][1]]
        check(not late, "refresh %s: no request signed with a key at or past its expiry" % kind, late[:2])
        # each refresh was asked for before the keys it replaced expired
        # (half their lifetime ahead: at least a quarter of it, whatever the
        # clocks' granularity), so no write ever waited for new keys
        mine = sorted((v for v in iss.issued.values() if v[0] >= serve_at), key=lambda v: v[0])
        ahead = [(nxt[0] - prev[1]) for prev, nxt in zip(mine, mine[1:])]
        check(len(mine) >= 3 and all(d < -LIFE / 4.0 for d in ahead),
              "refresh %s: the stand-in saw refreshes well ahead of expiry" % kind,
              "seconds before the expiry of the keys replaced: %s" % [-d for d in ahead])
        m = srv.req("GET", "/metrics")[1]
        check("unico" in m, "refresh %s: /metrics answers" % kind)

        # the stand-in goes away: writes answer 503 unavailable once the keys expire
        stand.down()
        down_at = time.time()
        since = len(PROXY.seen)
        time.sleep(LIFE + 1)
        st, out = srv.req("POST", "/v1/users", {"id": "down1", "email": "down1@x.org"})
        print("     (the 503: %s)" % out)
        check(st == 503 and '"unavailable"' in out and "refresh failed: cannot reach" in out and "cannot reach" in out,
              "refresh %s: with the stand-in gone, a write is 503 unavailable with the cause" % kind, (st, out))
        late = [s for s in PROXY.seen[since:] if s["t"] >= iss.issued.get(s["key"], (0, 0))[1]]
        check(not late, "refresh %s: nothing was signed with expired keys" % kind, late[:2])
        # it comes back: writes succeed again
        stand.up()
        up_at = time.time()
        ok = False
        for _ in range(60):
            st, out = srv.req("POST", "/v1/users", {"id": "back", "email": "back@x.org"})
            if st in (201, 409):
                ok = True
                break
            time.sleep(0.5)
        back = time.time() - up_at
        check(ok and back < 5, "refresh %s: writes succeed again once the stand-in is back (%.1f s after, "
              "%.1f s after it went)" % (kind, back, time.time() - down_at), (st, out))
    finally:
        srv.stop()
        stand.down()


def t_refresh_imds():
    t_refresh("imds")


def t_refresh_ecs():
    t_refresh("ecs")


def t_no_secrets():
    # (and, in a sanitizer build, no report of one)
    reports = [what for what, text in OUTPUTS if "Sanitizer" in text or "runtime error:" in text]
    check(not reports, "no sanitizer report in any output", reports[:3])
    leaks = []
    for what, text in OUTPUTS:
        for sec in SECRETS:
            if sec in text:
                leaks.append((what, sec))
    check(SECRETS and not leaks, "no secret (%d planted or issued) in any output (%d captured)"
          % (len(SECRETS), len(OUTPUTS)), leaks[:5])


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    only = os.environ.get("AWS_CHAIN_ONLY")
    cases = [t_env, t_profile, t_process, t_web_identity, t_ecs, t_imds, t_region_endpoint,
             t_refresh_imds, t_refresh_ecs, t_no_secrets]
    for c in cases:
        if only and c.__name__ not in only.split(","):
            continue
        c()
    PROXY.down()
    if FAILS:
        print("%d failed: %s" % (len(FAILS), ", ".join(FAILS)))
        sys.exit(1)
    print("all passed")


main()
