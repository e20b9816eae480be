#!/usr/bin/env python3
"""cass_round_trips.py - the round trips an update and a delete wait for on
the Cassandra store stay at the claims protocol's budget (docs/protocol.md,
"Updates and deletes"; DESIGN.md section 6): an update changing a unique
value <= 3, a delete <= 2 without an op id and <= 3 with one (its own
outcome is stored before its tombstone leaves the key), an insert of fresh
values 2. Counted by the store itself (cass-bench's figures: every batch the
caller waited for), so a change that adds a round trip fails here, not only
in the benchmark.

usage: cass_round_trips.py CASS_BENCH  (with UNICO_TEST_STORE_BASE set by
tests/support/cassandra_run.sh)"""
import json
import os
import subprocess
import sys
import tempfile

BUDGET = {  # (op, op id given): most round trips per operation
    ("insert", False): 2, ("insert", True): 2,
    ("update", False): 3, ("update", True): 3,
    ("delete", False): 2, ("delete", True): 3,
}


def main():
    bench = sys.argv[1]
    base = os.environ["UNICO_TEST_STORE_BASE"]
    if base.endswith("&table="):
        base = base[: -len("&table=")]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "rt.json")
        subprocess.run([bench, "--store", base, "--n", "5", "--json", out],
                       check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            rows = json.load(f)
    bad = []
    seen = set()
    for row in rows:
        key = (row["op"], bool(row["op_id"]))
        seen.add(key)
        if row["round_trips"] > BUDGET[key] + 1e-9:
            bad.append("%s (k %d, op id %s): %.2f round trips, budget %d"
                       % (row["op"], row["k"], "yes" if row["op_id"] else "no",
                          row["round_trips"], BUDGET[key]))
    if seen != set(BUDGET):
        bad.append("rows missing: %s" % sorted(set(BUDGET) - seen))
    for b in bad:
        print("cass_round_trips: " + b)
    if bad:
        return 1
    print("cass_round_trips: %d rows within budget" % len(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
