#!/usr/bin/env python3
"""openapi_check.py - hold the answers of `unico serve` to docs/openapi.json.

As a module (tests/http_api.py): Spec(path).check(method, target, status,
headers, body) raises OpenAPIMismatch unless the response is one the
document describes:

- the target's path matches a path of the document (a literal segment
  before a template, as the server routes: /v1/_schema before
  /v1/{table}; the last template segment {pk} takes one segment per
  column of a composite key), and the method is one of that path's
  operations, with the status among the operation's responses;
- each header the response declares `required` is there, and each
  declared header that is there matches its schema;
- the body matches the response's content: its Content-Type is one of
  the media types listed (without one, the media type the response's
  x-unico-untyped names: libmicrohttpd's own HTML answers), and a JSON
  body is valid against the schema
  (JSON Schema 2020-12, the dialect of OpenAPI 3.1, with jsonschema).
  HEAD answers have no body.

Two answers are for what the document cannot list, as its description
says: a path it has no entry for must be 404 `not_found`, and a method a
path does not list must be 405 `method_not_allowed` with `Allow` naming
exactly the methods the document lists there (but OPTIONS, whose
operations, marked x-unico-preflight, answer only CORS preflights); both
can also be the answers every operation can get before routing (400, 401,
403, 413, 421, 431, 501).

curl_trace(FILE) reads the exchanges of a `curl --trace FILE` run, for
tests/doc_check.py, which checks those of the documentation's sessions.

As a program (tests/http_curl.sh): openapi_check.py DOC DIR checks the
responses curl saved in DIR: for each N.meta (the line `STATUS METHOD URL`
written by curl -w), N.head (curl -D) and N.body (curl -o). It prints how
many it checked, and every mismatch; exit 1 on a mismatch or when DIR
holds none.

Needs jsonschema (Debian: python3-jsonschema, which scripts/deps.sh
installs); without it this fails, saying so."""

import json
import os
import re
import sys
import urllib.parse

try:
    import jsonschema
except ImportError:  # a missing tool fails the test (tests/CMakeLists.txt)
    sys.stderr.write("openapi_check: the Python module jsonschema is missing (%s); run scripts/deps.sh "
                     "(Debian: apt-get install python3-jsonschema)\n" % sys.executable)
    raise

METHODS = ("get", "head", "post", "put", "patch", "delete", "options", "trace")
# answers any request can get before it is routed (docs/openapi.json's
# description): the head checks, the token, the body limit, libmicrohttpd's
# own limit on the head, the Host (421) and Origin (403) rules, a transfer
# coding other than chunked (501)
BEFORE_ROUTING = ("400", "401", "403", "413", "414", "421", "431", "501", "505")


class OpenAPIMismatch(AssertionError):
    pass


class Spec:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.raw = f.read()
        self.doc = json.loads(self.raw)
        self.checked = 0
        self.templates = []  # (segments, path key)
        for key in self.doc["paths"]:
            self.templates.append((key[1:].split("/"), key))

    # -- the document ------------------------------------------------------

    def resolve(self, obj):
        """obj with its $ref (into this document) followed."""
        while isinstance(obj, dict) and "$ref" in obj:
            ptr = obj["$ref"]
            if not ptr.startswith("#/"):
                raise OpenAPIMismatch("openapi: a $ref outside the document: %s" % ptr)
            obj = self.doc
            for part in ptr[2:].split("/"):
                obj = obj[part.replace("~1", "/").replace("~0", "~")]
        return obj

    def validate(self, instance, schema, what):
        # the schema as the root of a document holding the components, so
        # that its #/components/... references resolve
        root = dict(schema)
        root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        root["components"] = self.doc["components"]
        v = jsonschema.Draft202012Validator(root)
        errs = sorted(v.iter_errors(instance), key=lambda e: list(e.absolute_path))
        if errs:
            e = errs[0]
            raise OpenAPIMismatch("%s: %s at %s" % (what, e.message, "/".join(map(str, e.absolute_path)) or "the top"))

    def match(self, path):
        """The document's path key for a request path, or None. Segments
        are compared raw (before percent-decoding), as the server does."""
        if not path.startswith("/"):
            return None
        segs = path[1:].split("/")
        best, best_literals = None, -1
        for tsegs, key in self.templates:
            if len(segs) < len(tsegs):
                continue
            multi = tsegs[-1] == "{pk}"
            if len(segs) > len(tsegs) and not multi:
                continue
            literals, ok = 0, True
            for i, t in enumerate(tsegs):
                rest = segs[i:] if (multi and i == len(tsegs) - 1) else [segs[i]]
                if any(not s for s in rest):
                    ok = False
                elif t.startswith("{"):
                    pass
                elif rest == [t]:
                    literals += 1
                else:
                    ok = False
                if not ok:
                    break
            if ok and literals > best_literals:
                best, best_literals = key, literals
        return best

    # -- one response -------------------------------------------------------

    def check(self, method, target, status, headers, body):
        """Raise OpenAPIMismatch unless the response fits the document.
        headers: a dict with lower-case names; body: bytes."""
        self.checked += 1
        method = method.upper()
        path = urllib.parse.urlsplit(target).path if "://" in target else target.split("?", 1)[0]
        what = "%s %s -> %d" % (method, path[:120], status)
        key = self.match(path)
        st = str(status)
        if key is None:
            if st not in ("404",) + BEFORE_ROUTING:
                raise OpenAPIMismatch("%s: a path docs/openapi.json does not list answers 404, not %s" % (what, st))
            return self.check_response(what, method, self.resolve(self.some_response(st)), headers, body,
                                       error="not_found" if st == "404" else None)
        item = self.doc["paths"][key]
        # OPTIONS answers only CORS preflights (x-unico-preflight): Allow
        # leaves it out
        listed = [m.upper() for m in METHODS if m in item and not item[m].get("x-unico-preflight")]
        if method.lower() not in item:
            if st not in ("405",) + BEFORE_ROUTING:
                raise OpenAPIMismatch("%s: %s is not an operation of %s in docs/openapi.json: only 405 may "
                                      "answer it, not %s" % (what, method, key, st))
            if st == "405":
                allow = headers.get("allow")
                if allow is None or sorted(m.strip() for m in allow.split(",")) != sorted(listed):
                    raise OpenAPIMismatch("%s: Allow is %r; docs/openapi.json lists %s for %s"
                                          % (what, allow, ", ".join(listed), key))
                return self.check_error(what, body, "method_not_allowed")
            return self.check_response(what, method, self.resolve(self.some_response(st)), headers, body)
        op = item[method.lower()]
        responses = op["responses"]
        if st not in responses:
            raise OpenAPIMismatch("%s: status %s is not documented for %s %s (docs/openapi.json has %s)"
                                  % (what, st, method, key, ", ".join(sorted(responses))))
        if st == "405":
            allow = headers.get("allow")
            if allow is None or sorted(m.strip() for m in allow.split(",")) != sorted(listed):
                raise OpenAPIMismatch("%s: Allow is %r; docs/openapi.json lists %s for %s"
                                      % (what, allow, ", ".join(listed), key))
        self.check_response(what, method, self.resolve(responses[st]), headers, body)

    def some_response(self, st):
        """The response object the document uses for a status that any
        operation can get (the same for all: the first operation's)."""
        for item in self.doc["paths"].values():
            for m in METHODS:
                if m in item and st in item[m]["responses"]:
                    return item[m]["responses"][st]
        raise OpenAPIMismatch("no operation of docs/openapi.json documents status %s" % st)

    def check_error(self, what, body, name):
        try:
            j = json.loads(body)
        except ValueError:
            raise OpenAPIMismatch("%s: the body is not JSON: %r" % (what, body[:200]))
        self.validate(j, {"$ref": "#/components/schemas/Error"}, what)
        if j["error"] != name:
            raise OpenAPIMismatch("%s: error is %r, not %r" % (what, j["error"], name))

    def check_response(self, what, method, resp, headers, body, error=None):
        for name, h in resp.get("headers", {}).items():
            h = self.resolve(h)
            value = headers.get(name.lower())
            if value is None:
                if h.get("required"):
                    raise OpenAPIMismatch("%s: the header %s docs/openapi.json requires is missing" % (what, name))
                continue
            if "schema" in h:
                self.validate(value, h["schema"], "%s: header %s" % (what, name))
        if method == "HEAD":
            return
        content = resp.get("content")
        if not content:
            if body:
                raise OpenAPIMismatch("%s: a body docs/openapi.json does not describe: %r" % (what, body[:200]))
            return
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        if not ctype:  # libmicrohttpd's own answers: the document says which
            ctype = resp.get("x-unico-untyped", "")
        if ctype not in content:
            raise OpenAPIMismatch("%s: Content-Type %r is not one of %s" % (what, ctype, ", ".join(content)))
        schema = content[ctype].get("schema", {})
        if ctype == "application/json":
            try:
                instance = json.loads(body)
            except ValueError:
                raise OpenAPIMismatch("%s: the body is not JSON: %r" % (what, body[:200]))
        else:
            try:
                instance = body.decode("utf-8")
            except UnicodeDecodeError:
                raise OpenAPIMismatch("%s: a %s body that is not UTF-8" % (what, ctype))
        self.validate(instance, schema, what)
        if error and instance.get("error") != error:
            raise OpenAPIMismatch("%s: error is %r, not %r" % (what, instance.get("error"), error))


def parse_head(text):
    """curl -D output: the status and the headers (lower-case names) of the
    last response in it (a 100 Continue may come first)."""
    blocks = [b for b in re.split(r"\r?\n\r?\n", text) if b.strip()]
    lines = blocks[-1].splitlines()
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


SECTION = re.compile(r"^(=>|<=) (Send header|Send data|Recv header|Recv data), (\d+) bytes")


def curl_trace(path):
    """The exchanges of a `curl --trace FILE` file: a list of (method,
    target, status, headers, body), one per request answered (a request
    with no answer is left out); headers have lower-case names."""
    out, cur, want, sec = [], None, 0, None

    def finish():
        if cur and cur["head"]:
            lines = bytes(cur["sent"]).split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
            method, target = lines[0].split(" ")[:2]
            status, headers = parse_head(bytes(cur["head"]).decode("latin-1"))
            out.append((method, target, status, headers, bytes(cur["body"])))

    with open(path, encoding="latin-1") as f:
        for line in f:
            m = SECTION.match(line)
            if not m and line[:2] in ("=>", "<=", "=="):
                sec = None  # a section of no interest (Info, SSL data)
                continue
            if m:
                sec, want = m.group(2), int(m.group(3))
                if sec == "Send header":
                    finish()
                    cur = {"sent": bytearray(), "head": bytearray(), "body": bytearray()}
                continue
            # (the offset has 4 hex digits, more past 64 KiB)
            off = re.match(r"^[0-9a-f]{4,}: ", line)
            if not off or cur is None or sec is None:
                continue
            n = min(16, want)
            data = bytes(int(t, 16) for t in line[off.end():].split()[:n])
            if sec == "Recv header" and line.startswith("0000: ") and data.startswith(b"HTTP/"):
                # a status line: the answer after an interim one (100
                # Continue, whose blank line curl does not trace)
                cur["head"] = bytearray()
            want -= len(data)
            key = {"Send header": "sent", "Send data": None, "Recv header": "head", "Recv data": "body"}[sec]
            if key:
                cur[key] += data
    finish()
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: openapi_check.py DOC DIR")
    spec = Spec(sys.argv[1])
    d = sys.argv[2]
    metas = sorted((f for f in os.listdir(d) if f.endswith(".meta")), key=lambda f: int(f.split(".")[0]))
    bad = 0
    for m in metas:
        n = m[:-5]
        with open(os.path.join(d, m)) as f:
            code, method, url = f.read().split()
        with open(os.path.join(d, n + ".head"), errors="replace") as f:
            status, headers = parse_head(f.read())
        with open(os.path.join(d, n + ".body"), "rb") as f:
            body = f.read()
        try:
            if int(code) != status:
                raise OpenAPIMismatch("curl says %s, the head %d" % (code, status))
            spec.check(method, url, status, headers, body)
        except OpenAPIMismatch as e:
            bad += 1
            print("FAIL openapi: %s" % e)
    print("%d responses checked against %s, %d mismatched" % (len(metas), sys.argv[1], bad))
    sys.exit(1 if bad or not metas else 0)


if __name__ == "__main__":
    main()
