#!/bin/sh
# Build unico and run every test: once in a normal build, once built with
# AddressSanitizer and UndefinedBehaviorSanitizer (all but the Promela
# models, label model, which check spin's models, not the library); then
# the mutation check
# (scripts/mutants.py: every mutant of tests/mutation must be killed) and the
# fuzz targets (tests/fuzz), built with clang and libFuzzer, each for a fixed
# time (UNICO_FUZZ_SECONDS, default 25). Installs what is missing.
# After each ctest run it prints how many tests were skipped, which and why
# (only tests labelled `live` may skip: scripts/ctest_summary.py fails the
# run otherwise), and at the end the time each phase took.
# Usage: scripts/test.sh [--quick]   (--quick: the plain build and its tests
# only)
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh
JOBS=$(nproc 2>/dev/null || echo 2)
TIMES=""

# phase NAME COMMAND...: run it and note how long it took
phase() {
  name=$1
  shift
  t0=$(date +%s)
  rc=0
  "$@" || rc=$?
  secs=$(($(date +%s) - t0))
  TIMES="$TIMES$(printf '  %-16s %4d s' "$name" "$secs")
"
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
  ctest --test-dir "$dir" --output-on-failure --timeout 1500 \
    --output-junit "$junit" --test-output-size-passed 4000000 "$@" || rc=$?
  python3 scripts/ctest_summary.py "$dir" "$junit" || rc=1
  return $rc
}

echo "== build and test (RelWithDebInfo)"
phase build build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
phase test run_tests build
if [ "${1:-}" != "--quick" ]; then
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
  phase fuzz ctest --test-dir build-fuzz -L fuzz --output-on-failure --timeout 1500
fi
echo "== time per phase"
printf '%s' "$TIMES"
echo "== all tests passed"
