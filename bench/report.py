#!/usr/bin/env python3
"""report.py - turn bench/results/ into table.md, throughput.png and
bench/RESULTS.md. Python 3 standard library only; gnuplot draws the plot.

Usage: python3 bench/report.py [--results DIR] [--out RESULTS.md]
                               [--command "the command that ran"] [--no-plot]

Inputs (in --results): results.csv (unico-bench --csv), machine.txt,
profile.txt and profile-log.txt (optional: perf profiles of unico and
unico-log), command.txt (optional, when --command is absent).
Engines: unico (the embedded store, plain mode), unico-log (the same in log
mode, ?wal=on), postgres, sqlite; each unico variant gets ratio columns
against each baseline.
The "## Analysis" section of an existing RESULTS.md is kept as it is: the
generator only rewrites the other sections.
"""
import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
import time

ENGINES = ["unico", "unico-log", "unico-log-leader", "unico-async", "postgres", "sqlite"]
# compared against every other engine
UNICO_VARIANTS = ["unico", "unico-log", "unico-log-leader", "unico-async"]
# Points kept out of the throughput tables: unico-log with sync=off at one
# thread, the library's own CPU per operation (the CPU section).
NOSYNC = "unico-log-nosync"
# the same with writes handed over as typed values (unico-bench --typed)
NOSYNC_TYPED = "unico-log-nosync-typed"
HEADLINE_WORKLOAD, HEADLINE_THREADS = "signup", 32
# (numerator, denominator) ratios of the headline, in this order.
HEADLINE_RATIOS = [("unico-async", "postgres"), ("unico-log", "postgres"),
                   ("unico", "postgres"), ("unico-log", "sqlite")]
WORKLOADS = ["signup", "email-change", "mixed", "hot"]
ANALYSIS_PLACEHOLDER = (
    "## Analysis\n\n"
    "_Placeholder: the lead engineer replaces this section with the analysis of "
    "these numbers. bench/report.py keeps whatever is written here when it "
    "regenerates this file._\n"
)


def read_csv(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            try:
                r["threads"] = int(r["threads"])
                for k in ("ops_per_s", "p50_us", "p99_us", "p999_us", "cpu_us_per_op"):
                    r[k] = float(r[k])
                for k in ("ops", "errors", "conflicts", "retries"):
                    r[k] = int(r[k])
                # (absent from results.csv files written before it existed)
                c = r.get("ctxsw_per_op")
                r["ctxsw_per_op"] = float(c) if c not in (None, "") else None
                c = r.get("serial_us_per_op")
                r["serial_us_per_op"] = float(c) if c not in (None, "") else None
            except (KeyError, ValueError):
                continue
            rows.append(r)
    return rows


def split_nosync(rows):
    """(the throughput rows, the sync=off rows)."""
    own = (NOSYNC, NOSYNC_TYPED)
    return ([r for r in rows if r["engine"] not in own],
            [r for r in rows if r["engine"] in own])


def at_threads(ix, e, w, t, rows):
    """The point of engine e at t threads, or (an engine measured at fewer
    threads, such as the async one at one thread per core) its point at
    the most threads it was measured at."""
    r = ix.get((e, w, t))
    if r is not None:
        return r
    ts = sorted(r["threads"] for r in rows if r["engine"] == e and r["workload"] == w)
    return ix.get((e, w, ts[-1])) if ts else None


def index(rows):
    """(engine, workload, threads) -> row; the last line wins on repeats."""
    return {(r["engine"], r["workload"], r["threads"]): r for r in rows}


def engine_list(rows):
    """The known engines in their usual order, then any other (e.g. an HTTP one)."""
    seen = {r["engine"] for r in rows}
    return [e for e in ENGINES if e in seen] + sorted(seen - set(ENGINES))


def is_unico(e):
    return e in UNICO_VARIANTS


def ratio_pairs(engines):
    """(unico variant, baseline) for every ratio column, in engine order."""
    return [(u, b) for u in engines if is_unico(u) for b in engines if not is_unico(b)]


def fmt_int(x):
    return f"{x:,.0f}"


def fmt_ratio(a, b):
    if a is None or b is None or b["ops_per_s"] <= 0:
        return "-"
    return f"{a['ops_per_s'] / b['ops_per_s']:.1f}x"


def fmt_num(x):
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.1f}"


def make_table(rows):
    ix = index(rows)
    workloads = [w for w in WORKLOADS if any(r["workload"] == w for r in rows)]
    workloads += sorted({r["workload"] for r in rows} - set(workloads))
    engines = engine_list(rows)
    out = []
    pairs = ratio_pairs(engines)
    out.append("Throughput in operations per second (higher is better); a ratio "
               "`A/B` is engine A's throughput over engine B's at the same thread "
               "count (each unico mode against each baseline). "
               "p99 latency and CPU per operation are given as " + " / ".join(engines) +
               " (CPU for postgres includes the server processes). "
               "A ⚠ marks a point with unexpected outcomes (errors).\n")
    for w in workloads:
        threads = sorted({r["threads"] for r in rows if r["workload"] == w})
        out.append(f"\n### {w}\n")
        head = ["threads"] + [f"{e} ops/s" for e in engines]
        head += [f"{u}/{b}" for u, b in pairs]
        head += ["p99 µs (" + " / ".join(engines) + ")",
                 "CPU µs/op (" + " / ".join(engines) + ")"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join(["---:"] * len(head)) + "|")
        for t in threads:
            cells = [str(t)]
            for e in engines:
                r = ix.get((e, w, t))
                if r is None:
                    cells.append("-")
                else:
                    warn = " ⚠" if r["errors"] else ""
                    cells.append(fmt_int(r["ops_per_s"]) + warn)
            for u, b in pairs:
                cells.append(fmt_ratio(ix.get((u, w, t)), ix.get((b, w, t))))
            for key in ("p99_us", "cpu_us_per_op"):
                vals = []
                for e in engines:
                    r = ix.get((e, w, t))
                    vals.append("-" if r is None else fmt_num(r[key]))
                cells.append(" / ".join(vals))
            out.append("| " + " | ".join(cells) + " |")
    errs = [r for r in rows if r["errors"]]
    out.append("")
    if errs:
        out.append("**Points with unexpected outcomes:** " + ", ".join(
            f"{r['engine']} {r['workload']} t={r['threads']} ({r['errors']} errors)" for r in errs))
    else:
        out.append("Every operation of every point had the expected outcome "
                   "(0 errors in results.csv).")
    return "\n".join(out) + "\n"


def make_plot(rows, results, png_name="throughput.png"):
    """A 2x2 multiplot of ops/s against threads (log2 x, log y)."""
    gp = shutil.which("gnuplot")
    if not gp:
        return "gnuplot not found: no plot"
    datadir = os.path.join(results, "plotdata")
    os.makedirs(datadir, exist_ok=True)
    ix = index(rows)
    workloads = [w for w in WORKLOADS if any(r["workload"] == w for r in rows)]
    engines = engine_list(rows)
    for w in workloads:
        for e in engines:
            if not any(ee == e and ww == w for (ee, ww, _t) in ix):
                continue
            pts = sorted((t, r["ops_per_s"]) for (ee, ww, t), r in ix.items() if ee == e and ww == w)
            with open(os.path.join(datadir, f"{e}-{w}.dat"), "w") as f:
                for t, v in pts:
                    f.write(f"{t} {v}\n")
    # unico red, unico-log dark green, postgres blue, sqlite orange (not a
    # second green next to unico-log's).
    styles = {"unico": "lc rgb '#d62728' pt 7", "unico-log": "lc rgb '#006400' pt 11",
              "unico-async": "lc rgb '#9467bd' pt 13",
              "unico-log-leader": "lc rgb '#2ca02c' pt 15",
              "postgres": "lc rgb '#1f77b4' pt 5", "sqlite": "lc rgb '#ff7f0e' pt 9"}
    lines = [
        "set terminal pngcairo size 1400,1000 font 'sans,11'" ,
        f"set output '{os.path.join(results, png_name)}'",
        "set multiplot layout 2,2 title 'unico-bench: throughput vs threads (durable commits)'",
        "set logscale x 2", "set logscale y 10", "set grid",
        "set xlabel 'threads'", "set ylabel 'ops/s'", "set key top left",
        "set format y '%.0s%c'",
    ]
    for w in workloads:
        lines.append(f"set title '{w}'")
        plots = []
        for e in engines:
            if not any(ee == e and ww == w for (ee, ww, _t) in ix):
                continue
            path = os.path.join(datadir, f"{e}-{w}.dat")
            plots.append(f"'{path}' using 1:2 with linespoints lw 2 {styles.get(e, '')} title '{e}'")
        lines.append("plot " + ", ".join(plots))
    lines.append("unset multiplot")
    script = os.path.join(datadir, "throughput.gp")
    with open(script, "w") as f:
        f.write("\n".join(lines) + "\n")
    # pngcairo may be missing (gnuplot-nox has it; some builds only have png).
    p = subprocess.run([gp, script], capture_output=True, text=True)
    if p.returncode != 0 and "pngcairo" in p.stderr:
        with open(script, "w") as f:
            f.write("\n".join(lines).replace("pngcairo size 1400,1000 font 'sans,11'",
                                             "png size 1400,1000") + "\n")
        p = subprocess.run([gp, script], capture_output=True, text=True)
    if p.returncode != 0:
        return "gnuplot failed: " + p.stderr.strip()[:500]
    return None


def make_headline(rows):
    """signup at 32 threads (else the most threads measured): ops/s of each
    engine and the headline ratios, as a one-row table."""
    ix = index(rows)
    ts = sorted({r["threads"] for r in rows if r["workload"] == HEADLINE_WORKLOAD})
    if not ts:
        return None
    t = HEADLINE_THREADS if HEADLINE_THREADS in ts else ts[-1]
    shown = [e for e in engine_list(rows) if e in ENGINES]
    ratios = HEADLINE_RATIOS
    ratios = [(a, b) for a, b in ratios if a in shown and b in shown]
    head = [f"{e} ops/s" for e in shown] + [f"{a}/{b}" for a, b in ratios]
    cells = []
    for e in shown:
        r = at_threads(ix, e, HEADLINE_WORKLOAD, t, rows)
        note = f" ({r['threads']} threads)" if r is not None and r["threads"] != t else ""
        cells.append("-" if r is None else
                     fmt_int(r["ops_per_s"]) + note + (" ⚠" if r["errors"] else ""))
    for a, b in ratios:
        ra = at_threads(ix, a, HEADLINE_WORKLOAD, t, rows)
        rb = at_threads(ix, b, HEADLINE_WORKLOAD, t, rows)
        v = fmt_ratio(ra, rb)
        cells.append(f"**{v}**" if v != "-" else v)
    out = [f"**{HEADLINE_WORKLOAD}, {t} threads** (durable inserts with 3 unique values; "
           "ops/s, higher is better; `A/B` is A's throughput over B's; the full "
           "tables are under [Table](#table)):\n",
           "| " + " | ".join(head) + " |",
           "|" + "|".join(["---:"] * len(head)) + "|",
           "| " + " | ".join(cells) + " |"]
    return "\n".join(out) + "\n"


def make_cpu_section(rows, nosync):
    """Issue 20's three figures per workload: the library's own CPU per
    operation (unico-log, 1 thread, sync=off), the CPU per durable operation
    at 32 threads (the async engine at its most threads), and context
    switches per operation there."""
    ix = index(rows)
    nix = index(nosync)
    out = ["CPU per operation is the process's user+system time over the "
           "measured interval divided by the operations (postgres: its server "
           "processes included), context switches per operation the same with "
           "`getrusage`'s voluntary and involuntary switches (postgres: its "
           "processes' from /proc). **Own work** is unico-log at 1 thread with "
           "`sync=off`: the library's CPU with no sync and no waiting; "
           "**typed** the same with the records and keys handed over as "
           "typed column values (`unico_insert_values`, `unico-bench "
           "--typed`) instead of JSON text. The "
           "other two columns are at 32 threads, or for unico-async (one "
           "thread per core, writes in flight) at its most threads.\n"]
    head = ["workload", "engine", "own work µs/op (1 thread, sync=off)",
            "own work, typed", "ops/s", "CPU µs/op (durable)", "context switches/op"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|---|---|" + "|".join(["---:"] * (len(head) - 2)) + "|")
    for w in WORKLOADS:
        own = nix.get((NOSYNC, w, 1))
        owt = nix.get((NOSYNC_TYPED, w, 1))
        for e in engine_list(rows):
            r = at_threads(ix, e, w, HEADLINE_THREADS, rows)
            if r is None:
                continue
            t = f" ({r['threads']} threads)" if r["threads"] != HEADLINE_THREADS else ""
            cells = [w, e + t,
                     fmt_num(own["cpu_us_per_op"]) if own and e == "unico-log" else "",
                     fmt_num(owt["cpu_us_per_op"]) if owt and e == "unico-log" else "",
                     fmt_int(r["ops_per_s"]), fmt_num(r["cpu_us_per_op"]),
                     "-" if r["ctxsw_per_op"] is None else f"{r['ctxsw_per_op']:.2f}"]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def make_serial_section(rows, nosync):
    """Issue 34's serial part: per unico point, the time per operation the
    write path spent where only one thread can be (the batch leader), and
    the ceiling it sets (its inverse) on any number of cores."""
    have = [r for r in rows + nosync
            if is_unico(r["engine"]) or r["engine"] in (NOSYNC, NOSYNC_TYPED)]
    have = [r for r in have if r.get("serial_us_per_op") is not None]
    if not have:
        return ("_No serial_us_per_op in results.csv (written before "
                "unico-bench measured it)._\n")
    out = ["`serial_us_per_op` is the time per operation that the write "
           "path spent where only one thread can be, over the measured "
           "interval, divided by the operations (lookups included, which take "
           "no part in it). With the batch leader (plain mode, "
           "`unico-log-leader`) that is the leader's role, from taking a "
           "batch to passing the role on: the checks, the table or "
           "transaction updates, the log append or commit, a rotation or a "
           "wait for the checkpointer; not the sync, which runs beside the "
           "next batch. With parallel writers (`unico-log`, `unico-async`: "
           "log mode's default) it is the copy of a writer's log record "
           "into the shared buffer under the log's lock, the file write of "
           "the buffer, a freeze of the table and a write too wide for the "
           "part latches; each writer's checks and table updates run in "
           "parallel under its latches. Its inverse is the most operations "
           "per second the write path allows on any number of cores. "
           "unico-bench reads it from the library "
           "(`ustore_lmdb_serial_ns()`, src/store/lmdb.h).\n"]
    ix = index(rows)
    head = ["workload", "engine", "threads", "ops/s", "serial µs/op",
            "ceiling ops/s", "share of the run", "postgres ops/s"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|---|---|" + "|".join(["---:"] * (len(head) - 2)) + "|")
    order = {e: i for i, e in enumerate(ENGINES + [NOSYNC, NOSYNC_TYPED])}
    have.sort(key=lambda r: (WORKLOADS.index(r["workload"]) if r["workload"] in WORKLOADS
                             else 99, order.get(r["engine"], 99), r["threads"]))
    for r in have:
        sv = r["serial_us_per_op"]
        ceil = fmt_int(1e6 / sv) if sv > 0 else "-"
        # the share of the wall time a leader held the role
        share = f"{sv * r['ops_per_s'] / 1e4:.0f}%"
        # (durable points only: the sync=off ones are no match for it)
        pg = ix.get(("postgres", r["workload"], r["threads"])) if is_unico(r["engine"]) else None
        out.append("| " + " | ".join([r["workload"], r["engine"], str(r["threads"]),
                                       fmt_int(r["ops_per_s"]), f"{sv:.2f}", ceil,
                                       share, fmt_int(pg["ops_per_s"]) if pg else "-"])
                   + " |")
    return "\n".join(out) + "\n"


def profile_section(results, name, label, out_dir):
    """The '## Profile' section of one unico mode from results/NAME."""
    path = os.path.join(results, name)
    text = read(path).rstrip()
    title = f"## Profile: {label}, signup, 32 threads\n"
    if not text:
        return title + (f"\n_No profile of {label} (perf unavailable, skipped with "
                         f"BENCH_NO_PERF=1, or {label} not in BENCH_ENGINES)._\n")
    rel = os.path.relpath(path, out_dir)
    cg = os.path.join(results, name.replace(".txt", "-callgraph.txt"))
    cg_rel = os.path.relpath(cg, out_dir)
    note = ""
    # run.sh stamps each profile with the "date:" of machine.txt; another
    # date means a profile left over from an earlier run (BENCH_NO_PERF=1).
    m_run = re.search(r"^# run: (.+)$", text, re.M)
    m_date = re.search(r"^date:\s+(.+)$", read(os.path.join(results, "machine.txt")), re.M)
    if m_run and m_date and m_run.group(1).strip() != m_date.group(1).strip():
        note = (f" **This profile is from an earlier run** ({m_run.group(1).strip()}) "
                "than the numbers above.")
    head = text.splitlines()[0].lstrip("# ").strip()
    md = [title,
          f"`perf record -F 999 -g -e cpu-clock` of `{head}`, then `perf report --stdio "
          "--no-children`: the symbols with the most samples (self time), then the "
          "inclusive time per function from a second recording with DWARF call graphs. "
          f"Full text in [`{rel}`]({rel})"
          + (f"; callers of the hottest paths in [`{cg_rel}`]({cg_rel})" if os.path.exists(cg) else "")
          + "."
          + (" The recording covers the whole process, so it includes the checkpoint "
             "into LMDB that closing the store does after the measured interval "
             "(under `unico_close`)." if label == "unico-log" else "")
          + note + "\n",
          "```\n" + text + "\n```\n"]
    return "\n".join(md)


def existing_analysis(path):
    """The '## Analysis' section of an existing file, up to the next '## '."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r"^## Analysis[ \t]*\n.*?(?=^## (?!#)|\Z)", text, re.S | re.M)
    return m.group(0).rstrip() + "\n" if m else None


# Sections this script writes; every other '## ' section of an existing
# RESULTS.md (written by other benchmarks: DynamoDB, import) is kept as is.
GENERATED = ("Headline", "How to reproduce", "What is measured", "Machine",
             "Throughput", "Table", "CPU and context switches", "Serial part",
             "Analysis", "Profile:")


def other_sections(path):
    """The sections of an existing file that this script does not write."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return []
    out = []
    for m in re.finditer(r"^## (?!#)([^\n]*)\n.*?(?=^## (?!#)|\Z)", text, re.S | re.M):
        if not m.group(1).strip().startswith(GENERATED):
            out.append(m.group(0).rstrip() + "\n")
    return out


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", default=os.path.join(here, "results"))
    ap.add_argument("--out", default=os.path.join(here, "RESULTS.md"))
    ap.add_argument("--command", default=None)
    ap.add_argument("--no-plot", action="store_true")
    a = ap.parse_args()

    csv_path = os.path.join(a.results, "results.csv")
    if not os.path.exists(csv_path):
        sys.exit(f"report.py: {csv_path} not found (run bench/run.sh first)")
    rows, nosync = split_nosync(read_csv(csv_path))
    table = make_table(rows)
    with open(os.path.join(a.results, "table.md"), "w") as f:
        f.write(table)
    plot_note = None if a.no_plot else make_plot(rows, a.results)

    command = (a.command or "").strip() or read(os.path.join(a.results, "command.txt")).strip() or "sh bench/run.sh"
    machine = read(os.path.join(a.results, "machine.txt")).rstrip() or "(machine.txt missing)"
    headline = make_headline(rows)
    analysis = existing_analysis(a.out) or ANALYSIS_PLACEHOLDER
    png_rel = os.path.relpath(os.path.join(a.results, "throughput.png"), os.path.dirname(a.out))

    md = []
    md.append("# unico-bench results\n")
    md.append("<!-- Generated by bench/report.py (run by bench/run.sh). Edit only the "
              "Analysis section: the rest is rewritten on every run. -->\n")
    md.append(f"Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')} from "
              f"`{os.path.relpath(csv_path, os.path.dirname(a.out))}`.\n")
    md.append("## Headline\n")
    md.append("unico's embedded LMDB store is measured in its two modes:\n\n"
              "- **unico**, plain mode (`lmdb:DIR`): many processes may share the store; "
              "concurrent writes are group-committed as LMDB transactions.\n"
              "- **unico-log**, log mode (`lmdb:DIR?wal=on`): one owner process; "
              "writes are appended to a write-ahead log, many to one `fdatasync`, then "
              "checkpointed into LMDB. Its writers are parallel (the default, "
              "`writers=parallel`): each latches its keys' parts of the table and only "
              "its log record's copy is serial.\n"
              "- **unico-log-leader**, the same with the batch leader "
              "(`lmdb:DIR?wal=on&writers=leader`): one thread at a time applies a "
              "batch of everyone's writes (log mode's default before issue 34).\n"
              "- **unico-async**, log mode driven through `unico_submit` (asynchronous "
              "writes, answered once durable) by one thread per core with 256 writes in "
              "flight each (signup, email-change, mixed).\n")
    md.append(headline or "_No signup points in results.csv._\n")
    md.append("## How to reproduce\n")
    md.append("From the repository root (installs what is missing, builds Release in "
              "`build-bench/`, starts a private PostgreSQL 15, runs every point, writes "
              "`bench/results/` and this file):\n")
    md.append("```sh\n" + command + "\n```\n")
    md.append("## What is measured\n")
    md.append(
        "The same table on every engine, `users(id text primary key, email, phone, "
        "provider, external_id, name)`, with three uniques: email case-insensitive "
        "(unico `UNIQUE (email) NORMALIZE casefold`; PostgreSQL and SQLite a unique "
        "index on `lower(email)`), `UNIQUE (phone)`, `UNIQUE (provider, external_id)`.\n\n"
        "- **unico**: the embedded LMDB store in plain mode (`lmdb:DIR`), in process, "
        "one shared handle, durable commits (the default `sync=on`); many processes "
        "may share the store, and concurrent writes are group-committed as LMDB "
        "transactions (one sync per batch).\n"
        "- **unico-log**: the same store in log mode (`lmdb:DIR?wal=on`; "
        "`unico-bench --engine unico --label unico-log --store-base 'DIR?wal=on'`): "
        "one owner process; each batch of writes is appended to a write-ahead log "
        "with one `fdatasync`, kept in an in-memory table, and checkpointed into "
        "LMDB in the background.\n"
        "- **unico-async**: the log mode store through `unico_submit` "
        "(`unico-bench --engine unico --label unico-async --async 256 --store-base "
        "'DIR?wal=on'`), one thread per core, each keeping 256 writes in flight; a "
        "write counts, and its latency ends, when its answer arrives, which is once "
        "it is durable; mixed's lookups are synchronous calls. Not hot.\n"
        "- **postgres**: PostgreSQL 15 on a private unix socket, libpq, one connection "
        "per thread, prepared statements, autocommit, `fsync=on`, "
        "`synchronous_commit=on`.\n"
        "- **sqlite**: one connection per thread on one file, `journal_mode=WAL`, "
        "`synchronous=FULL`, `busy_timeout=10s`, writes in `BEGIN IMMEDIATE`.\n\n"
        "Workloads: **signup** inserts a user with 3 unique values, 10% of them "
        "deliberately reusing a taken value (must be refused on that constraint); "
        "**email-change** moves one of the thread's preloaded users to a fresh email; "
        "**mixed** is 70% lookup by email (in another letter case), 20% insert, 10% "
        "email change; **hot** has every thread race for 8 hot emails, the winner "
        "deleting its record at once (attempts and deletes both count as operations, so "
        "a refused attempt, which needs no sync, weighs as much as a win; the wins "
        "per point are in `bench/results/run.log`). "
        "Every outcome is checked; each point starts from an empty dataset "
        "(email-change and mixed preload 200 users per thread, at least 10,000 in "
        "all). Latency percentiles come from per-thread log-linear histograms; CPU per "
        "operation is the process's user+system time (plus, for postgres, that of the "
        "server's processes) over the measured interval divided by the operations.\n")
    md.append("## Machine\n")
    md.append("```\n" + machine + "\n```\n")
    md.append("## Throughput\n")
    if plot_note:
        md.append(f"_No plot: {plot_note}_\n")
    else:
        md.append(f"![ops/s against threads for unico (plain and log mode), PostgreSQL "
                  f"and SQLite]({png_rel})\n")
    md.append("## Table\n")
    md.append(table)
    md.append("## CPU and context switches per operation\n")
    md.append(make_cpu_section(rows, nosync))
    md.append("## Serial part of the write path\n")
    md.append(make_serial_section(rows, nosync))
    md.append(analysis)
    out_dir = os.path.dirname(os.path.abspath(a.out))
    md.append(profile_section(a.results, "profile.txt", "unico", out_dir))
    md.append(profile_section(a.results, "profile-log.txt", "unico-log", out_dir))
    md.extend(other_sections(a.out))
    with open(a.out, "w") as f:
        f.write("\n".join(md))
    print(f"report.py: wrote {a.out}, {os.path.join(a.results, 'table.md')}"
          + ("" if plot_note or a.no_plot else f", {os.path.join(a.results, 'throughput.png')}"))
    if plot_note:
        print(f"report.py: {plot_note}", file=sys.stderr)


if __name__ == "__main__":
    main()
