#!/bin/sh
# python_install.sh SOURCE_DIR WORK_DIR LIBUNICO - the Python package
# installs with no network into a fresh venv of Debian's python3
# (pip install --no-build-isolation, with Debian's setuptools and wheel),
# imports from there (not from the source tree), finds the library through
# UNICO_LIBRARY, and runs docs/python.md's example as the page shows it:
# its output compared with the page's, line by line.
set -eu
SRC=$(cd "$1" && pwd)
WORK=$2
LIB=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
PY=/usr/bin/python3
rm -rf "$WORK"
mkdir -p "$WORK"
cp -r "$SRC/python" "$WORK/src" # (pip builds in its source folder)
"$PY" -m venv --system-site-packages "$WORK/venv"
"$WORK/venv/bin/pip" install -q --no-build-isolation --no-index "$WORK/src" >"$WORK/pip.log" 2>&1 ||
  { cat "$WORK/pip.log"; echo "FAIL: pip install --no-build-isolation ./python"; exit 1; }
cd "$WORK"
where=$(UNICO_LIBRARY=$LIB "$WORK/venv/bin/python" -c 'import unico; print(unico.__file__)')
case $where in
"$WORK/venv/"*) echo "ok: imported from the venv: $where" ;;
*) echo "FAIL: unico imported from $where, not the venv"; exit 1 ;;
esac
# the page's example and what it says it prints
"$PY" - "$SRC/docs/python.md" "$WORK/example.py" "$WORK/expected" <<'PYEOF'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
code = re.search(r"^```python\n(.*?)^```", text, re.S | re.M)
out = re.search(r"^It prints:\n\n```\n(.*?)^```", text, re.S | re.M)
if not code or not out:
    sys.exit("FAIL: docs/python.md has no python example or no 'It prints:' block")
open(sys.argv[2], "w").write(code.group(1))
open(sys.argv[3], "w").write(out.group(1))
PYEOF
UNICO_LIBRARY=$LIB "$WORK/venv/bin/python" "$WORK/example.py" >"$WORK/got" 2>&1 ||
  { cat "$WORK/got"; echo "FAIL: docs/python.md's example fails"; exit 1; }
if ! diff -u "$WORK/expected" "$WORK/got"; then
  echo "FAIL: docs/python.md's example prints other than the page says"
  exit 1
fi
echo "ok: docs/python.md's example prints what the page says"
# without the library it says how to find one
if UNICO_LIBRARY=$WORK/nosuch.so "$WORK/venv/bin/python" -c 'import unico' >"$WORK/nolib" 2>&1; then
  echo "FAIL: import unico with a missing UNICO_LIBRARY succeeded"; exit 1
fi
grep -q "nosuch.so" "$WORK/nolib" || { cat "$WORK/nolib"; echo "FAIL: no word of the missing library"; exit 1; }
cd /
rm -rf "$WORK"
echo "python_install: all passed"
