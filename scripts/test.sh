#!/bin/sh
# Build unico and run every test: once in a normal build, once built with
# AddressSanitizer and UndefinedBehaviorSanitizer. Installs what is missing.
# Usage: scripts/test.sh [--quick]   (--quick: skip the sanitizer build)
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
fi
echo "== all tests passed"
