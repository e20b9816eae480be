#!/usr/bin/env python3
"""ctest_summary.py - what a ctest run skipped, and why.

Usage: ctest_summary.py BUILD_DIR JUNIT_XML

Reads the JUnit file a ctest run wrote (ctest --output-junit) and the
tests' labels (ctest --show-only=json-v1), and prints:
  - how many tests were skipped and which, each with its label and the
    reason it printed (the first lines of its output);
  - the cases skipped inside tests that passed (cmocka's "[  SKIPPED ]":
    a case that does not apply to a store, e.g. transactions on a store
    without them), each with the line the case printed before skipping.
Exits 1 when a test not labelled `live` was skipped (only an outside server
that may be absent is a reason to skip; a missing fixture must fail), or
when the JUnit file is missing or unreadable.
"""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET


def labels_of(build):
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"],
                         capture_output=True, text=True, check=True).stdout
    labels = {}
    for t in json.loads(out).get("tests", []):
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        labels[t["name"]] = props.get("LABELS", [])
    return labels


def reason(text, limit=2):
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return " / ".join(lines[:limit]) or "(no output)"


def case_skips(text):
    """(case, reason) for each cmocka case skipped in a test's output."""
    found, current, said = [], None, None
    for line in (text or "").splitlines():
        if line.startswith("[ RUN      ] "):
            current, said = line[13:].strip(), None
        elif line.startswith("[  SKIPPED ] ") and current and line[13:].strip() == current:
            found.append((current, said or "(no reason printed)"))
            current = None
        elif current and not line.startswith("["):
            said = line.strip() or said
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build, junit = sys.argv[1:]
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError) as e:
        print("ctest_summary: cannot read %s: %s" % (junit, e))
        return 1
    labels = labels_of(build)
    cases = root.findall(".//testcase")
    skipped, inside = [], []
    for c in cases:
        name = c.get("name")
        out = c.findtext("system-out") or ""
        if c.find("skipped") is not None:
            skipped.append((name, out))
        elif c.get("status") == "run" and c.find("failure") is None:
            inside += [(name, case, why) for case, why in case_skips(out)]
    bad = 0
    print("skipped: %d of %d tests%s" % (len(skipped), len(cases), ":" if skipped else ""))
    for name, out in skipped:
        lab = ",".join(labels.get(name, [])) or "no label"
        ok = "live" in labels.get(name, [])
        bad += not ok
        print("  %s [%s]%s: %s" % (name, lab, "" if ok else " NOT ALLOWED (only `live` tests may skip)",
                                   reason(out)))
    if inside:
        print("cases skipped inside passing tests (not applicable there): %d" % len(inside))
        for name, case, why in inside:
            print("  %s: %s: %s" % (name, case, why))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
