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

Mutants run JOBS at a time (--jobs, default UNICO_MUTANT_JOBS or 2), each
worker in a scratch tree and build of its own: most of a mutant's time is
its tests waiting on servers, sleeps and fsync, which a second worker fills.

Usage: scripts/mutants.py [--dir DIR] [--jobs N] [--only ID[,ID...]] [--list]
DIR (default build-mutants) holds the scratch trees and their builds
(tree and build for the first worker, tree-K and build-K for the others)."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
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
    # and nothing else: a file no longer tracked (moved, removed) leaves
    # the scratch tree too, or the build's recursive glob would compile it
    keep = {os.path.join(dst, r.decode()) for r in files if r}
    for dirpath, _, names in os.walk(dst):
        for n in names:
            p = os.path.join(dirpath, n)
            if p not in keep:
                os.remove(p)


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


def run_mutant(m, tree, bdir, logs):
    """Apply m in tree, build what its tests run, run them, put the file
    back. Returns (killed, line to print)."""
    t1 = time.time()
    path = os.path.join(tree, m["file"])
    with open(path, encoding="utf-8") as f:
        orig = f.read()
    n = orig.count(m["find"])
    if n != 1:
        return False, ("%-28s DOES NOT APPLY: its text is found %d times in %s"
                       % (m["id"], n, m["file"]))
    with open(path, "w", encoding="utf-8") as f:
        f.write(orig.replace(m["find"], m["replace"]))
    blog = os.path.join(logs, m["id"] + ".build.log")
    tlog = os.path.join(logs, m["id"] + ".test.log")
    try:
        if build(tree, bdir, blog, targets_of(bdir, m["tests"])) != 0:
            return False, "%-28s DOES NOT BUILD (see %s)" % (m["id"], blog)
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
            return False, ("%-28s SURVIVED %s (%.0f s; see %s)"
                           % (m["id"], m["tests"], time.time() - t1, tlog))
        return True, ("%-28s killed by %s (%.0f s)"
                      % (m["id"], ", ".join(killers) or rc, time.time() - t1))
    finally:
        with open(path, "w", encoding="utf-8") as f:
            f.write(orig)


def prepare(tree, bdir, logs, k):
    """The unmutated tree copied and built for worker k; True when it
    builds."""
    copy_tree(tree)
    return run(["cmake", "-S", tree, "-B", bdir, "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
               tree, os.path.join(logs, "configure-%d.log" % k), 600) == 0 and \
        build(tree, bdir, os.path.join(logs, "build-%d.log" % k)) == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(ROOT, "build-mutants"))
    ap.add_argument("--jobs", type=int,
                    default=int(os.environ.get("UNICO_MUTANT_JOBS", "2")))
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
    jobs = max(1, min(a.jobs, len(mutants)))
    logs = os.path.join(a.dir, "logs")
    os.makedirs(logs, exist_ok=True)
    workers = [(os.path.join(a.dir, "tree" + ("-%d" % k if k else "")),
                os.path.join(a.dir, "build" + ("-%d" % k if k else "")))
               for k in range(jobs)]
    t0 = time.time()
    # the scratch builds one after the other, each with every CPU
    for k, (tree, bdir) in enumerate(workers):
        if not prepare(tree, bdir, logs, k):
            sys.exit("mutants: the unmutated tree does not build (see %s)" % logs)
    print("mutants: %d scratch build(s) ready in %.0f s" % (jobs, time.time() - t0))
    sys.stdout.flush()
    bad = []
    todo = list(mutants)
    lock = threading.Lock()

    def worker(tree, bdir):
        while True:
            with lock:
                if not todo:
                    return
                m = todo.pop(0)
            killed, line = run_mutant(m, tree, bdir, logs)
            with lock:
                if not killed:
                    bad.append(m["id"])
                print(line)
                sys.stdout.flush()

    threads = [threading.Thread(target=worker, args=w) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # leave the scratch builds unmutated for the next run
    for k, (tree, bdir) in enumerate(workers):
        build(tree, bdir, os.path.join(logs, "restore-%d.log" % k))
    print("mutants: %d run by %d worker(s), %d not killed, %.0f s"
          % (len(mutants), jobs, len(bad), time.time() - t0))
    if bad:
        print("mutants: not killed: %s" % ", ".join(sorted(bad)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
