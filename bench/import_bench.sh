#!/bin/sh
# import_bench.sh - measure `unico import` of 1,000,000 users records (id
# primary key, email unique casefold, phone unique, username) into a fresh
# store, in plain mode (lmdb:DIR) and in log mode (lmdb:DIR?wal=on), with a
# Release build in build-release/. Prints, per mode, the import's seconds
# and records/s (from its summary), the wall time of the command, the store
# size, and `unico check`'s record count (must be N).
#
#   sh bench/import_bench.sh
#   IMPORT_N=100000 IMPORT_MODES=log sh bench/import_bench.sh
#
# Knobs: IMPORT_N (records), IMPORT_THREADS (a list; "16 64": the
# default of the command, and more concurrency), IMPORT_BATCH (4096),
# IMPORT_MODES ("plain log"), IMPORT_DIR (build-release/import-bench: on the
# repository's disk, as a tmpfs would not measure syncs).
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${IMPORT_N:-1000000}
THREADS=${IMPORT_THREADS:-16 64}
BATCH=${IMPORT_BATCH:-4096}
MODES=${IMPORT_MODES:-plain log}
WORK=${IMPORT_DIR:-$ROOT/build-release/import-bench}

cmake -S "$ROOT" -B "$ROOT/build-release" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$ROOT/build-release" -j2 --target unico_cli >/dev/null
UNICO=$ROOT/build-release/unico
mkdir -p "$WORK"

cat >"$WORK/schema.cql" <<'EOF'
CREATE TABLE users (
  id       text PRIMARY KEY,
  username text,
  email    text,
  phone    text,
  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,
  UNIQUE (phone)
);
EOF

DATA=$WORK/users-$N.jsonl
if [ ! -s "$DATA" ]; then
  python3 - "$N" "$DATA" <<'EOF'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as f:
    for i in range(n):
        f.write('{"id":"user-%08d","username":"user%d","email":"User%d@Example.com",'
                '"phone":"+1-555-%08d"}\n' % (i, i, i, i))
EOF
fi

now() { date +%s.%N; }
field() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])[sys.argv[1]])' "$1"; }

echo "unico import: $N records ($(du -h "$DATA" | cut -f1) of JSONL), threads $THREADS, batch $BATCH"
echo "command: unico --store URL import users $DATA --threads T --batch $BATCH --progress none"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -sr)"
echo
echo "| mode | seconds | records/s | wall s | threads | batch | store size | check records |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for mode in $MODES; do
  for threads in $THREADS; do
    dir=$WORK/store-$mode
    rm -rf "$dir"
    case $mode in
    plain) url="lmdb:$dir" ;;
    log) url="lmdb:$dir?wal=on" ;;
    *) echo "unknown mode $mode (plain or log)" >&2; exit 2 ;;
    esac
    "$UNICO" --store "$url" schema apply "$WORK/schema.cql" >/dev/null
    t0=$(now)
    code=0
    "$UNICO" --store "$url" import users "$DATA" --threads "$threads" --batch "$BATCH" \
      --progress none >"$WORK/import-$mode.out" 2>"$WORK/import-$mode.err" || code=$?
    t1=$(now)
    if [ "$code" -ne 0 ]; then
      echo "import ($mode) exited $code:" >&2
      tail -3 "$WORK/import-$mode.out" "$WORK/import-$mode.err" >&2
      exit 1
    fi
    secs=$(field seconds <"$WORK/import-$mode.out")
    rate=$(field records_per_second <"$WORK/import-$mode.out")
    wall=$(python3 -c "print('%.1f' % ($t1 - $t0))")
    size=$(du -sh "$dir" | cut -f1)
    records=$("$UNICO" --store "$url" check | field records)
    echo "| $mode | $secs | $rate | $wall | $threads | $BATCH | $size | $records |"
    if [ "$records" -ne "$N" ]; then
      echo "check counts $records records, expected $N" >&2
      exit 1
    fi
  done
done
