#!/usr/bin/env python3
"""check_exports.py - libunico.so exports the public API and nothing else.

The dynamic symbols the library defines (nm -D --defined-only) must be
exactly the functions declared in the public headers (include/unico.h and
include/unico_errors.h, read through the C preprocessor so that comments
and macros do not count): each exported symbol starts with unico_, every
function of the headers is exported, and no other unico_* symbol leaks. The
soname must be libunico.so.MAJOR (MAJOR: UNICO_VERSION_MAJOR).

Usage: check_exports.py LIBUNICO_SO CC INCLUDE_DIR MAJOR
"""
import re
import subprocess
import sys


def main():
    so, cc, incdir, major = sys.argv[1:5]
    errors = []

    nm = subprocess.run(["nm", "-D", "--defined-only", so], check=True,
                        capture_output=True, text=True).stdout
    exported = set()
    for line in nm.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        exported.add(parts[-1].split("@")[0])

    pre = subprocess.run([cc, "-E", "-P", "-I", incdir, "-x", "c", "-"],
                         input="#include <unico.h>\n#include <unico_errors.h>\n",
                         check=True, capture_output=True, text=True).stdout
    # a function declaration names itself followed by "(": unico_foo(...);
    # a function-pointer typedef is "(*unico_cb)(", which this skips
    declared = set(re.findall(r"\b(unico_\w+)\s*\(", pre))
    if len(declared) < 10:
        errors.append("found only %d functions in the headers: %s"
                      % (len(declared), sorted(declared)))

    for s in sorted(exported):
        if not s.startswith("unico_"):
            errors.append("exported, not unico_*: %s" % s)
        elif s not in declared:
            errors.append("exported, not in the public headers: %s" % s)
    for s in sorted(declared - exported):
        errors.append("declared in the public headers, not exported: %s" % s)

    dyn = subprocess.run(["readelf", "-d", so], check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r"\(SONAME\).*\[(.*)\]", dyn)
    want = "libunico.so.%s" % major
    if not m or m.group(1) != want:
        errors.append("soname is %s, not %s" % (m.group(1) if m else "missing", want))

    for e in errors:
        print("check_exports: " + e)
    print("check_exports: %s: %d symbols exported, %d functions declared, %s"
          % (so, len(exported), len(declared), "FAILED" if errors else "ok"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
