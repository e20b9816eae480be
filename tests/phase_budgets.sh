#!/bin/sh
# phase_budgets.sh SOURCE_DIR - scripts/test.sh's phases and their budgets
# (scripts/phases.sh, issue 36):
#  - every phase scripts/test.sh runs, and the totals, has a budget;
#    the totals are the stated goals (45 minutes full, 10 quick);
#  - a phase past its budget is marked in the table and fails the run
#    (finish returns 1 naming it), one within its budget passes, and the
#    table is printed also when a phase failed; UNICO_BUDGET_SCALE scales.
# The phases here are short commands timed against budgets made small by
# UNICO_BUDGET_SCALE=0 (no budget) or a budget() of the test's own.
set -u
SRC=$1
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# every phase of test.sh has a budget above 0
names=$(sed -n 's/^ *phase \("[^"]*"\|[a-z-]*\) .*/\1/p' "$SRC/scripts/test.sh" | tr -d '"' | sort -u)
[ -n "$names" ] || bad "no phase found in scripts/test.sh"
echo "$names" | while IFS= read -r n; do
  b=$(cd "$SRC" && sh -c '. scripts/phases.sh; budget "$1"' x "$n")
  [ "$b" -gt 0 ] || echo "FAIL: phase \"$n\" of scripts/test.sh has no budget"
done | grep FAIL && fails=$((fails + 1))
t=$(cd "$SRC" && sh -c '. scripts/phases.sh; budget total')
q=$(cd "$SRC" && sh -c '. scripts/phases.sh; budget total-quick')
[ "$t" -gt 0 ] && [ "$t" -le 2700 ] || bad "the full run's budget is $t s, not within 45 minutes"
[ "$q" -gt 0 ] && [ "$q" -le 600 ] || bad "--quick's budget is $q s, not within 10 minutes"
s=$(cd "$SRC" && UNICO_BUDGET_SCALE=3 sh -c '. scripts/phases.sh; budget total')
[ "$s" -eq $((t * 3)) ] || bad "UNICO_BUDGET_SCALE=3 gives $s, not $((t * 3))"
ok "budgets: every phase of scripts/test.sh ($(echo $names | tr '\n' ' ')); total $t s, quick $q s"

# a phase past its budget fails the run; within it passes
run() { # QUICK, then the phases: each NAME:SECONDS:RC
  (cd "$SRC" && QUICK=$1 TEST_JOBS=2 sh -c '
    . scripts/phases.sh
    budget() { case $1 in build) echo 1 ;; test) echo 5 ;; test-quick) echo 1 ;; *) echo 100 ;; esac; }
    shift
    for p in "$@"; do
      n=${p%%:*}; r=${p#*:}; s=${r%%:*}; c=${r#*:}
      phase "$n" sh -c "sleep $s; exit $c" || { table; exit 9; }
    done
    finish' x "$@")
}
o=$(run 0 build:0:0 test:2:0)
rc=$?
echo "$o"
[ "$rc" -eq 0 ] || bad "phases within their budgets: exit $rc"
echo "$o" | grep -q "OVER" && bad "a phase within its budget is marked over it"
echo "$o" | grep -Eq '^  test +2 s  \(budget +5 s\)$' || bad "the table lacks the row of test with its time and budget"
o=$(run 0 build:2:0 test:0:0)
rc=$?
echo "$o"
[ "$rc" -eq 1 ] || bad "a phase past its budget: exit $rc, not 1"
echo "$o" | grep -Eq '^  build +2 s  \(budget +1 s\)  OVER BUDGET$' || bad "the phase past its budget is not marked"
echo "$o" | grep -q '^== FAIL: past its budget: build ' || bad "the failure does not name the phase"
# --quick: its test phase has a budget of its own
o=$(run 1 test:2:0)
rc=$?
echo "$o"
[ "$rc" -eq 1 ] && echo "$o" | grep -q 'past its budget: test-quick' || bad "--quick's test phase is not held to test-quick's budget"
# a failing phase: the table of the phases so far is printed
o=$(run 0 build:0:0 test:0:3)
rc=$?
echo "$o"
[ "$rc" -eq 9 ] && echo "$o" | grep -q '^== time per phase' || bad "no table after a failed phase"
ok "a phase past its budget fails the run, named in the table"

[ "$fails" -eq 0 ] || { echo "phase_budgets: $fails failure(s)"; exit 1; }
echo "phase_budgets: all passed"
