#!/bin/sh
# spin_model.sh - exhaustive check of model/claims.pml (the claims protocol,
# docs/protocol.md) with spin. The model as written must hold its
# invariants in every configuration below; each deliberately broken
# variant must be caught. Exit 0: all as expected; 1: not (or spin or a
# C compiler missing).
# Usage: sh tests/spin_model.sh
set -u

case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
here=$(cd "$here" && pwd) || exit 1
. "$here/support/spin_lib.sh"
spin_setup claims.pml spin_model

# pan: safety only, states stored collapsed, memory capped (MB); the hash
# table is 2^24 slots. The DFS stack is far deeper than any run needs.
PANCC="-w -DSAFETY -DCOLLAPSE -DMEMLIM=1800" # (verify adds -O2 or -O0)
PANRUN="-m50000 -w24"

fail=0


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

# an update that gives K up (issue 34: K read in its first batch, before
# its commit, freed at the version read after it)
verify "2 writers, insert+update releasing K, crash+repeat, late commit" pass -DSCEN=5
verify "2 writers, insert+update releasing K, lost commit lands any time" pass \
  -DSCEN=5 -DLATE=2
# (caught by INV2: in SCEN 5 no third writer takes the freed K)
verify "broken FREE_BLIND (a release frees K without the version read)" fail \
  -DSCEN=5 -DFREE_BLIND

# a delete reads K with its commit (before or after it): freeing K as read
# whoever took it lets a re-insert of the same primary key (SCEN 3) lose
# the claim it took over; INV2 (a live record named by K) catches it
verify "broken FREE_ANY_READ (a delete frees K as read, whoever took it)" fail \
  -DSCEN=3 -DATTEMPTS=1 -DLOSSES=1 -DATTEMPTS3=1 -DLOSSES3=1 -DFREE_ANY_READ

# a lost commit that may land at ANY later time (model/README.md): the
# protocol holds since a repeat moves its own intent; adopting it at its
# version, as claims.c once did, breaks the UNIQUE
verify "2 writers, lost commit lands any time (LATE=2)" pass -DSCEN=2 -DLATE=2
verify "broken ADOPT_OWN_INTENT with LATE=2 (own intent adopted unmoved)" fail \
  -DSCEN=2 -DLATE=2 -DNO_INV2 -DADOPT_OWN_INTENT

exit $fail
