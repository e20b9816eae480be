#!/bin/sh
# spin_model.sh - exhaustive check of model/claims.pml (the claims protocol,
# docs/protocol.md) with spin. The model as written must hold its
# invariants in every configuration below; each deliberately broken
# variant must be caught. Exit 0: all as expected; 1: not; 77: skipped
# (spin or a C compiler missing).
# Usage: sh tests/spin_model.sh
set -u

case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
here=$(cd "$here" && pwd) || exit 1
. "$here/spin_lib.sh"
spin_setup claims.pml spin_model

# pan: safety only, states stored collapsed, memory capped (MB); the hash
# table is 2^24 slots. The DFS stack is far deeper than any run needs.
PANCC="-O2 -w -DSAFETY -DCOLLAPSE -DMEMLIM=1800"
PANRUN="-m50000 -w24"

fail=0

# verify NAME EXPECT SPIN-DEFINES...: EXPECT is pass, fail or note
verify() {
  name=$1 expect=$2
  shift 2
  rm -f pan pan.* claims.pml.trail
  if ! spin "$@" -a claims.pml >spin.out 2>&1; then
    echo "FAIL $name: spin -a $*"
    cat spin.out
    fail=1
    return
  fi
  # shellcheck disable=SC2086
  if ! "$CC" $PANCC -o pan pan.c >cc.out 2>&1; then
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
        -e 'memory' -e 'not completed' pan.out
      [ -f claims.pml.trail ] && spin "$@" -t -p claims.pml | tail -n 40
      fail=1
    fi
    ;;
  fail)
    if [ "${errors:-0}" -gt 0 ] && grep -q 'assertion violated' pan.out; then
      echo "ok   $name: violation found, as it should ($fig)"
    else
      echo "FAIL $name: the broken variant was not caught ($fig)"
      fail=1
    fi
    ;;
  note)
    if [ "${errors:-0}" -gt 0 ]; then
      echo "note $name: violation found (known, see model/README.md) ($fig)"
    else
      echo "note $name: no violation ($fig)"
    fi
    ;;
  esac
}

# the protocol as implemented
verify "2 writers, insert+delete, crash+repeat, late commit" pass -DSCEN=2
verify "2 writers, insert+delete, crash+repeat, lost commit" pass -DSCEN=2 -DLATE=0
verify "3 writers, same-pk re-insert, lost+late commits" pass \
  -DSCEN=3 -DATTEMPTS=1 -DLOSSES=1 -DATTEMPTS3=1 -DLOSSES3=1
verify "3 writers, 3 pks, lost+late commits" pass \
  -DSCEN=4 -DATTEMPTS=1 -DLOSSES=1 -DATTEMPTS3=1 -DLOSSES3=1

# broken on purpose: each must be caught. NO_INV2 leaves only invariant 1
# (two live records holding K) to be violated: the UNIQUE itself.
verify "broken NO_FENCE (orphan taken over unfenced)" fail \
  -DSCEN=2 -DNO_INV2 -DNO_FENCE
verify "broken NO_REWRITE (claim not rewritten after a late intent)" fail \
  -DSCEN=2 -DNO_INV2 -DNO_REWRITE
verify "broken BLIND_COMMIT (commit ignores the version)" fail \
  -DSCEN=2 -DNO_INV2 -DBLIND_COMMIT

# a lost commit that may land at ANY later time (model/README.md): the
# protocol holds since a repeat moves its own intent; adopting it at its
# version, as claims.c once did, breaks the UNIQUE
verify "2 writers, lost commit lands any time (LATE=2)" pass -DSCEN=2 -DLATE=2
verify "broken ADOPT_OWN_INTENT with LATE=2 (own intent adopted unmoved)" fail \
  -DSCEN=2 -DLATE=2 -DNO_INV2 -DADOPT_OWN_INTENT

exit $fail
