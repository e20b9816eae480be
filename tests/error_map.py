#!/usr/bin/env python3
"""error_map.py - every error of the library has one JSON id, one CLI exit
code, one HTTP status and one Retry-After, in one row of the error map
(UNICO_ERRNO_MAP, include/unico_errors.h), and the documentation's tables
say the same:

  - the map: ids and codes are unique, codes in unico's range, exit codes
    1..7, statuses 4xx/5xx, a Retry-After only on 409 busy and 503;
  - docs/cli.md "Exit codes": each id in the row of its exit code, once;
  - docs/cli.md "Error names": each id once, with its exit code;
  - docs/http.md's table of errors: each id in one row, with its status
    and its exit code; a row of an id with a Retry-After says so.

The library and the server read the map (unico_http_status(),
unico_retry_after(), server/http.c), so what they answer is the map's.
usage: error_map.py [ROOT]
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), ".."))
ROW = re.compile(r'XX\(\s*(\w+)\s*,\s*(-?\d+)\s*,\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,'
                 r'\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)')
errors = []


def fail(msg):
    errors.append(msg)


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def the_map():
    text = read("include/unico_errors.h")
    body = text[text.index("#define UNICO_ERRNO_MAP(XX)"):]
    body = body[:body.index("\n\n")].replace("\\\n", " ")
    rows = []
    for m in ROW.finditer(body):
        name, value, ident, msg, code, http, retry = m.groups()
        rows.append(dict(name=name, value=int(value), id=ident, msg=msg,
                         exit=int(code), http=int(http), retry=int(retry)))
    if body.count("XX(") != len(rows):
        fail("unico_errors.h: %d XX( rows, %d read as (name, value, id, message, exit, "
             "http, retry)" % (body.count("XX("), len(rows)))
    return rows


def check_map(rows):
    for key in ("name", "value", "id"):
        seen = [r[key] for r in rows]
        for v in set(seen):
            if seen.count(v) > 1:
                fail("the error map has %s %r twice" % (key, v))
    for r in rows:
        if not -41000 < r["value"] <= -40001:
            fail("%s: code %d outside unico's range" % (r["id"], r["value"]))
        if not 1 <= r["exit"] <= 7:
            fail("%s: exit code %d not in 1..7" % (r["id"], r["exit"]))
        if not 400 <= r["http"] <= 599:
            fail("%s: HTTP status %d is not an error status" % (r["id"], r["http"]))
        if r["retry"] and not (r["http"] == 503 or r["id"] == "busy"):
            fail("%s: a Retry-After on %d (only 503 and busy say when to retry)"
                 % (r["id"], r["http"]))


def table_after(text, heading, first_cell):
    """The rows (lists of cells) of the first table after heading whose
    header row starts with first_cell."""
    at = text.index(heading)
    lines = text[at:].split("\n")
    rows, inside = [], False
    for line in lines[1:]:
        if not inside:
            if line.startswith("| " + first_cell + " |"):
                inside = True
            continue
        if not line.startswith("|"):
            break
        if re.match(r"^\|[-| ]+\|$", line):
            continue
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    if not rows:
        fail("no table starting | %s | after %r" % (first_cell, heading))
    return rows


def ids_in(cell):
    return re.findall(r"`([a-z_]+)`", cell)


def check_cli(rows):
    text = read("docs/cli.md")
    by_id = {r["id"]: r for r in rows}
    # Exit codes: | exit | meaning | error names |
    found = {}
    for cells in table_after(text, "### Exit codes", "exit"):
        for i in ids_in(cells[2]):
            found.setdefault(i, []).append(int(cells[0]))
    for r in rows:
        got = found.get(r["id"], [])
        if got != [r["exit"]]:
            fail("docs/cli.md, Exit codes: %s is under exit %s, the map says %d"
                 % (r["id"], got or "none", r["exit"]))
    # Error names: | name | exit | meaning |
    names = {}
    for cells in table_after(text, "### Error names", "name"):
        for i in ids_in(cells[0]):
            names.setdefault(i, []).append(int(cells[1]))
    for r in rows:
        if names.get(r["id"]) != [r["exit"]]:
            fail("docs/cli.md, Error names: %s has %s, the map says exit %d"
                 % (r["id"], names.get(r["id"], "no row"), r["exit"]))
    for i in names:
        if i not in by_id and i != "usage":
            fail("docs/cli.md, Error names: %s is not in the error map" % i)


def check_http(rows):
    text = read("docs/http.md")
    table = table_after(text, "### Errors and status codes", "status")
    found = {}
    for cells in table:
        for i in ids_in(cells[1]):
            found.setdefault(i, []).append(cells)
    for r in rows:
        got = found.get(r["id"], [])
        if len(got) != 1:
            fail("docs/http.md, errors: %s is in %d rows of the table, not one"
                 % (r["id"], len(got)))
            continue
        cells = got[0]
        status = re.match(r"\d+", cells[0])
        if not status or int(status.group(0)) != r["http"]:
            fail("docs/http.md, errors: %s is %s, the map says %d"
                 % (r["id"], cells[0], r["http"]))
        code = re.match(r"\d+", cells[3])
        if not code or int(code.group(0)) != r["exit"]:
            fail("docs/http.md, errors: %s's CLI exit is %r, the map says %d"
                 % (r["id"], cells[3], r["exit"]))
        if r["retry"] and "Retry-After" not in cells[2]:
            fail("docs/http.md, errors: %s answers with Retry-After, its row does not say so"
                 % r["id"])
        if not r["retry"] and "Retry-After" in cells[2]:
            fail("docs/http.md, errors: %s's row speaks of Retry-After, the map has none"
                 % r["id"])


def main():
    rows = the_map()
    if not rows:
        fail("no rows read from UNICO_ERRNO_MAP")
    check_map(rows)
    check_cli(rows)
    check_http(rows)
    for e in errors:
        print("error_map: " + e)
    print("error_map: %d errors in the map, %d problem(s)" % (len(rows), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
