#!/bin/sh
# Build unico and run every test: once in a normal build, once built with
# AddressSanitizer and UndefinedBehaviorSanitizer; then the fuzz targets
# (tests/fuzz), built with clang and libFuzzer, each for a fixed time
# (UNICO_FUZZ_SECONDS, default 25). Installs what is missing.
# Usage: scripts/test.sh [--quick]   (--quick: skip the sanitizer build and
# the fuzzing)
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh
JOBS=$(nproc 2>/dev/null || echo 2)

run_suite() { # build-dir, extra cmake args...
  dir=$1
  shift
  cmake -S . -B "$dir" "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
  ctest --test-dir "$dir" --output-on-failure --timeout 1500
}

echo "== build and test (RelWithDebInfo)"
run_suite build -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [ "${1:-}" != "--quick" ]; then
  echo "== build and test with -fsanitize=address,undefined"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DUNICO_SANITIZE=ON
  unset ASAN_OPTIONS UBSAN_OPTIONS
  echo "== fuzz (libFuzzer with -fsanitize=address,undefined, ${UNICO_FUZZ_SECONDS:-25}s per target)"
  t0=$(date +%s)
  cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DUNICO_FUZZ=ON \
    -DUNICO_FUZZ_SECONDS="${UNICO_FUZZ_SECONDS:-25}" >/dev/null
  cmake --build build-fuzz -j "$JOBS" --target fuzzers
  ctest --test-dir build-fuzz -L fuzz --output-on-failure --timeout 1500
  echo "== fuzz: $(($(date +%s) - t0))s"
fi
echo "== all tests passed"
