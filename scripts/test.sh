#!/bin/sh
# Build unico and run every test: once in a normal build, once built with
# AddressSanitizer and UndefinedBehaviorSanitizer (all but the Promela
# models, label model, which check spin's models, not the library), once
# with ThreadSanitizer (the tests labelled tsan: those that run threads), once
# built without the DynamoDB and Cassandra stores (build-lean: a subset,
# see lean_build_and_test); then the mutation check
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
# against its budget (scripts/phases.sh); a phase past its budget fails
# the run.
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
# the phases, their budgets and the time table (scripts/phases.sh)
. scripts/phases.sh
trap table EXIT

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

# The library without the stores that need libcurl or the CQL client
# (-DUNICO_WITH_DYNAMODB=OFF -DUNICO_WITH_CASSANDRA=OFF, and unico serve
# without its OTLP exporter, -DUNICO_WITH_OTLP=OFF): it builds, links
# neither, nor does the unico program link libcurl (the test lean_link),
# and passes its tests, but for the HTTP
# service's (label http: they open DynamoDB and Cassandra URLs to check
# what unico serve shows of them), the Python package's (one opens a
# DynamoDB endpoint), the spin models (no library code) and the slow ones.
lean_build_and_test() {
  build build-lean -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DUNICO_WITH_DYNAMODB=OFF -DUNICO_WITH_CASSANDRA=OFF -DUNICO_WITH_OTLP=OFF &&
    run_tests build-lean -LE 'slow|model|http' -E '^python_'
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
  # ThreadSanitizer: the tests that run threads (label tsan,
  # tests/CMakeLists.txt); a report fails its test (halt_on_error). No
  # suppressions: a race in unico's code is a bug to fix.
  echo "== build and test with -fsanitize=thread (ctest -L tsan)"
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  phase "tsan build" build build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUNICO_TSAN=ON
  phase "tsan test" run_tests build-tsan -L tsan
  unset TSAN_OPTIONS
  echo "== build and test without DynamoDB and Cassandra (build-lean)"
  phase lean lean_build_and_test
  echo "== mutation check (docs/mutants.md)"
  phase mutants python3 scripts/mutants.py
  echo "== fuzz (libFuzzer with -fsanitize=address,undefined, ${UNICO_FUZZ_SECONDS:-25}s per target)"
  phase "fuzz build" build_fuzzers
  # (each target runs for a fixed time: two at once halve the phase)
  phase fuzz ctest --test-dir build-fuzz -j "$TEST_JOBS" -L fuzz --output-on-failure --timeout 1500
fi
finish || exit 1
echo "== all tests passed"
