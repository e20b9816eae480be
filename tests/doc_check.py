#!/usr/bin/env python3
"""doc_check.py - run the console sessions of a Markdown page and compare
their outputs with the page, so that the documentation stays true.

Usage: doc_check.py [--openapi DOC] UNICO_BINARY REPO_ROOT PAGE.md [PAGE.md...]

The convention (the README and docs/http.md say it in short above their
sessions):

- A session is a ```console block directly after a line
  `<!-- doc-check -->` or `<!-- doc-check: SETUP COMMAND & -->`. Each
  session runs in a fresh empty directory (so `./unico-data` is a fresh
  store) holding a link `examples` to the repository's examples/, with
  `unico` on the PATH being the binary under test and UNICO_STORE unset.
  A setup command (e.g. `unico serve --schema examples/schema.cql &`) is
  run first, hidden, as a background command (below).
- `$ COMMAND` lines are run by `sh -c`, one after the other; the lines
  after one, up to the next `$ ` line, are its expected output (standard
  output and standard error together, in the order written). Blank lines at
  the end of an output are ignored; blank lines inside it count.
- `# exit N` among the output lines: the command must exit with status N
  (without one: 0). Other lines starting with `# ` are comments.
- In expected output, `<NAME>` (capitals, digits, `_`) is a placeholder for
  a value that varies (a token, a time, a pid): it matches any non-empty
  text and, once matched, stands for that text in every later output line
  and command of the session (so `--hold <TOKEN>` presents the token
  printed before). `...` matches any text (output shortened).
- The response headers `Date`, `Content-Type`, `Content-Length`,
  `Cache-Control` and `X-Request-Id` are left out of the outputs, and `\\r` is dropped.
- A command ending in ` &` starts in the background (one at a time): for
  `unico serve` the check adds `--listen 127.0.0.1:0` (unless --listen is
  given) and waits for its JSON line; its output is what it printed up to
  then, and after it until there are as many lines as the page shows (at
  most 5 s). The free port it got is written 8080 in the page: `localhost:8080`
  and `127.0.0.1:8080` in commands go to the real port, and the real port
  in outputs reads 8080. `kill -SIG %1; wait %1` signals the background
  command and waits for it: its output is what the command printed since,
  its status that of the background command.

A ```sql block directly after a line `<!-- doc-check-schema: FILE -->`
(FILE relative to the repository, e.g. examples/schema.cql) shows part of
that schema: each table it creates must be in FILE, and each of its
UNIQUE constraints must be one of that table's in FILE under the same
name, so that the sessions that use FILE can name the constraints the
block shows. The binary says what each name is: the block is applied to
one fresh store and FILE to another, and a lookup of every constraint
must find it in both (exit 2, no owner; exit 1 is "no such constraint").

With --openapi DOC, `curl` on the sessions' PATH is a wrapper that runs
the real curl with `--trace` to a file of the session, which changes none
of its output; after the session, every answer curl got is checked
against DOC (docs/openapi.json) by tests/support/openapi_check.py, and each one
the document does not describe is a mismatch. (This needs the Python
module jsonschema.)

After the pages pass, the check proves it can fail: it runs the first
session again with one output line changed and requires a mismatch.
Exit 0 when every session matches; else a diff per mismatch and exit 1.
"""
import difflib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

MARK = re.compile(r"^<!--\s*doc-check(?::\s*(.*?))?\s*-->\s*$")
PLACEHOLDER = re.compile(r"<([A-Z][A-Z0-9_]*)>")
EXIT = re.compile(r"^# exit (\d+)\s*$")
LEFT_OUT = re.compile(r"^(date|content-type|content-length|cache-control|x-request-id):", re.I)
KILL = re.compile(r"^kill -(\w+) %1; wait %1$")
CMD_TIMEOUT = 60
OPENAPI = None  # an openapi_check.Spec with --openapi


class Session:
    def __init__(self, page, line, setup, steps):
        self.page, self.line, self.setup, self.steps = page, line, setup, steps


def parse(page):
    """The marked console blocks of a page: [Session]."""
    lines = open(page, encoding="utf-8").read().split("\n")
    sessions = []
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i])
        if not m:
            i += 1
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```console":
            sys.exit("%s:%d: doc-check mark not followed by a ```console block"
                     % (page, i + 1))
        start = i + 1
        j = i + 2
        steps = []  # (line number, command, [expected lines])
        while j < len(lines) and lines[j].strip() != "```":
            text = lines[j]
            if text.startswith("$ "):
                steps.append((j + 1, text[2:], []))
            elif steps:
                steps[-1][2].append(text)
            elif text.strip() and not text.startswith("# "):
                sys.exit("%s:%d: output before any command" % (page, j + 1))
            j += 1
        sessions.append(Session(page, start + 1, m.group(1), steps))
        i = j + 1
    return sessions


SCHEMA_MARK = re.compile(r"^<!--\s*doc-check-schema:\s*(\S+)\s*-->\s*$")


def schema_blocks(page):
    """The marked sql blocks of a page: [(line, FILE, ddl text)]."""
    lines = open(page, encoding="utf-8").read().split("\n")
    blocks = []
    for i, line in enumerate(lines):
        m = SCHEMA_MARK.match(line)
        if not m:
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```sql":
            sys.exit("%s:%d: doc-check-schema mark not followed by a ```sql block"
                     % (page, i + 1))
        j = i + 2
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        blocks.append((i + 2, m.group(1), "\n".join(lines[i + 2:j])))
    return blocks


def unique_constraints(ddl):
    """{table: {constraint name: number of columns}} of the UNIQUE
    constraints of a DDL text (the default name of one without a name is
    TABLE_COL..._key; the binary confirms each name, below)."""
    ddl = re.sub(r"--[^\n]*", "", ddl)
    out = {}
    for m in re.finditer(r"CREATE\s+TABLE\s+(\w+)\s*\((.*?)\)\s*;", ddl, re.I | re.S):
        table = m.group(1).lower()
        cons = out.setdefault(table, {})
        for c in re.finditer(r"(?:CONSTRAINT\s+(\w+)\s+)?UNIQUE\s*\(([^)]*)\)",
                             m.group(2), re.I):
            cols = [x.strip().lower() for x in c.group(2).split(",")]
            name = (c.group(1) or "_".join([table] + cols + ["key"])).lower()
            cons[name] = len(cols)
    return out


def check_schema_block(unico, root, page, line, path, ddl):
    """The mismatches of one doc-check-schema block (see the top)."""
    fails = []
    shown, full = unique_constraints(ddl), None
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.pop("UNICO_STORE", None)
        block = os.path.join(tmp, "block.cql")
        with open(block, "w", encoding="utf-8") as f:
            f.write(ddl)
        stores = {}
        for what, ddl_file in (("block", block), (path, os.path.join(root, path))):
            store = "lmdb:" + os.path.join(tmp, what.replace("/", "_"))
            p = subprocess.run([unico, "--store", store, "schema", "apply", ddl_file],
                               capture_output=True, text=True, env=env, timeout=CMD_TIMEOUT)
            if p.returncode:
                return ["%s:%d: the schema of %s is refused: %s" % (
                    page, line, what, p.stdout.strip())]
            stores[what] = store
        full = unique_constraints(open(os.path.join(root, path), encoding="utf-8").read())
        for table, cons in sorted(shown.items()):
            if table not in full:
                fails.append("%s:%d: table %s is not in %s" % (page, line, table, path))
                continue
            for name, ncols in sorted(cons.items()):
                for what, store in sorted(stores.items()):
                    p = subprocess.run([unico, "--store", store, "lookup", table, name]
                                       + ["x"] * ncols, capture_output=True, text=True,
                                       env=env, timeout=CMD_TIMEOUT)
                    if p.returncode != 2:
                        fails.append("%s:%d: constraint %s of table %s: lookup in the "
                                     "schema of %s exits %d, not 2 (%s)" % (
                                         page, line, name, table, what, p.returncode,
                                         p.stdout.strip()))
    return fails


def expected_parts(lines):
    """Split an expected output into (lines to compare, exit status)."""
    out, status = [], 0
    for text in lines:
        m = EXIT.match(text)
        if m:
            status = int(m.group(1))
        elif text.startswith("# "):
            continue
        else:
            out.append(text)
    while out and not out[-1].strip():
        out.pop()
    return out, status


def line_regex(expected, bound):
    """A regex for one expected line; new placeholders become groups."""
    pat, seen, pos = "", set(), 0
    tokens = re.compile(r"<([A-Z][A-Z0-9_]*)>|\.\.\.")
    for m in tokens.finditer(expected):
        pat += re.escape(expected[pos:m.start()])
        name = m.group(1)
        if name is None:
            pat += ".*?"
        elif name in bound:
            pat += re.escape(bound[name])
        elif name in seen:
            pat += "(?P=%s)" % name
        else:
            seen.add(name)
            pat += "(?P<%s>.+?)" % name
        pos = m.end()
    pat += re.escape(expected[pos:])
    return re.compile(pat, re.S)


def compare(expected, actual, bound):
    """Match actual lines against expected ones, binding placeholders.
    Returns None when they match, else the expected text for a diff."""
    trial = dict(bound)
    ok = len(expected) == len(actual)
    if ok:
        for e, a in zip(expected, actual):
            m = line_regex(e, trial).fullmatch(a)
            if not m:
                ok = False
                break
            trial.update({k: v for k, v in m.groupdict().items() if v is not None})
    if ok:
        bound.update(trial)
        return None

    def show(e):
        return PLACEHOLDER.sub(lambda m: bound.get(m.group(1), m.group(0)), e)
    return [show(e) for e in expected]


class Background:
    """One background command: its merged output, drained by a thread."""

    def __init__(self, cmd, cwd, env):
        self.proc = subprocess.Popen(
            ["sh", "-c", "exec " + cmd], cwd=cwd, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True)
        self.lines, self.ready, self.port = [], threading.Event(), None
        self.lock = threading.Lock()
        self.mark = 0
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self):
        for raw in self.proc.stdout:
            text = raw.decode("utf-8", "replace").rstrip("\n")
            with self.lock:
                self.lines.append(text)
            m = re.match(r'^\{"listen":"http://127\.0\.0\.1:(\d+)"', text)
            if m and not self.ready.is_set():
                self.port = m.group(1)
                self.ready.set()
        self.ready.set()

    def take(self):
        """The lines printed since the last take."""
        with self.lock:
            out = self.lines[self.mark:]
            self.mark = len(self.lines)
        return out

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.thread.join(timeout=10)
        return self.proc.returncode


def clean(text_lines, port):
    out = []
    for text in text_lines:
        text = text.replace("\r", "")
        if LEFT_OUT.match(text):
            continue
        if port:
            text = re.sub(r"(127\.0\.0\.1|localhost):%s\b" % port, r"\1:8080", text)
        out.append(text)
    while out and not out[-1].strip():
        out.pop()
    return out


def run_session(s, unico, root, mutate=False):
    """Run one session; returns the list of failure reports."""
    failures = []
    work = tempfile.mkdtemp(prefix="unico-doc-check.")
    bindir = os.path.join(work, ".bin")
    os.mkdir(bindir)
    os.symlink(os.path.abspath(unico), os.path.join(bindir, "unico"))
    run_dir = os.path.join(work, "run")
    os.mkdir(run_dir)
    os.symlink(os.path.join(os.path.abspath(root), "examples"),
               os.path.join(run_dir, "examples"))
    env = {k: v for k, v in os.environ.items()
           if k != "UNICO_STORE" and not k.lower().endswith("_proxy")}
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    traces = os.path.join(work, ".traces")
    if OPENAPI:
        real = shutil.which("curl")
        if not real:
            sys.exit("doc_check: --openapi needs curl on the PATH")
        os.mkdir(traces)
        wrapper = os.path.join(bindir, "curl")
        with open(wrapper, "w") as f:
            f.write('#!/bin/sh\nexec %s --trace "%s/$$.trace" "$@"\n' % (real, traces))
        os.chmod(wrapper, 0o755)
    env["NO_PROXY"] = env["no_proxy"] = "*"
    bound, bg = {}, None
    steps = list(s.steps)
    if mutate:
        # change the first non-blank expected output line
        for k, (ln, cmd, exp) in enumerate(steps):
            idx = next((n for n, t in enumerate(exp)
                        if t.strip() and not t.startswith("# ")), None)
            if idx is not None:
                exp = list(exp)
                exp[idx] = exp[idx] + " (mutated)"
                steps[k] = (ln, cmd, exp)
                break
    if s.setup:
        steps.insert(0, (s.line, s.setup, None))

    def start(cmd, where, nwant):
        nonlocal bg
        if bg:
            failures.append("%s: a second background command" % where)
            return []
        if re.search(r"\bunico\b.*\bserve\b", cmd) and "--listen" not in cmd:
            cmd = re.sub(r"\bserve\b", "serve --listen 127.0.0.1:0", cmd, count=1)
        bg = Background(cmd, run_dir, env)
        if not bg.ready.wait(CMD_TIMEOUT) or bg.port is None:
            failures.append("%s: the background command printed no "
                            '{"listen":...} line' % where)
        # what it prints right after that line belongs to its output too
        deadline = time.time() + 5
        while time.time() < deadline and bg.proc.poll() is None:
            with bg.lock:
                if len(bg.lines) >= nwant:
                    break
            time.sleep(0.02)
        return bg.take()

    try:
        for ln, cmd, exp in steps:
            where = "%s:%d" % (s.page, ln)
            page_cmd = cmd
            cmd = PLACEHOLDER.sub(lambda m: bound.get(m.group(1), m.group(0)), cmd)
            if PLACEHOLDER.search(cmd):
                failures.append("%s: unbound placeholder in: %s" % (where, cmd))
                continue
            port = bg.port if bg else None
            if port:
                cmd = re.sub(r"(127\.0\.0\.1|localhost):8080\b", r"\g<1>:" + port, cmd)
            if cmd.endswith(" &"):
                nwant = len(expected_parts(exp)[0]) if exp is not None else 0
                got, status = start(cmd[:-2].strip(), where, nwant), None
                port = bg.port if bg else None
            elif KILL.match(cmd):
                if not bg:
                    failures.append("%s: no background command to signal" % where)
                    continue
                sig = KILL.match(cmd).group(1)
                status = bg.stop(getattr(signal, "SIG" + sig.upper().replace("SIG", "")))
                got = bg.take()
                bg = None
            else:
                try:
                    p = subprocess.run(["sh", "-c", cmd], cwd=run_dir, env=env,
                                       stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT,
                                       timeout=CMD_TIMEOUT)
                except subprocess.TimeoutExpired:
                    failures.append("%s: timed out: %s" % (where, cmd))
                    continue
                got = p.stdout.decode("utf-8", "replace").split("\n")
                status = p.returncode
            if exp is None:  # the hidden setup command
                continue
            want, want_status = expected_parts(exp)
            got = clean(got, port)
            diff = compare(want, got, bound)
            problems = []
            if diff is not None:
                problems.append("\n".join(difflib.unified_diff(
                    diff, got, "page", "actual", lineterm="")))
            if status is not None and status != want_status:
                problems.append("exit status %d, the page says %d"
                                % (status, want_status))
            if problems:
                failures.append("%s: $ %s\n%s" % (where, page_cmd, "\n".join(problems)))
    finally:
        if bg:
            bg.stop()
        if OPENAPI and os.path.isdir(traces):
            failures += check_traces(s, traces)
        shutil.rmtree(work, ignore_errors=True)
    return failures


def check_traces(s, traces):
    """The answers curl got in a session, checked against OPENAPI."""
    import openapi_check
    failures = []
    for name in sorted(os.listdir(traces)):
        for method, target, status, headers, body in openapi_check.curl_trace(os.path.join(traces, name)):
            try:
                OPENAPI.check(method, target, status, headers, body)
            except openapi_check.OpenAPIMismatch as e:
                failures.append("%s:%d: an answer docs/openapi.json does not describe: %s"
                                % (s.page, s.line, e))
    return failures


def main():
    global OPENAPI
    args = sys.argv[1:]
    if args[:1] == ["--openapi"] and len(args) > 1:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))
        import openapi_check
        OPENAPI = openapi_check.Spec(args[1])
        args = args[2:]
    if len(args) < 3:
        sys.exit(__doc__)
    unico, root, pages = args[0], args[1], args[2:]
    sessions = []
    for page in pages:
        found = parse(os.path.join(root, page))
        for f in found:
            f.page = page
        if not found:
            sys.exit("%s: no <!-- doc-check --> session" % page)
        sessions += found
    failed = 0
    checked_blocks = []
    for page in pages:
        for line, path, ddl in schema_blocks(os.path.join(root, page)):
            fails = check_schema_block(unico, root, page, line, path, ddl)
            print("%s:%d: the schema shown is part of %s: %s" % (
                page, line, path, "ok" if not fails else "%d mismatches" % len(fails)))
            for f in fails:
                print("MISMATCH " + f + "\n")
            failed += len(fails)
            checked_blocks.append((page, line, path, ddl))
    for s in sessions:
        t0 = time.time()
        failures = run_session(s, unico, root)
        print("%s:%d: %d commands, %s (%.1f s)" % (
            s.page, s.line, len(s.steps),
            "ok" if not failures else "%d mismatches" % len(failures),
            time.time() - t0))
        for f in failures:
            print("MISMATCH " + f + "\n")
        failed += len(failures)
    if OPENAPI:
        print("%d answers checked against %s" % (OPENAPI.checked, sys.argv[2]))
    if failed:
        print("%d mismatches: the page or the program is wrong" % failed)
        return 1
    # The check itself must be able to fail.
    if not run_session(sessions[0], unico, root, mutate=True):
        print("self-check FAILED: a changed output line went unnoticed")
        return 1
    print("self-check: a changed output line is caught")
    for page, line, path, ddl in checked_blocks[:1]:
        renamed = re.sub(r"(CONSTRAINT\s+)(\w+)", r"\1\2_renamed", ddl, count=1, flags=re.I)
        if renamed == ddl or not check_schema_block(unico, root, page, line, path, renamed):
            print("self-check FAILED: a renamed constraint in a doc-check-schema block went unnoticed")
            return 1
        print("self-check: a renamed constraint in a schema block is caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
