#!/usr/bin/env python3
"""include_layers.py - the folders' include graph has no cycle of two.

Reads every `#include "..."` of src/, common/, cli/ and server/ (their .c
and .h files), resolves it as the build does (the including file's own
folder first, then src/, include/, common/, server/, cli/), and fails when

  - two folders include each other (src/ counts one folder per layer:
    src/exec, src/store, ...; a layer's subfolders are that layer);
  - src/ includes a front end (common/, cli/, server/);
  - common/ includes cli/ or server/ (it is what both use);
  - server/ includes cli/ (the CLI runs the server, never the reverse);
  - an include resolves nowhere (a name this check does not know);
  - a word that belongs to one layer appears in another (WORDS: the
    constraint kinds' UCON_ outside src/constraint, src/schema and
    src/plan; the store's USTORE_ in src/api, which asks the executor).

docs/architecture.md ("Front ends") describes the layout.
usage: include_layers.py [ROOT]
       include_layers.py --self-test   (the check fails on each fault)
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TOPS = ["src", "common", "cli", "server"]
SEARCH = ["src", "include", "common", "server", "cli"]
INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# word -> the folders (as folder() names them) it may appear in, of those
# it is checked in (issue 33: one room per concept)
WORDS = {
    "UCON_": ("src", ["src/constraint", "src/schema", "src/plan"]),
    "USTORE_": ("src/api", []),
}


def word_errors():
    out = []
    for word, (within, allowed) in sorted(WORDS.items()):
        for dirpath, _, files in os.walk(os.path.join(ROOT, within)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                p = os.path.join(dirpath, f)
                if folder(p) in allowed:
                    continue
                with open(p, encoding="utf-8", errors="replace") as fh:
                    n = fh.read().count(word)
                if n:
                    out.append("%s appears %d time(s) in %s (its room: %s)"
                               % (word, n, os.path.relpath(p, ROOT),
                                  ", ".join(allowed) or "not " + within))
    return out


def folder(path):
    """The folder a file counts in: src/LAYER, or a top folder."""
    parts = os.path.relpath(path, ROOT).split(os.sep)
    if parts[0] == "src" and len(parts) > 2:
        return "src/" + parts[1]
    return parts[0]


def resolve(src_file, name):
    here = os.path.join(os.path.dirname(src_file), name)
    if os.path.exists(here):
        return os.path.normpath(here)
    for d in SEARCH:
        p = os.path.join(ROOT, d, name)
        if os.path.exists(p):
            return os.path.normpath(p)
    return None


def edges():
    out = {}
    bad = []
    for top in TOPS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if not f.endswith((".c", ".h")):
                    continue
                p = os.path.join(dirpath, f)
                with open(p, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                for m in INC.finditer(text):
                    target = resolve(p, m.group(1))
                    rel = os.path.relpath(p, ROOT)
                    if target is None:
                        # generated at build time (server/openapi_doc.c) or
                        # a test-only header: not part of the layout
                        bad.append("%s: #include \"%s\" resolves nowhere" % (rel, m.group(1)))
                        continue
                    a, b = folder(p), folder(target)
                    if a != b:
                        out.setdefault((a, b), []).append("%s: #include \"%s\"" % (rel, m.group(1)))
    return out, bad


def self_test():
    """A tree of each fault fails the check; a clean one passes."""
    global ROOT
    import tempfile
    cases = {
        "clean": ({"cli/a.c": "serve.h", "server/serve.h": None, "server/s.c": "r.h",
                   "common/r.h": None, "src/exec/e.c": "util/u.h", "src/util/u.h": None}, 0),
        "cycle": ({"src/exec/e.c": "util/u.h", "src/util/u.h": "exec/e.h",
                   "src/exec/e.h": None}, 1),
        "src-front": ({"src/api/a.c": "r.h", "common/r.h": None}, 1),
        "common-cli": ({"common/r.c": "c.h", "cli/c.h": None}, 1),
        "server-cli": ({"server/s.c": "c.h", "cli/c.h": None}, 1),
        "nowhere": ({"cli/a.c": "missing.h"}, 1),
        # (a value starting with "=" is the file's text)
        "ucon-outside": ({"src/exec/e.c": "=int k = UCON_UNIQUE;\n"}, 1),
        "ucon-in-room": ({"src/constraint/u.c": "=int k = UCON_UNIQUE;\n"}, 0),
        "ustore-in-api": ({"src/api/s.c": "=int m = USTORE_TABLES_SET;\n"}, 1),
    }
    saved = ROOT
    try:
        for name, (files, want) in cases.items():
            with tempfile.TemporaryDirectory() as d:
                for path, inc in files.items():
                    os.makedirs(os.path.dirname(os.path.join(d, path)), exist_ok=True)
                    with open(os.path.join(d, path), "w") as f:
                        if inc and inc.startswith("="):
                            f.write(inc[1:])
                        else:
                            f.write('#include "%s"\n' % inc if inc else "/* */\n")
                ROOT = d
                got = main([])
                assert got == want, "case %s: %d, expected %d" % (name, got, want)
    finally:
        ROOT = saved
    print("include_layers: self-test passed")
    return 0


def main(argv):
    global ROOT
    if argv == ["--self-test"]:
        return self_test()
    if argv:
        ROOT = os.path.abspath(argv[0])
    out, bad = edges()
    errors = list(bad) + word_errors()
    for (a, b), where in sorted(out.items()):
        if a < b and (b, a) in out:
            errors.append("%s and %s include each other: %s; %s"
                          % (a, b, where[0], out[(b, a)][0]))
        top_a, top_b = a.split("/")[0], b.split("/")[0]
        if top_a == "src" and top_b in ("common", "cli", "server"):
            errors.append("the library includes a front end: %s" % where[0])
        if top_a == "common" and top_b in ("cli", "server"):
            errors.append("common/ includes %s/ (it is what both use): %s" % (top_b, where[0]))
        if top_a == "server" and top_b == "cli":
            errors.append("server/ includes cli/ (the CLI runs the server): %s" % where[0])
    for e in errors:
        print("include_layers: " + e)
    n = sum(len(w) for w in out.values())
    print("include_layers: %d cross-folder includes among %d folder pairs, %d problem(s)"
          % (n, len(out), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
