#!/bin/sh
# bench_kill.sh - SIGKILL in the middle of a benchmark run, on the plain and
# on the log-mode LMDB store, and on the log mode through asynchronous writes
# (unico_submit, --async: answered from the store's syncing thread once
# durable). unico-bench appends the id of every insert it counted as
# acknowledged to a file, right after the answer; after the kill,
# `unico-bench verify` reopens the store (replaying the log in log mode),
# looks up every one of those ids, and runs unico_check (invariants 1, 2 and
# 5: no value with two owners, claims and records agree).
# Usage: bench_kill.sh UNICO_BENCH WORKDIR
set -u
BENCH=$1
DIR=$2
rm -rf "$DIR"
mkdir -p "$DIR"
fail=0
for mode in plain log async; do
  q=""
  how="--threads 8"
  # log mode with a small table: checkpoints run while the kill lands
  [ "$mode" = plain ] || q="?wal=on&wal_size=1MiB"
  [ "$mode" = async ] && how="--threads 2 --async 64"
  store="lmdb:$DIR/$mode$q"
  # shellcheck disable=SC2086 # $how is two options
  "$BENCH" --engine unico --workload signup $how --duration 60 \
    --warmup 0 --no-check --store "$store" --ack-log "$DIR/$mode.ack" \
    >"$DIR/$mode.out" 2>&1 &
  pid=$!
  sleep 3
  # the kill must land in the middle of the run: a benchmark that already
  # ended (an error, a crash) was not killed, and proves nothing here
  if ! kill -9 "$pid" 2>/dev/null; then
    wait "$pid"
    echo "FAIL $mode: the benchmark ended (status $?) before the kill"
    cat "$DIR/$mode.out"
    fail=1
    continue
  fi
  wait "$pid" 2>/dev/null
  n=$(wc -l <"$DIR/$mode.ack" | tr -d ' ')
  if [ "$n" -lt 100 ]; then
    echo "FAIL $mode: only $n writes acknowledged before the kill"
    cat "$DIR/$mode.out"
    fail=1
    continue
  fi
  if "$BENCH" verify --store "$store" --ack-log "$DIR/$mode.ack" >"$DIR/$mode.verify" 2>&1; then
    echo "ok $mode: killed after $n acknowledged inserts; all present, check passed"
    cat "$DIR/$mode.verify"
  else
    echo "FAIL $mode: verify after the kill"
    cat "$DIR/$mode.verify"
    fail=1
  fi
done
[ "$fail" = 0 ] && rm -rf "$DIR"
exit "$fail"
