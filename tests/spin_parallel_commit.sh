#!/bin/sh
# spin_parallel_commit.sh - exhaustive check of model/parallel_commit.pml,
# the parallel-commit design (docs/parallel-commit.md), with spin.
#
# The design AS WRITTEN must be caught (it is broken: model/README.md,
# "parallel_commit.pml"), and so must each of its flaws alone; the design
# WITH THE THREE FIXES (the model's default) must hold its invariants in
# every configuration below; each variant broken on purpose must be
# caught.
# Exit 0: all as expected; 1: not (or spin or a C compiler missing).
# Takes about 3 minutes on 2 cores (one pan at a time).
# Usage: sh tests/spin_parallel_commit.sh
set -u

case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
here=$(cd "$here" && pwd) || exit 1
. "$here/support/spin_lib.sh"
spin_setup parallel_commit.pml spin_pc

# pan: safety only, states stored collapsed, memory capped (MB); the hash
# table is 2^24 slots; the DFS stack is far deeper than any run needs
# (the deepest reaches about 500). Runs that must pass are compiled with
# -O2; runs expected to stop at a violation early, with -O0 (faster to
# build).
PANCC="-w -DSAFETY -DCOLLAPSE -DMEMLIM=1800"
PANRUN="-m100000 -w24"

fail=0
t_start=$(date +%s)


# ---- the design as written, and each of its flaws alone: caught ----
verify "AS WRITTEN: 2 writers, crash+repeat" fail \
  -DAS_WRITTEN -DNW=2 -DBUILD=0 -DATTEMPTS=2
verify "flaw 1a: own claim adopted unmoved (op naming), 2 writers + build" fail \
  -DOP_NAMING -DADOPT_OWN -DNW=2 -DATTEMPTS=2 -DCRASHES=0
verify "flaw 1b: undo frees under an earlier run's intent (op naming)" fail \
  -DOP_NAMING -DUNDO_OWN_ONLY -DNW=2 -DBUILD=0 -DATTEMPTS=2
verify "flaw 1c: op naming even with 1a and 1b patched, 3 runs" fail \
  -DOP_NAMING -DNW=2 -DBUILD=0 -DATTEMPTS=3
verify "flaw 2: tombstone owner's claim taken unfenced, 2 writers" fail \
  -DTOMB_UNFENCED -DNW=2 -DBUILD=0 -DATTEMPTS=2 -DCRASHES=0
verify "flaw 3: undo only reads, lost intent lands any time (LATE=2)" fail \
  -DUNDO_READ -DNW=1 -DATTEMPTS=4 -DLOSE=1 -DLATE=2

# ---- the design with the three fixes: holds ----
verify "1 writer + build, crash/lost answer + repeat, 4 runs" pass \
  -DNW=1 -DATTEMPTS=4
verify "1 writer + build, 4 runs, a lost batch call lands any time" pass \
  -DNW=1 -DATTEMPTS=4 -DLOSE=1 -DLATE=2
verify "undo only reads, lost call settled by the next call (LATE=1)" pass \
  -DUNDO_READ -DNW=1 -DATTEMPTS=4 -DLOSE=1 -DLATE=1
verify "1 writer + build + reader, 2 runs" pass \
  -DNW=1 -DATTEMPTS=2 -DREADER=1
verify "2 writers, crash/lost answer + repeat, 3 + 2 runs" pass \
  -DNW=2 -DBUILD=0 -DATTEMPTS=3 -DATTEMPTS2=2
verify "2 writers + build, 2 runs each, no crash" pass \
  -DNW=2 -DATTEMPTS=2 -DCRASHES=0
verify "2 writers + build, crash+repeat, 2 + 1 runs" pass \
  -DNW=2 -DATTEMPTS=2 -DATTEMPTS2=1
verify "2 writers, w0 loses a batch call (LATE=2), 2 runs each" pass \
  -DNW=2 -DBUILD=0 -DATTEMPTS=2 -DLOSE=1 -DLOSE2=0
verify "2 writers on the same pk, 2 runs each" pass \
  -DNW=2 -DSAMEPK=1 -DBUILD=0 -DATTEMPTS=2
verify "3 writers, crash+repeat, 2 + 2 + 1 runs" pass \
  -DNW=3 -DBUILD=0 -DATTEMPTS=2 -DATTEMPTS3=1

# ---- broken on purpose (on top of the fixed design): caught ----
verify "broken NO_ONESHOT (a fenced claim taken again)" fail \
  -DNO_ONESHOT -DNW=2 -DATTEMPTS=2 -DATTEMPTS2=1
verify "broken NO_FENCE (abort without fencing)" fail \
  -DNO_FENCE -DNW=2 -DATTEMPTS=2 -DATTEMPTS2=1
verify "broken BUILD_NO_RESOLVE (the build aborts every PENDING)" fail \
  -DBUILD_NO_RESOLVE -DNW=1 -DATTEMPTS=4
verify "broken READ_PARALLEL (schema read in the first round trip)" fail \
  -DREAD_PARALLEL -DNW=1 -DATTEMPTS=4

# ---- notes ----
verify "FENCE_ONE (rule 2 fences one missing claim only)" note \
  -DFENCE_ONE -DNW=2 -DATTEMPTS=2 -DATTEMPTS2=1
verify "STRICT_PRED (predicate read literally during a build)" note \
  -DSTRICT_PRED -DNW=1 -DATTEMPTS=4

echo "total $(($(date +%s) - t_start)) s"
exit $fail
