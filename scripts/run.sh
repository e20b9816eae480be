#!/bin/sh
# Build unico and run the main job on the embedded (LMDB) store: the tour of
# examples/tour.sh. Installs what is missing.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" --target unico_cli
exec sh examples/tour.sh build/unico
