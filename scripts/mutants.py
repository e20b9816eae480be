#!/usr/bin/env python3
"""Mutation check: each mutant of tests/mutation/mutants.json is a small
change to the core (one text replaced by another in one file) that a
test must notice. The runner copies the tracked tree to a scratch
directory, builds it once, then for each mutant: applies it, rebuilds
incrementally, runs the tests the mutant names (ctest -R), and puts the
file back. It fails when a mutant survives (every named test passes),
when a mutant no longer applies (its text is not found exactly once: the
code moved, so the mutant must be written again), or when a mutant does
not build.

Usage: scripts/mutants.py [--dir DIR] [--only ID[,ID...]] [--list]
DIR (default build-mutants) holds the scratch tree and its build."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = os.path.join(ROOT, "tests", "mutation", "mutants.json")
DOC = os.path.join(ROOT, "docs", "mutants.md")
FIELDS = ("id", "file", "find", "replace", "breaks", "tests")


def load():
    with open(MANIFEST, encoding="utf-8") as f:
        mutants = json.load(f)
    seen = set()
    for m in mutants:
        missing = [k for k in FIELDS if not m.get(k)]
        if missing:
            sys.exit("mutants.json: %s lacks %s" % (m.get("id"), missing))
        if m["id"] in seen:
            sys.exit("mutants.json: %s twice" % m["id"])
        seen.add(m["id"])
    return mutants


def check_doc(mutants):
    """Every mutant is listed in docs/mutants.md, and nothing else is."""
    with open(DOC, encoding="utf-8") as f:
        listed = set(re.findall(r"^\| `([a-z0-9-]+)` \|", f.read(), re.M))
    ids = {m["id"] for m in mutants}
    bad = sorted(ids ^ listed)
    if bad:
        sys.exit("docs/mutants.md and tests/mutation/mutants.json disagree "
                 "on: %s" % ", ".join(bad))


def copy_tree(dst):
    """The tracked files (as they are in the work tree) into dst."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.split(b"\0")
    for rel in files:
        if not rel:
            continue
        rel = rel.decode()
        src, out = os.path.join(ROOT, rel), os.path.join(dst, rel)
        if not os.path.isfile(src):
            continue
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(src, "rb") as a:
            data = a.read()
        # rewrite only what changed: an unchanged file keeps its mtime and
        # the scratch build stays incremental between runs
        if os.path.exists(out):
            with open(out, "rb") as b:
                if b.read() == data:
                    continue
        with open(out, "wb") as b:
            b.write(data)
        shutil.copymode(src, out)


def run(cmd, cwd, log, timeout, env=None):
    with open(log, "w") as f:
        try:
            return subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                                  timeout=timeout, env=env).returncode
        except subprocess.TimeoutExpired:
            return "timeout"


def build(tree, bdir, log, targets=None):
    cmd = ["cmake", "--build", bdir, "-j", str(os.cpu_count() or 2)]
    if targets:
        cmd += ["--target"] + targets
    return run(cmd, tree, log, 1800)


def targets_of(bdir, regex):
    """The build targets of the programs the tests matching regex run (the
    build tree's executables named on their command lines), or None (build
    everything) when one is not a target of its own name."""
    out = subprocess.run(["ctest", "--test-dir", bdir, "-N", "-V", "-R", regex],
                         capture_output=True, text=True).stdout
    known = subprocess.run(["cmake", "--build", bdir, "--target", "help"],
                           capture_output=True, text=True).stdout
    known = set(re.findall(r"^\.\.\. (\S+)", known, re.M))
    names = set()
    for line in re.findall(r"Test command: (.*)", out):
        for tok in re.findall(r'"([^"]+)"|(\S+)', line):
            path = tok[0] or tok[1]
            if path.startswith(bdir + os.sep) and os.path.isfile(path) and \
                    os.access(path, os.X_OK):
                names.add(os.path.basename(path))
    if not names or not names <= known:
        return None
    return sorted(names)


def failed_tests(log):
    with open(log, encoding="utf-8", errors="replace") as f:
        text = f.read()
    return sorted(set(re.findall(r"^\s*\d+ - (\S+) \(", text, re.M)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(ROOT, "build-mutants"))
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    mutants = load()
    check_doc(mutants)
    if a.list:
        for m in mutants:
            print("%-28s %s" % (m["id"], m["breaks"]))
        return 0
    if a.only:
        want = set(a.only.split(","))
        unknown = want - {m["id"] for m in mutants}
        if unknown:
            sys.exit("no such mutant: %s" % ", ".join(sorted(unknown)))
        mutants = [m for m in mutants if m["id"] in want]
    tree, bdir = os.path.join(a.dir, "tree"), os.path.join(a.dir, "build")
    logs = os.path.join(a.dir, "logs")
    os.makedirs(logs, exist_ok=True)
    copy_tree(tree)
    t0 = time.time()
    if run(["cmake", "-S", tree, "-B", bdir, "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
           tree, os.path.join(logs, "configure.log"), 600) != 0 or \
            build(tree, bdir, os.path.join(logs, "build.log")) != 0:
        sys.exit("mutants: the unmutated tree does not build (see %s)" % logs)
    print("mutants: scratch build ready in %.0f s" % (time.time() - t0))
    bad = []
    for m in mutants:
        t1 = time.time()
        path = os.path.join(tree, m["file"])
        with open(path, encoding="utf-8") as f:
            orig = f.read()
        n = orig.count(m["find"])
        if n != 1:
            bad.append(m["id"])
            print("%-28s DOES NOT APPLY: its text is found %d times in %s"
                  % (m["id"], n, m["file"]))
            continue
        with open(path, "w", encoding="utf-8") as f:
            f.write(orig.replace(m["find"], m["replace"]))
        blog = os.path.join(logs, m["id"] + ".build.log")
        tlog = os.path.join(logs, m["id"] + ".test.log")
        try:
            if build(tree, bdir, blog, targets_of(bdir, m["tests"])) != 0:
                bad.append(m["id"])
                print("%-28s DOES NOT BUILD (see %s)" % (m["id"], blog))
                continue
            # (one failure kills a mutant: tests that know
            # UNICO_TEST_FAIL_FAST stop at their first, ctest at the first
            # test that fails)
            rc = run(["ctest", "--test-dir", bdir, "-R", m["tests"],
                      "--timeout", "600", "--output-on-failure",
                      "--stop-on-failure"],
                     tree, tlog, 3600,
                     env=dict(os.environ, UNICO_TEST_FAIL_FAST="1"))
            killers = failed_tests(tlog)
            if rc == 0 or (rc != "timeout" and not killers):
                bad.append(m["id"])
                print("%-28s SURVIVED %s (%.0f s; see %s)"
                      % (m["id"], m["tests"], time.time() - t1, tlog))
            else:
                print("%-28s killed by %s (%.0f s)"
                      % (m["id"], ", ".join(killers) or rc, time.time() - t1))
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(orig)
    # leave the scratch build unmutated for the next run
    build(tree, bdir, os.path.join(logs, "restore.log"))
    print("mutants: %d run, %d not killed, %.0f s"
          % (len(mutants), len(bad), time.time() - t0))
    if bad:
        print("mutants: not killed: %s" % ", ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
