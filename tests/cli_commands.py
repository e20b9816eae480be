#!/usr/bin/env python3
"""cli_commands.py - the CLI's commands and docs/cli.md name the same
commands, so that neither can gain or lose one without the other.

Usage: cli_commands.py UNICO_BINARY CLI_SOURCE DOCS_CLI_MD

The commands are read from four places and must agree:

- the CLI's table of commands (COMMANDS in cli/unico.c: the `.name` of
  each row), as a set of command words;
- `unico --help`: the lines under "commands:", each a command (with its
  subcommand, as "schema apply") followed by its arguments;
- docs/cli.md: the `### NAME` headings of its "## Commands" section, the
  `unico NAME ...` lines of its "## Synopsis" block, and the links of the
  "[Commands](#commands):" entry of its contents.

A command is the leading lower-case words of a line (`schema apply
FILE|-` is "schema apply", `get TABLE PK...` is "get"). Every command
must also answer `unico COMMAND --help` with its own usage, not the
general one: the CLI really runs it.

After the check passes, it proves it can fail: it removes one command's
section from the page (in memory) and requires that to be reported.
Exit 0 when everything agrees; else one line per disagreement and exit 1.
"""
import re
import subprocess
import sys

WORD = re.compile(r"^[a-z][a-z-]*$")


def command_of(tokens):
    """The leading lower-case words of tokens, after "[...]" groups
    (`[--store URL] serve ...`); "" when there are none."""
    i = 0
    while i < len(tokens) and tokens[i].startswith("["):
        while i < len(tokens) and not tokens[i].endswith("]"):
            i += 1
        i += 1
    words = []
    for t in tokens[i:]:
        if not WORD.match(t):
            break
        words.append(t)
    return " ".join(words)


def run(unico, *args):
    p = subprocess.run([unico, *args], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=30)
    return p.returncode, p.stdout


def help_commands(unico):
    """The commands `unico --help` lists, in order."""
    code, out = run(unico, "--help")
    if code != 0:
        sys.exit("unico --help exited %d" % code)
    return commands_in_help(out)


def commands_in_help(text):
    """The commands of a `unico --help` text ("schema apply", "insert",
    ...), in order."""
    lines = text.split("\n")
    if "commands:" not in lines:
        sys.exit('unico --help has no "commands:" section')
    cmds = []
    for line in lines[lines.index("commands:") + 1:]:
        if not line.strip():
            break
        # a command's line is indented by two (deeper lines continue one);
        # two spaces or more part its synopsis from its summary
        if re.match(r"^  \S", line):
            cmds.append(command_of(re.split(r"\s{2,}", line.strip())[0].split()))
    return cmds


def table_words(source):
    """The command words of the rows of COMMANDS in the CLI's source."""
    text = open(source, encoding="utf-8").read()
    m = re.search(r"\bCOMMANDS\[\]\s*=\s*\{(.*?)\n\};", text, re.S)
    if not m:
        sys.exit("no COMMANDS table in %s: update tests/cli_commands.py" % source)
    words = set(re.findall(r'\.name\s*=\s*"([^"]+)"', m.group(1)))
    if not words:
        sys.exit("no .name in the COMMANDS table of %s" % source)
    return words


def section(lines, title):
    """The lines of the "## title" section (up to the next "## ")."""
    try:
        start = lines.index("## " + title)
    except ValueError:
        return None
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("## ")), len(lines))
    return lines[start + 1:end]


def doc_commands(text):
    """{place: [commands]} for the three places docs/cli.md names them."""
    lines = text.split("\n")
    found = {}
    body = section(lines, "Commands")
    found["docs/cli.md ## Commands headings"] = [
        l[4:].strip() for l in body or [] if l.startswith("### ")]
    synopsis = section(lines, "Synopsis") or []
    found["docs/cli.md ## Synopsis"] = [
        c for c in (command_of(l.split()[1:]) for l in synopsis
                    if l.startswith("unico ")) if c]
    # "- [Commands](#commands): [a](#a), [b](#b),\n  [c](#c)": up to the
    # next entry of the list
    m = re.search(r"^- \[Commands\]\(#commands\):(.*?)(?=^- |\Z)", text, re.M | re.S)
    found["docs/cli.md contents"] = re.findall(r"\[([^\]]+)\]\(#", m.group(1)) if m else []
    return found


def own_help_ok(unico, cmd):
    """`unico CMD --help` exits 0 with CMD's usage, not the general text:
    "usage: unico CMD ..." (a group's help has a line per subcommand, and
    serve's reads "unico [--store URL] serve")."""
    code, out = run(unico, *cmd.split(), "--help")
    usage = re.compile(r"^(usage:)? *unico (\[[^\]]*\] )*" + re.escape(cmd) + r"(\s|$)", re.M)
    return code == 0 and out.startswith("usage: unico ") and usage.search(out)


def problems(unico, source, docs_text):
    out = []
    listed = help_commands(unico)
    if "" in listed:
        out.append("unico --help lists a line without a command")
    listed = [c for c in listed if c]
    for dup in sorted({c for c in listed if listed.count(c) > 1}):
        out.append("unico --help lists %s twice" % dup)
    words = {c.split()[0] for c in listed}
    for w in sorted(table_words(source) - words):
        out.append("command %s of the CLI's table is missing from unico --help" % w)
    for c in listed:
        if not own_help_ok(unico, c):
            out.append("unico %s --help does not print its usage: the CLI does not run it" % c)
    for place, cmds in doc_commands(docs_text).items():
        if not cmds:
            out.append("%s: no commands found" % place)
            continue
        for c in sorted(set(listed) - set(cmds)):
            out.append("command %s (unico --help) is missing from %s" % (c, place))
        for c in sorted(set(cmds) - set(listed)):
            out.append("%s documents %s, which unico --help does not list" % (place, c))
    return out


def without_section(text, cmd):
    """text without the "### cmd" section."""
    return re.sub(r"^### %s\n.*?(?=^##)" % re.escape(cmd), "", text,
                  count=1, flags=re.M | re.S)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: cli_commands.py UNICO_BINARY CLI_SOURCE DOCS_CLI_MD")
    unico, source, docs = sys.argv[1:]
    text = open(docs, encoding="utf-8").read()
    found = problems(unico, source, text)
    for p in found:
        print("FAIL: " + p)
    if found:
        return 1
    cmds = help_commands(unico)
    # the check can fail: a command whose section is gone is reported
    victim = cmds[len(cmds) // 2]
    mutated = without_section(text, victim)
    if mutated == text or not any(victim in p for p in problems(unico, source, mutated)):
        print("FAIL: removing the section of %s from docs/cli.md went unnoticed" % victim)
        return 1
    print("%d commands agree: %s" % (len(cmds), ", ".join(cmds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
