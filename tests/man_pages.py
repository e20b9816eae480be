#!/usr/bin/env python3
"""man_pages.py - unico(1) and unico-serve(1) name every command and option
the CLI accepts, and render without warnings.

Usage: man_pages.py UNICO_BINARY UNICO_1 UNICO_SERVE_1

UNICO_1 and UNICO_SERVE_1 are the pages the build generated (roff, from
docs/man/*.1.scd by scdoc; a missing one fails: scripts/deps.sh installs
scdoc). The commands are the lines under "commands:" of `unico --help`; the
options are every --name (and -h) in `unico --help` and each
`unico CMD --help`, serve's in `unico serve --help`. In unico(1) each
command must have an entry (a list term that begins with it in bold,
\\fBschema apply\\fR) and each option too (a term of bold options that
names it: \\fB-h\\fR, \\fB--help\\fR); serve's options likewise in
unico-serve(1); an option named only in a synopsis does not count. When
groff is installed, `groff -man -Tutf8 -ww -z` must print no warning.

After the check passes it proves it can fail: it removes one option's
entry from unico(1) (in memory) and requires that to be reported.
Exit 0 when everything is there; else one line per omission and exit 1.
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_commands import commands_in_help  # noqa: E402

OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z-]*|-h)\b")


def run(unico, *args):
    p = subprocess.run([unico, *args], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=30)
    if p.returncode != 0:
        sys.exit("unico %s exited %d" % (" ".join(args), p.returncode))
    return p.stdout


def commands(help_text):
    """The commands of `unico --help` (cli_commands.py reads them the same
    way)."""
    cmds = commands_in_help(help_text)
    if not cmds:
        sys.exit("unico --help lists no command")
    return cmds


def options(text):
    return set(OPTION.findall(text))


def terms(page):
    """The term lines of the page's lists (the line before each ".RS")."""
    lines = page.split("\n")
    return [lines[i - 1] for i in range(1, len(lines))
            if lines[i].startswith(".RS") and lines[i - 1].startswith("\\fB")]


def missing(page, cmds, opts):
    """What of cmds and opts page (roff text) has no entry for: a term
    that begins with the command in bold, or with options in bold (the
    option among them)."""
    ts = terms(page)
    out = []
    for c in cmds:
        if not any(t.startswith("\\fB%s\\fR" % c) for t in ts):
            out.append("command %s" % c)
    opt_terms = [t for t in ts if t.startswith("\\fB-")]
    for o in sorted(opts):
        if not any(re.search(r"\\fB%s\\fR" % re.escape(o), t) for t in opt_terms):
            out.append("option %s" % o)
    return out


def groff_warnings(path):
    if not shutil.which("groff"):
        print("man_pages: groff not installed, rendering not checked")
        return []
    p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", path],
                       capture_output=True, text=True, timeout=60)
    errs = p.stderr.strip()
    if p.returncode or errs:
        return ["%s: groff: %s" % (path, errs or "exit %d" % p.returncode)]
    return []


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    unico, page1, page_serve = sys.argv[1:]
    pages = {}
    for path in (page1, page_serve):
        if not os.path.exists(path):
            sys.exit("%s is missing: the build makes it with scdoc "
                     "(scripts/deps.sh installs it; reconfigure after)" % path)
        pages[path] = open(path, encoding="utf-8").read()

    top = run(unico, "--help")
    cmds = commands(top)
    # (serve's line of `unico --help` names serve's options: unico-serve(1))
    opts = options("\n".join(l for l in top.split("\n")
                              if not re.match(r"^  serve\b", l)))
    for word in sorted({c.split()[0] for c in cmds} - {"serve"}):
        opts |= options(run(unico, word, "--help"))
    serve_opts = options(run(unico, "serve", "--help"))

    errors = ["unico(1) lacks " + m for m in missing(pages[page1], cmds, opts)]
    errors += ["unico-serve(1) lacks " + m
               for m in missing(pages[page_serve], [], serve_opts)]
    for path in (page1, page_serve):
        errors += groff_warnings(path)
    for e in errors:
        print(e)
    if errors:
        return 1

    # The check can fail: drop --op-id's entry (its term line) from unico(1).
    cut = re.sub(r"(?m)^\\fB--op-id\\fR.*\n", "", pages[page1])
    if "option --op-id" not in missing(cut, cmds, opts):
        print("man_pages: removing --op-id from unico(1) went unnoticed")
        return 1
    print("man_pages: %d commands, %d options in unico(1), %d in unico-serve(1)"
          % (len(cmds), len(opts), len(serve_opts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
