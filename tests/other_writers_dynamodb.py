#!/usr/bin/env python3
"""other_writers_dynamodb.py - the users' tables are shared (issue 37,
DynamoDB): an independent client (Debian's awscli) writes, updates and
deletes items of the native tables between unico's operations, and after
each step the test checks that
  - no attribute unico did not change differs from what the other client
    left (types and forms included: N stays N, seconds stay seconds, a
    number DynamoDB holds more precisely than a double is kept);
  - no write through unico undoes a write it did not see;
  - lookups and conflicts name only owners that hold the value, and a
    value whose owner is gone can be taken;
  - check tells the truth.

Run under tests/support/dynamodb_local.sh (UNICO_TEST_STORE_BASE is a
DynamoDB Local endpoint, with dummy credentials):

    other_writers_dynamodb.py UNICO_BINARY

Each step is named ("step 1a", ...); docs/native-tables.md, "Other
writers on DynamoDB", names the step that shows each guarantee. Every
failed expectation is printed; the exit code is 1 if any failed.
"""
import json
import os
import shutil
import subprocess
import sys

UNICO = sys.argv[1] if len(sys.argv) > 1 else "build/unico"
BASE = os.environ.get("UNICO_TEST_STORE_BASE", "")
if not BASE.startswith("dynamodb://"):
    sys.exit("other_writers_dynamodb: UNICO_TEST_STORE_BASE must be a "
             "dynamodb:// URL (run under tests/support/dynamodb_local.sh)")
AWS = shutil.which("aws", path="/usr/bin:/usr/local/bin")
if not AWS:
    sys.exit("other_writers_dynamodb: awscli is not installed "
             "(scripts/deps.sh installs Debian's awscli)")
ENDPOINT = "http://" + BASE[len("dynamodb://"):].split("/")[0]
RUN = "w%d" % os.getpid()
PREFIX = RUN + "_"
URL = "%sunico_%s?table_prefix=%s" % (BASE, RUN, PREFIX)
failures = []
step = "start"


def fail(msg):
    failures.append("%s: %s" % (step, msg))
    print("FAIL: %s: %s" % (step, msg))
    if os.environ.get("UNICO_TEST_FAIL_FAST"):  # (the mutation check)
        sys.exit(1)


def expect(cond, msg):
    if not cond:
        fail(msg)


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


def create(table, key="id"):
    aws("create-table", "--table-name", PREFIX + table,
        "--attribute-definitions", "AttributeName=%s,AttributeType=S" % key,
        "--key-schema", "AttributeName=%s,KeyType=HASH" % key,
        "--billing-mode", "PAY_PER_REQUEST")


def put(table, item):
    aws("put-item", "--table-name", PREFIX + table, "--item", json.dumps(item))


def item(table, key):
    return aws("get-item", "--table-name", PREFIX + table,
               "--consistent-read", "--key",
               json.dumps({"id": {"S": key}})).get("Item") or {}


def other_update(table, key, expr, values, names=None):
    args = ["update-item", "--table-name", PREFIX + table, "--key",
            json.dumps({"id": {"S": key}}), "--update-expression", expr,
            "--expression-attribute-values", json.dumps(values)]
    if names:
        args += ["--expression-attribute-names", json.dumps(names)]
    aws(*args)


def other_delete(table, key):
    aws("delete-item", "--table-name", PREFIX + table, "--key",
        json.dumps({"id": {"S": key}}))


def user_attrs(it):
    """The item without unico's bookkeeping."""
    return {k: v for k, v in it.items() if not k.startswith("unico_")}


def same_except(before, after, changed):
    """Attributes of before and after differing, other than changed."""
    a, b = user_attrs(before), user_attrs(after)
    return sorted(k for k in set(a) | set(b)
                  if k not in changed and a.get(k) != b.get(k))


def check():
    rc, out, err = unico("check")
    try:
        return rc, json.loads(out)
    except ValueError:
        return rc, {"unparsed": out + err}


# ---------------------------------------------------------------------
# step 1: a write touches only the attributes it changes, in the form the
# table already uses (issue 37 item 1)
step = "step 1a"
create("sess")
S1 = {"id": {"S": "s1"}, "code": {"S": "A"},
      "expires_at": {"N": "1900000000"},
      "created": {"S": "2024-05-01T14:00:00+02:00"},
      "amount": {"N": "12345678901234567890.123456789"},
      "note": {"S": "theirs"}}
put("sess", S1)
SESS = """CREATE TABLE sess (id text PRIMARY KEY, code text,
  expires_at timestamp, created timestamp, amount double, UNIQUE (code));"""
rc, out, err = unico("schema", "apply", "-", stdin=SESS)
expect(rc == 0, "adoption: rc %d %s %s" % (rc, out, err))
after = item("sess", "s1")
expect(not same_except(S1, after, ()),
       "adoption changed attributes %s: %s" % (same_except(S1, after, ()),
                                               after))
rc, out, err = unico("get", "sess", "s1")
rec = json.loads(out).get("record", {}) if rc == 0 else {}
expect(rc == 0 and str(rec.get("expires_at", "")).startswith(
    "2030-03-17T17:46:40"),
       "an N timestamp of epoch seconds read as %r (rc %d %s)" %
       (rec.get("expires_at"), rc, out + err))

step = "step 1b"
rc, out, err = unico("update", "sess", "s1", '{"code":"B"}')
expect(rc == 0, "update: rc %d %s %s" % (rc, out, err))
after = item("sess", "s1")
diff = same_except(S1, after, ("code",))
expect(not diff and after.get("code") == {"S": "B"},
       "an update of code changed %s: %s" % (diff, after))

step = "step 1c"  # a changed N timestamp stays N, in seconds
rc, out, err = unico("update", "sess", "s1",
                     '{"expires_at":"2031-01-01T00:00:00Z"}')
expect(rc == 0, "update: rc %d %s %s" % (rc, out, err))
after = item("sess", "s1")
expect(after.get("expires_at") == {"N": "1924992000"},
       "expires_at written as %s, not N epoch seconds" %
       after.get("expires_at"))
diff = same_except(S1, after, ("code", "expires_at"))
expect(not diff, "an update of expires_at changed %s: %s" % (diff, after))

# ---------------------------------------------------------------------
# step 2: no write through unico undoes a write it did not see (item 2)
step = "step 2a"
USERS = """CREATE TABLE users (id text PRIMARY KEY, email text, name text,
  city text, UNIQUE (email));"""
rc, out, err = unico("schema", "apply", "-", stdin=SESS + USERS)
expect(rc == 0, "schema apply: rc %d %s" % (rc, err))
rc, out, err = unico("insert", "users", '{"id":"u1","email":"e1@x",'
                     '"name":"n1","city":"c1"}')
expect(rc == 0, "insert u1: rc %d %s" % (rc, err))
other_update("users", "u1", "SET city = :t, email = :z",
             {":t": {"S": "t1"}, ":z": {"S": "z1@x"}})
rc, out, err = unico("update", "users", "u1", '{"name":"n2"}')
expect(rc == 0, "update u1: rc %d %s" % (rc, err))
after = item("users", "u1")
expect(after.get("city") == {"S": "t1"} and after.get("email") ==
       {"S": "z1@x"} and after.get("name") == {"S": "n2"},
       "an update of name undid the other client's city and email: %s" %
       user_attrs(after))

step = "step 2b"  # the same through unico serve, which remembers records
srv = subprocess.Popen([UNICO, "serve", "--store", URL, "--listen",
                        "127.0.0.1:0"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)


def http(method, path, body=None, headers=None):
    import http.client
    import urllib.parse
    u = urllib.parse.urlsplit(LISTEN)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.request(method, path, body=json.dumps(body) if body is not None
              else None, headers=dict({"Content-Type": "application/json"},
                                      **(headers or {})))
    r = c.getresponse()
    data = r.read()
    c.close()
    try:
        return r.status, json.loads(data) if data else None
    except ValueError:
        return r.status, data


try:
    LISTEN = json.loads(srv.stdout.readline())["listen"]
    st, _ = http("POST", "/v1/users", {"id": "u5", "email": "e5@x",
                                        "name": "n1", "city": "c1"})
    expect(st == 201, "POST u5: %d" % st)
    other_update("users", "u5", "SET city = :t, email = :z",
                 {":t": {"S": "t5"}, ":z": {"S": "z5@x"}})
    st, got = http("PATCH", "/v1/users/u5", {"name": "n2"})
    expect(st == 200, "PATCH u5: %d %s" % (st, got))
    after = item("users", "u5")
    expect(after.get("city") == {"S": "t5"} and after.get("email") ==
           {"S": "z5@x"} and after.get("name") == {"S": "n2"},
           "a PATCH of name undid the other client's city and email: %s" %
           user_attrs(after))
    # a column unico changes that another client changed since unico read
    # it: the write is planned again from what the item holds now
    other_update("users", "u5", "SET city = :t", {":t": {"S": "t6"}})
    st, got = http("PATCH", "/v1/users/u5", {"city": "c7"})
    expect(st == 200, "PATCH u5 city: %d %s" % (st, got))
    after = item("users", "u5")
    expect(after.get("city") == {"S": "c7"} and after.get("name") ==
           {"S": "n2"} and after.get("email") == {"S": "z5@x"},
           "a PATCH of city after another client's: %s" % user_attrs(after))
    st, got = http("GET", "/v1/users/u5")
    expect(st == 200 and got.get("record", {}).get("email") == "z5@x",
           "GET u5 after the PATCHes: %d %s" % (st, got))
    # PATCHes planned from a copy older than what the store last read (the
    # server remembers u10 as it wrote it; a lookup then read the other
    # client's city): refused by the store, planned again from the item
    step = "step 2c"
    st, _ = http("POST", "/v1/users", {"id": "u10", "email": "e10@x",
                                        "city": "c1"})
    expect(st == 201, "POST u10: %d" % st)
    other_update("users", "u10", "SET city = :t", {":t": {"S": "t10"}})
    st, got = http("GET", "/v1/users/by/users_email_key?v=e10@x")
    expect(st == 200 and got.get("record", {}).get("city") == "t10",
           "lookup of u10: %d %s" % (st, got))
    st, got = http("PATCH", "/v1/users/u10", {"name": "q"})
    expect(st == 200, "PATCH u10 name: %d %s" % (st, got))
    after = item("users", "u10")
    expect(after.get("city") == {"S": "t10"} and after.get("name") ==
           {"S": "q"}, "a PATCH of name planned from an older copy undid "
           "the other client's city: %s" % user_attrs(after))
    other_update("users", "u10", "SET city = :t", {":t": {"S": "t11"}})
    st, got = http("GET", "/v1/users/by/users_email_key?v=e10@x")
    expect(st == 200 and got.get("record", {}).get("city") == "t11",
           "lookup of u10: %d %s" % (st, got))
    # (the server remembers u10 as its last PATCH left it: city t10, or c1
    # had that PATCH been applied from the older copy)
    st, got = http("PATCH", "/v1/users/u10", {"city": "c1"})
    expect(st == 200, "PATCH u10 city: %d %s" % (st, got))
    after = item("users", "u10")
    expect(after.get("city") == {"S": "c1"},
           "a PATCH setting city c1 left the other client's %s" %
           after.get("city"))
finally:
    srv.terminate()
    srv.wait(30)

# ---------------------------------------------------------------------
# step 3: a value whose owner no longer holds it is no conflict, and
# lookups name only owners that hold the value (items 5, 6)
step = "step 3a"  # the owner deleted by another client (or by TTL)
rc, out, err = unico("insert", "users", '{"id":"u2","email":"e2@x"}')
expect(rc == 0, "insert u2: rc %d %s" % (rc, err))
other_delete("users", "u2")
rc, out, err = unico("lookup", "users", "users_email_key", "e2@x")
expect(rc == 2, "lookup of a deleted owner's value: rc %d %s" % (rc, out))
rc, out, err = unico("insert", "users", '{"id":"u3","email":"e2@x"}')
expect(rc == 0, "insert u3 with the value of the deleted u2: rc %d %s %s" %
       (rc, out, err))
rc, out, err = unico("lookup", "users", "users_email_key", "e2@x")
expect(rc == 0 and '"u3"' in out, "lookup e2@x: rc %d %s" % (rc, out))

step = "step 3b"  # a unique column changed by another client
rc, out, err = unico("insert", "users", '{"id":"u6","email":"e6@x",'
                     '"name":"n6"}')
expect(rc == 0, "insert u6: rc %d %s" % (rc, err))
other_update("users", "u6", "SET email = :z", {":z": {"S": "z6@x"}})
rc, rep = check()  # the value nobody claims is reported once (item 15)
miss = [v for v in (rep.get("report") or rep).get("violations", [])
        if v.get("kind") == "missing_claim" and "z6@x" in v.get("key", "")]
expect(len(miss) == 1, "check lists the missing claim of z6@x %d times: %s" %
       (len(miss), rep))
rc, out, err = unico("lookup", "users", "users_email_key", "e6@x")
expect(rc == 2, "lookup of a value its owner no longer holds: rc %d %s" %
       (rc, out))
rc, out, err = unico("insert", "users", '{"id":"u7","email":"e6@x"}')
expect(rc == 0, "insert u7 with the value u6 no longer holds: rc %d %s %s" %
       (rc, out, err))
rc, out, err = unico("lookup", "users", "users_email_key", "e6@x")
expect(rc == 0 and '"u7"' in out, "lookup e6@x: rc %d %s" % (rc, out))
# u6's next write through unico must not free u7's value
rc, out, err = unico("update", "users", "u6", '{"name":"n6b"}')
expect(rc == 0, "update u6: rc %d %s" % (rc, err))
rc, out, err = unico("lookup", "users", "users_email_key", "e6@x")
expect(rc == 0 and '"u7"' in out, "after u6's update, lookup e6@x: rc %d "
       "%s" % (rc, out))
rc, out, err = unico("insert", "users", '{"id":"u8","email":"e6@x"}')
expect(rc == 3 and "u7" in out + err,
       "a value u7 holds is a conflict naming u7: rc %d %s %s" %
       (rc, out, err))
rc, out, err = unico("insert", "users", '{"id":"u9","email":"z6@x"}')
expect(rc == 3 and "u6" in out + err,
       "the value u6 now holds is a conflict naming u6: rc %d %s %s" %
       (rc, out, err))

step = "step 3c"  # check tells the truth after all this
rc, rep = check()
expect(rc == 0 and not rep.get("violations"),
       "check: rc %d %s" % (rc, rep))

# ---------------------------------------------------------------------
# step 4: repair frees the orphan claims other writers leave (item 7)
step = "step 4a"
for k, e in (("a1", "a@x"), ("a2", "b@x")):
    rc, out, err = unico("insert", "users", json.dumps({"id": k, "email": e}))
    expect(rc == 0, "insert %s: rc %d %s" % (k, rc, err))
# the whole item replaced by another client: a bare row holding b@x
put("users", {"id": {"S": "a1"}, "email": {"S": "b@x"}})
rc, out, err = unico("repair")
rep = json.loads(out) if out.strip().startswith("{") else {}
rep = rep.get("report", rep)
expect(rep.get("orphan_claims_removed") == 1 and
       rep.get("skipped_changed") == 0,
       "repair did not free a@x, the claim of a row that now holds b@x: "
       "rc %d %s %s" % (rc, out, err))
rc, out, err = unico("lookup", "users", "users_email_key", "a@x")
expect(rc == 2, "lookup a@x after repair: rc %d %s" % (rc, out))
rc, rep = check()
viol = [v.get("kind") for v in
        (rep.get("report") or rep).get("violations", [])]
expect(rc != 0 and "duplicate_value" in viol and "orphan_claim" not in viol
       and set(viol) <= {"duplicate_value", "claim_owner_mismatch"},
       "check after repair must report the duplicate b@x (a1 and a2 hold "
       "it) and nothing else: rc %d %s" % (rc, rep))

step = "step 4b"  # the value freed is taken; the duplicate settled by hand
rc, out, err = unico("insert", "users", '{"id":"a3","email":"a@x"}')
expect(rc == 0, "insert a3 with a@x: rc %d %s %s" % (rc, out, err))
other_delete("users", "a1")
rc, rep = check()
expect(rc == 0, "check after the other client removed a1: rc %d %s" %
       (rc, rep))

step = "step 4c"  # two bare rows holding one value: repair claims neither
put("users", {"id": {"S": "x1"}, "email": {"S": "dup@x"}})
put("users", {"id": {"S": "x2"}, "email": {"S": "dup@x"}})
rc, out, err = unico("repair")
rc, out, err = unico("lookup", "users", "users_email_key", "dup@x")
expect(rc == 2, "repair picked a winner for dup@x: rc %d %s" % (rc, out))
rc, rep = check()
viol = [v.get("kind") for v in
        (rep.get("report") or rep).get("violations", [])]
expect(rc != 0 and viol == ["duplicate_value"],
       "check must report the duplicate dup@x: rc %d %s" % (rc, rep))
other_delete("users", "x2")
rc, out, err = unico("repair")
rc, out, err = unico("lookup", "users", "users_email_key", "dup@x")
expect(rc == 0 and '"x1"' in out,
       "once x2 is gone, repair claims dup@x for x1: rc %d %s" % (rc, out))

# ---------------------------------------------------------------------
# step 5: the tables people have (items 9, 10, 11)
step = "step 5a"  # a NULL attribute is an absent column
put("users", {"id": {"S": "n1"}, "email": {"NULL": True},
              "name": {"S": "nn"}, "city": {"NULL": True}})
rc, out, err = unico("get", "users", "n1")
got = json.loads(out) if rc == 0 else {}
expect(rc == 0 and got.get("version") == 0 and
       got.get("record") == {"id": "n1", "name": "nn"},
       "get of an item with NULL attributes: rc %d %s %s" % (rc, out, err))
rc, rep = check()
expect(rc == 0, "check with an item holding NULL: rc %d %s" % (rc, rep))
create("withnull")
put("withnull", {"id": {"S": "w1"}, "code": {"NULL": True}})
put("withnull", {"id": {"S": "w2"}, "code": {"S": "c"}})
NULLS = "CREATE TABLE withnull (id text PRIMARY KEY, code text, UNIQUE (code));"
rc, out, err = unico("schema", "apply", "-", stdin=SESS + USERS + NULLS)
expect(rc == 0, "adoption of a table with a NULL attribute: rc %d %s %s" %
       (rc, out, err))

step = "step 5b"  # version 0 is a version: an adopted or bare record's
rc, out, err = unico("update", "users", "n1", '{"name":"n0"}',
                     "--if-version", "0")
expect(rc == 0 and json.loads(out).get("version") == 1,
       "update --if-version 0 of a bare row: rc %d %s %s" % (rc, out, err))
rc, out, err = unico("update", "users", "n1", '{"name":"n00"}',
                     "--if-version", "0")
expect(rc == 5, "update --if-version 0 of a record at version 1: rc %d %s" %
       (rc, out))
after = item("users", "n1")
expect(after.get("name") == {"S": "n0"} and after.get("email") ==
       {"NULL": True}, "the update of n1 touched more than name: %s" %
       user_attrs(after))

step = "step 5c"  # a type mismatch refuses adoption: exit 1, the key, a fit
create("typed")
put("typed", {"id": {"S": "t1"}, "n": {"S": "x"}})
TYPED = "CREATE TABLE typed (id text PRIMARY KEY, n int, UNIQUE (n));"
rc, out, err = unico("schema", "apply", "-", stdin=SESS + USERS + NULLS +
                     TYPED)
expect(rc == 1 and '"schema_refused"' in out and '"t1"' in err and
       "as S" in err and "fits N" in err,
       "a text attribute of an int column: rc %d %s %s" % (rc, out, err))
put("typed", {"id": {"S": "t1"}, "n": {"N": "2.5"}})
rc, out, err = unico("schema", "apply", "-", stdin=SESS + USERS + NULLS +
                     TYPED)
expect(rc == 1 and '"schema_refused"' in out and '"t1"' in err and
       "as N" in err and "integer" in err,
       "N 2.5 in an int column: rc %d %s %s" % (rc, out, err))
put("typed", {"id": {"S": "t1"}, "n": {"N": "2"}})
rc, out, err = unico("schema", "apply", "-", stdin=SESS + USERS + NULLS +
                     TYPED)
expect(rc == 0, "the fixed table adopted: rc %d %s %s" % (rc, out, err))

# ---------------------------------------------------------------------
# step 6: messages (item 15)
step = "step 6a"  # an over-long primary key names its longest column
VISITS = "CREATE TABLE visits (id text, page text, PRIMARY KEY (id, page));"
rc, out, err = unico("schema", "apply", "-", stdin=SESS + USERS + NULLS +
                     TYPED + VISITS)
expect(rc == 0, "schema apply visits: rc %d %s" % (rc, err))
rc, out, err = unico("insert", "visits", json.dumps({"id": "v",
                                                     "page": "p" * 1100}))
expect(rc == 1 and '"column":"page"' in out,
       "an over-long range key: rc %d %s" % (rc, out))
step = "step 6b"  # a store's message is not prefixed twice
rc, out, err = unico("insert", "users", "-", stdin=json.dumps(
    {"id": "big", "name": "x" * 300000}))
expect(rc == 0, "insert big: rc %d %s" % (rc, (out + err)[:400]))
rc, out, err = unico("update", "users", "big", "-", stdin=json.dumps(
    {"name": "y" * 420000}))
expect(rc == 1 and "Item size" in out and "writing: writing:" not in out + err,
       "an update over DynamoDB's item size: rc %d %s" % (rc,
                                                           (out + err)[:400]))

step = "step 6c"  # 32 unique constraints fit one transaction, 33 do not
# (docs/dynamodb.md, "The 100-action limit": 4 + 3 per unique constraint)
def wide(n):
    cols = "".join(", c%d text" % i for i in range(n))
    cons = "".join(", UNIQUE (c%d)" % i for i in range(n))
    return "CREATE TABLE wide (id text PRIMARY KEY%s%s);" % (cols, cons)
BASE = SESS + USERS + NULLS + TYPED + VISITS
rc, out, err = unico("schema", "apply", "-", stdin=BASE + wide(33))
expect(rc == 1 and "33 unique" in err and "103 store operations" in err,
       "33 unique constraints on DynamoDB: rc %d %s" % (rc, err))
rc, out, err = unico("schema", "apply", "-", stdin=BASE + wide(32))
expect(rc == 0, "32 unique constraints on DynamoDB: rc %d %s" % (rc, err))
row = {"id": "w1"}
row.update({"c%d" % i: "a%d" % i for i in range(32)})
rc, out, err = unico("insert", "wide", json.dumps(row))
expect(rc == 0, "insert into wide: rc %d %s" % (rc, err))
rc, out, err = unico("update", "wide", "w1", json.dumps(
    {"c%d" % i: "b%d" % i for i in range(32)}))  # every value moves: 100
expect(rc == 0, "an update moving all 32 values: rc %d %s" % (rc, err))
rc, out, err = unico("lookup", "wide", "wide_c31_key", "b31")
expect(rc == 0 and '"w1"' in out, "lookup b31: rc %d %s" % (rc, out))

# ---------------------------------------------------------------------
# step 7: what the differential tester's other writer found (issue 37;
# tests/test_diff.c test_other_writers, on the simulated store)
step = "step 7a"  # a reserve of a value whose owner let go of it
rc, out, err = unico("insert", "users", '{"id":"r1","email":"r1@x"}')
expect(rc == 0, "insert r1: rc %d %s" % (rc, err))
other_update("users", "r1", "SET email = :z", {":z": {"S": "r1b@x"}})
rc, out, err = unico("reserve", "users", "users_email_key", "r1@x",
                     "--ttl", "60")
expect(rc == 0 and "token" in out,
       "reserve of the value r1 gave up: rc %d %s %s" % (rc, out, err))
step = "step 7b"  # an update over a stale claim of its own key
rc, out, err = unico("insert", "users", '{"id":"r2","email":"r2@x"}')
expect(rc == 0, "insert r2: rc %d %s" % (rc, err))
other_delete("users", "r2")
rc, out, err = unico("insert", "users", '{"id":"r2","name":"again"}')
expect(rc == 0, "insert r2 again: rc %d %s" % (rc, err))
rc, out, err = unico("update", "users", "r2", '{"email":"r2@x"}')
expect(rc == 0, "update r2 to its old value: rc %d %s %s" % (rc, out, err))
rc, out, err = unico("lookup", "users", "users_email_key", "r2@x")
expect(rc == 0 and '"r2"' in out, "lookup r2@x: rc %d %s" % (rc, out))
step = "step 7c"  # a bare row put where the owner was owns nothing
rc, out, err = unico("insert", "users", '{"id":"r3","email":"r3@x"}')
expect(rc == 0, "insert r3: rc %d %s" % (rc, err))
put("users", {"id": {"S": "r3"}, "email": {"S": "r3@x"}})
rc, out, err = unico("lookup", "users", "users_email_key", "r3@x")
expect(rc == 2, "lookup of a bare row's value: rc %d %s" % (rc, out))
rc, out, err = unico("insert", "users", '{"id":"r4","email":"r3@x"}')
expect(rc == 0, "insert r4 with the bare row's value: rc %d %s %s" %
       (rc, out, err))
rc, rep = check()
dups = [v for v in (rep.get("report") or rep).get("violations", [])
        if v.get("kind") == "duplicate_value"]
expect(rc == 7 and len(dups) == 1, "check reports the duplicate: rc %d %s" %
       (rc, rep))

step = "step 7d"  # a schema change lists no claim a row never made
rc, out, err = unico("insert", "users", '{"id":"r5","email":"r5@x"}')
expect(rc == 0, "insert r5: rc %d %s" % (rc, err))
put("users", {"id": {"S": "r6"}, "email": {"S": "r5@x"}})  # unclaimed
USERS_LIMIT = USERS.replace("UNIQUE (email));",
                            "UNIQUE (email), LIMIT 1000 PER (city));")
expect(USERS_LIMIT != USERS, "the test's DDL: %s" % USERS)
rc, out, err = unico("schema", "apply", "-", stdin=SESS + USERS_LIMIT +
                     NULLS + TYPED + VISITS + wide(32))
expect(rc == 0, "schema apply with a limit on users: rc %d %s" % (rc, err))
rc, out, err = unico("delete", "users", "r6")
expect(rc == 0, "delete r6: rc %d %s" % (rc, err))
rc, out, err = unico("lookup", "users", "users_email_key", "r5@x")
expect(rc == 0 and '"r5"' in out,
       "lookup r5@x after the delete of the duplicate: rc %d %s" % (rc, out))

# ---------------------------------------------------------------------
print("other_writers_dynamodb: %d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
