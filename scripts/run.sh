#!/bin/sh
# Build unico and run the main job on the embedded (LMDB) store: the HTTP
# service with the example schema (examples/schema.cql), on
# http://127.0.0.1:8080 until Ctrl-C (SIGINT) or SIGTERM. Installs what is
# missing of what building and serving need (scripts/deps.sh --serve: no
# test toolchain, no Java, spin or clang). Try it with the curl session of
# the README.
#
# Usage: scripts/run.sh [--tour | --dry-run] [unico serve options...]
#   --tour     run the CLI tour (examples/tour.sh) instead of the server
#   --dry-run  print what it would install (scripts/deps.sh --serve
#              --dry-run), build and run, and do none of it
# Environment: UNICO_STORE (default lmdb:./unico-data?wal=on, the embedded
# store in log mode, owned by the server while it runs).
set -eu
cd "$(dirname "$0")/.."
# what it installs (the dry run below prints this very set)
DEPS="scripts/deps.sh --serve"
if [ "${1:-}" = "--dry-run" ]; then
  shift
  sh $DEPS --dry-run
  echo "run: cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo"
  echo "run: cmake --build build --target unico_cli"
  echo "run: build/unico --store ${UNICO_STORE:-lmdb:./unico-data?wal=on} serve --schema examples/schema.cql $*"
  exit 0
fi
sh $DEPS
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" --target unico_cli
if [ "${1:-}" = "--tour" ]; then
  exec sh examples/tour.sh build/unico
fi
exec build/unico --store "${UNICO_STORE:-lmdb:./unico-data?wal=on}" serve \
  --schema examples/schema.cql "$@"
