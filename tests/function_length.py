#!/usr/bin/env python3
"""function_length.py - no function in src/, common/, cli/ or server/ is
longer than LIMIT lines (from the first line of its signature to its
closing brace), so that a reader can hold a function in mind; a longer one
is split into named steps.

ALLOWED names the functions that are being split elsewhere while this
check comes in (issue 33). It is temporary: an entry is an error as soon
as no function of its name is over the limit (split, or gone), so the list
empties as the splits land, and the check is then the plain rule.

usage: function_length.py [ROOT]
       function_length.py --self-test   (the check fails on a long function)
"""
import os
import re
import sys

LIMIT = 120
TOPS = ["src", "common", "cli", "server"]

# name -> how many functions of that name may be over LIMIT (temporary;
# see above). Empty: the functions of src/store/ were split when it moved
# into one folder per backend, record_cb when the constraint kinds moved
# into src/constraint/, settle, resolve_intent and atomic_apply after.
ALLOWED = {
}

IDENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\($")


def strip(text):
    """text with comments, strings and character literals blanked (newlines
    kept), and preprocessor lines blanked, so braces count right."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            # a directive, with its continuation lines
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                i += 1
            continue
        if c == "\n":
            at_line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            out.append("\n" * text.count("\n", i, j + 1))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, length in lines) of each function defined in path."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = strip(f.read())
    found = []
    depth = 0
    head_start = 0  # offset where the text before the next top-level { starts
    open_at = None
    name = None
    sig_line = 0
    for i, c in enumerate(text):
        if c == "{":
            if depth == 0:
                head = text[head_start:i]
                # a function: NAME(...) [attributes] {, no '=' (an initializer)
                k = head.find("(")
                if k > 0 and "=" not in head[:k]:
                    m = IDENT.search(head[:k + 1].rstrip()) or IDENT.search(head[:k].rstrip() + "(")
                    name = m.group(1) if m else None
                    first = head_start + len(head) - len(head.lstrip())
                    sig_line = text.count("\n", 0, first) + 1
                    open_at = i if name else None
                else:
                    open_at = None
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if open_at is not None:
                    end_line = text.count("\n", 0, i) + 1
                    found.append((name, sig_line, end_line - sig_line + 1))
                open_at = None
                head_start = i + 1
        elif c == ";" and depth == 0:
            head_start = i + 1
    return found


def self_test():
    """The check counts a function's lines from its signature to its brace
    (not braces in strings, comments or initializers) and fails past LIMIT."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "server"))
        body = "".join("  x += %d; /* { */\n" % i for i in range(LIMIT - 4))
        src = ("static const int t[] = {1, 2};\n"
               "static int\nlong_one(int x) {\n  const char *s = \"}\";\n"
               + body + "  return x + (s[0] == '{');\n}\n"
               "int short_one(void) { return 0; }\n")
        with open(os.path.join(d, "server", "f.c"), "w") as f:
            f.write(src)
        got = {n: length for n, _, length in functions(os.path.join(d, "server", "f.c"))}
        assert got == {"long_one": LIMIT + 1, "short_one": 1}, got
        assert check(d) == 1, "a function of LIMIT + 1 lines passed"
    print("function_length: self-test passed")
    return 0


def root_is_tree(root):
    """ROOT is this repository (the self-test's tree has no ALLOWED ones)."""
    return os.path.exists(os.path.join(root, "include", "unico.h"))


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    return check(root)


def check(root):
    over = []
    count = 0
    for top in TOPS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith(".c"):
                    continue
                p = os.path.join(dirpath, f)
                for name, line, length in functions(p):
                    count += 1
                    if length > LIMIT:
                        over.append((name, os.path.relpath(p, root), line, length))
    errors = []
    seen = {}
    for name, rel, line, length in sorted(over, key=lambda x: -x[3]):
        seen[name] = seen.get(name, 0) + 1
        if seen[name] <= ALLOWED.get(name, 0):
            print("function_length: %s:%d: %s is %d lines (allowed for now: being split)"
                  % (rel, line, name, length))
        else:
            errors.append("%s:%d: %s is %d lines, more than %d: split it into named steps"
                          % (rel, line, name, length, LIMIT))
    for name in sorted(ALLOWED) if root_is_tree(root) else []:
        if not seen.get(name):
            errors.append("%s is no longer over %d lines: take it out of ALLOWED "
                          "(tests/function_length.py)" % (name, LIMIT))
    for e in errors:
        print("function_length: " + e)
    print("function_length: %d functions read, %d over %d lines, %d problem(s)"
          % (count, len(over), LIMIT, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
