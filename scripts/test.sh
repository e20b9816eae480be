#!/bin/sh
# Build unico and run every test: once in a normal build, once built with
# AddressSanitizer and UndefinedBehaviorSanitizer (all but the Promela
# models, label model, which check spin's models, not the library); then
# the mutation check
# (scripts/mutants.py: every mutant of tests/mutation must be killed) and the
# fuzz targets (tests/fuzz), built with clang and libFuzzer, each for a fixed
# time (UNICO_FUZZ_SECONDS, default 25). Installs what is missing (the test
# set of scripts/deps.sh).
# ctest runs UNICO_TEST_JOBS tests at once (default: the number of CPUs, at
# least 2); tests that must not overlap say so in tests/CMakeLists.txt
# (RESOURCE_LOCK, PROCESSORS).
# After each ctest run it prints how many tests were skipped, which and why
# (only tests labelled `live` may skip: scripts/ctest_summary.py fails the
# run otherwise), and at the end a table of the time each phase took
# against its budget (below); a phase past its budget fails the run.
# Usage: scripts/test.sh [--quick]   (--quick: the plain build and its tests
# only, without the tests labelled `slow`)
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh
JOBS=$(nproc 2>/dev/null || echo 2)
TEST_JOBS=${UNICO_TEST_JOBS:-$JOBS}
[ "$TEST_JOBS" -ge 2 ] || TEST_JOBS=2
QUICK=0
[ "${1:-}" != "--quick" ] || QUICK=1
TIMES=""
OVER=""
T_START=$(date +%s)

# Budgets, in seconds, per phase: what the phase took on the 2-core
# machine the tests are written on (ctest -j2, other engineers building and
# testing on the same cores) plus about half again, so that ordinary noise
# passes and a phase that grew by a slow new test fails here, before the CI's
# 90-minute limit is reached. The whole run (full) must stay under 45
# minutes, the --quick run under 10; see README.md#tests for the measured
# times. Raise a budget in the same commit as the test that needs it, and
# say why. UNICO_BUDGET_SCALE=N multiplies them all (a slower machine).
budget() {
  case $1 in
  build) b=240 ;;
  test) b=900 ;;
  test-quick) b=420 ;;
  "sanitizer build") b=300 ;;
  "sanitizer test") b=1080 ;;
  mutants) b=780 ;;
  "fuzz build") b=240 ;;
  fuzz) b=240 ;;
  total) b=2700 ;;
  total-quick) b=600 ;;
  *) b=0 ;;
  esac
  echo $((b * ${UNICO_BUDGET_SCALE:-1}))
}

# note NAME SECONDS: a row of the time table; past its budget, noted
note() {
  b=$(budget "$1")
  flag=""
  if [ "$b" -gt 0 ] && [ "$2" -gt "$b" ]; then
    flag="  OVER BUDGET"
    OVER="$OVER $1"
  fi
  TIMES="$TIMES$(printf '  %-16s %5d s  (budget %5d s)%s' "$1" "$2" "$b" "$flag")
"
}

# the table of phases so far (also when a phase failed: set -e ends the
# script there)
table() {
  [ -n "$TIMES" ] || return 0
  echo "== time per phase ($TEST_JOBS tests at once; load average now: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null))"
  printf '%s' "$TIMES"
  TIMES=""
}
trap table EXIT

# phase NAME COMMAND...: run it and note how long it took
phase() {
  name=$1
  shift
  t0=$(date +%s)
  rc=0
  "$@" || rc=$?
  secs=$(($(date +%s) - t0))
  bname=$name
  [ "$QUICK" = 0 ] || [ "$name" != test ] || bname=test-quick
  note "$bname" "$secs"
  echo "== $name: $secs s"
  return $rc
}

build() { # build-dir, extra cmake args...
  dir=$1
  shift
  cmake -S . -B "$dir" "$@" >/dev/null && cmake --build "$dir" -j "$JOBS"
}

# the fuzz targets alone, with clang and libFuzzer
build_fuzzers() {
  cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DUNICO_FUZZ=ON \
    -DUNICO_FUZZ_SECONDS="${UNICO_FUZZ_SECONDS:-25}" >/dev/null &&
    cmake --build build-fuzz -j "$JOBS" --target fuzzers
}

# run the tests of build-dir (extra ctest arguments after it); then what
# was skipped, even when some failed
run_tests() {
  dir=$1
  shift
  junit="$(pwd)/$dir/ctest-junit.xml"
  rm -f "$junit"
  rc=0
  ctest --test-dir "$dir" -j "$TEST_JOBS" --output-on-failure --timeout 1500 \
    --output-junit "$junit" --test-output-size-passed 4000000 "$@" || rc=$?
  python3 scripts/ctest_summary.py "$dir" "$junit" || rc=1
  return $rc
}

echo "== build and test (RelWithDebInfo)"
phase build build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [ "$QUICK" = 1 ]; then
  phase test run_tests build -LE slow
else
  phase test run_tests build
fi
if [ "$QUICK" = 0 ]; then
  echo "== build and test with -fsanitize=address,undefined"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  phase "sanitizer build" build build-asan -DCMAKE_BUILD_TYPE=Debug -DUNICO_SANITIZE=ON
  # (the Promela models run spin, not the library: once is enough)
  phase "sanitizer test" run_tests build-asan -LE model
  unset ASAN_OPTIONS UBSAN_OPTIONS
  echo "== mutation check (docs/mutants.md)"
  phase mutants python3 scripts/mutants.py
  echo "== fuzz (libFuzzer with -fsanitize=address,undefined, ${UNICO_FUZZ_SECONDS:-25}s per target)"
  phase "fuzz build" build_fuzzers
  # (each target runs for a fixed time: two at once halve the phase)
  phase fuzz ctest --test-dir build-fuzz -j "$TEST_JOBS" -L fuzz --output-on-failure --timeout 1500
fi
total=$(($(date +%s) - T_START))
if [ "$QUICK" = 1 ]; then note total-quick "$total"; else note total "$total"; fi
table
if [ -n "$OVER" ]; then
  echo "== FAIL: past its budget:$OVER (budgets in scripts/test.sh; a phase that grew needs a faster test or a budget raised with a reason)"
  exit 1
fi
echo "== all tests passed"
