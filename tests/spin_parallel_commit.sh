#!/bin/sh
# spin_parallel_commit.sh - exhaustive check of model/parallel_commit.pml,
# the parallel-commit design (docs/parallel-commit.md), with spin.
#
# The design AS WRITTEN must be caught (it is broken: model/README.md,
# "parallel_commit.pml"), and so must each of its flaws alone; the design
# WITH THE THREE FIXES (the model's default) must hold its invariants in
# every configuration below; each variant broken on purpose must be
# caught.
# Exit 0: all as expected; 1: not; 77: skipped (spin or a C compiler
# missing). Takes about 3 minutes on 2 cores (one pan at a time).
# Usage: sh tests/spin_parallel_commit.sh
set -u

case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
here=$(cd "$here" && pwd) || exit 1
. "$here/spin_lib.sh"
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

# verify NAME EXPECT SPIN-DEFINES...: EXPECT is pass, fail or note
verify() {
  name=$1 expect=$2
  shift 2
  case $expect in
  pass) opt=-O2 ;;
  *) opt=-O0 ;;
  esac
  rm -f pan pan.* parallel_commit.pml.trail
  if ! spin "$@" -a parallel_commit.pml >spin.out 2>&1; then
    echo "FAIL $name: spin -a $*"
    cat spin.out
    fail=1
    return
  fi
  # shellcheck disable=SC2086
  if ! "$CC" $opt $PANCC -o pan pan.c >cc.out 2>&1; then
    echo "FAIL $name: compiling pan"
    cat cc.out
    fail=1
    return
  fi
  t0=$(date +%s)
  # shellcheck disable=SC2086
  ./pan $PANRUN >pan.out 2>&1
  t1=$(date +%s)
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out | head -n 1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.out | head -n 1)
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -n 1)
  inv=$(sed -n 's/.*assertion violated (\(inv[1-4]\).*/\1/p' pan.out | head -n 1)
  fig="states stored ${states:-?}, depth ${depth:-?}, $((t1 - t0)) s"
  truncated=0
  if grep -q -e 'max search depth too small' -e 'MEMLIM' -e 'out of memory' \
      -e 'resize hashtable' pan.out; then
    truncated=1
  fi
  case $expect in
  pass)
    if [ "$truncated" = 0 ] && [ "${errors:-x}" = 0 ] &&
      ! grep -q 'Search not completed' pan.out; then
      echo "ok   $name: no violation, search complete ($fig)"
    else
      echo "FAIL $name: expected errors: 0 and a complete search ($fig)"
      grep -e 'violated' -e 'errors:' -e 'too small' -e 'MEMLIM' \
        -e 'memory' -e 'not completed' pan.out | cut -c1-200
      fail=1
    fi
    ;;
  fail)
    if [ "${errors:-0}" -gt 0 ] && grep -q 'assertion violated' pan.out; then
      echo "ok   $name: ${inv:-an assertion} violated, as it should ($fig)"
    else
      echo "FAIL $name: the broken variant was not caught ($fig)"
      fail=1
    fi
    ;;
  note)
    if [ "${errors:-0}" -gt 0 ]; then
      echo "note $name: ${inv:-an assertion} violated (see model/README.md) ($fig)"
    else
      echo "note $name: no violation ($fig)"
    fi
    ;;
  esac
}

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
