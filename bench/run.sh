#!/bin/sh
# bench/run.sh - reproduce every benchmark number with one command:
# installs what is missing, builds Release in build-bench/, starts a private
# PostgreSQL 15, runs the 4 workloads x threads x {unico, unico-log,
# postgres, sqlite} with unico-bench, profiles both unico modes (signup,
# 32 threads) with perf, and writes bench/results/{results.csv,machine.txt,
# throughput.png,table.md,profile.txt,profile-log.txt} and bench/RESULTS.md
# (keeping its "## Analysis" section).
#
# Usage: sh bench/run.sh [--quick]
#   --quick             1 s per point, threads 1,4,32: a short check
# Environment:
#   BENCH_DURATION      measured seconds per point (default 5; --quick: 1)
#   BENCH_WARMUP        warm-up seconds per point (default 1; --quick: 0.3)
#   BENCH_THREADS       thread counts (default 1,2,4,8,16,32,64)
#   BENCH_ENGINES       engines (default "unico unico-log unico-log-leader
#                       unico-async postgres sqlite"); unico-log is unico's
#                       store in log mode (?wal=on: parallel writers),
#                       unico-log-leader the same with the batch leader
#                       (&writers=leader),
#                       unico-async the same through unico_submit
#                       (one thread per core, 256 writes in flight; signup,
#                       email-change and mixed)
#   BENCH_WORKLOADS     workloads (default all)
#   BENCH_NO_DEPS=1     skip scripts/deps.sh
#   BENCH_NO_PERF=1     skip the perf profiles (of the unico modes in
#                       BENCH_ENGINES; min(BENCH_DURATION, 3) s each)
# Exit status: 0 when every point ran and every outcome was as expected.
set -eu

cd "$(dirname "$0")/.."
ROOT=$(pwd)
QUICK=0
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    -h|--help) sed -n '2,22p' "$ROOT/bench/run.sh"; exit 0 ;;
    *) echo "run.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
if [ "$QUICK" = 1 ]; then
  DURATION=${BENCH_DURATION:-1}
  WARMUP=${BENCH_WARMUP:-0.3}
  THREADS=${BENCH_THREADS:-1,4,32}
else
  DURATION=${BENCH_DURATION:-5}
  WARMUP=${BENCH_WARMUP:-1}
  THREADS=${BENCH_THREADS:-1,2,4,8,16,32,64}
fi
ENGINES=${BENCH_ENGINES:-unico unico-log unico-log-leader unico-async postgres sqlite}
# unico-async: one thread per core, each with 256 writes in flight.
ASYNC_THREADS=$(awk -v n="$(nproc)" 'BEGIN { s = "1"; for (t = 2; t <= n; t *= 2) s = s "," t; if (t / 2 != n) s = s "," n; print s }')
# The perf runs are shorter than the points: min(DURATION, 3) seconds.
PERF_DURATION=$(awk -v d="$DURATION" 'BEGIN { print (d + 0 > 3 ? 3 : d + 0) }')
WORKLOADS=${BENCH_WORKLOADS:-all}
COMMAND=$(echo "BENCH_DURATION=$DURATION sh bench/run.sh $*" | sed "s/ *$//")

log() { echo "run.sh: $*" >&2; }

# 1. Dependencies and a Release build of what the run needs.
if [ "${BENCH_NO_DEPS:-0}" != 1 ]; then
  sh scripts/deps.sh --bench
fi
BUILD=$ROOT/build-bench
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target unico_bench fsync_probe
BENCH=$BUILD/bench/unico-bench
PROBE=$BUILD/bench/fsync_probe

# 2. Data on the repository's disk, not a tmpfs: build-bench/run/.
WORK=$BUILD/run
RESULTS=$ROOT/bench/results
. "$ROOT/bench/lib/pg.sh"
cleanup() {
  pg_stop "$WORK/pg" || true
  rm -rf "$WORK/data" "$WORK/data-log" "$WORK/perf-data" "$WORK/perf-data-log" \
    "$WORK/perf-dwarf.data"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
rm -rf "$WORK"
mkdir -p "$WORK" "$RESULTS"
FSTYPE=$(stat -f -c %T "$WORK")
case "$FSTYPE" in
  tmpfs|ramfs)
    log "$WORK is on $FSTYPE: durable-commit numbers would be meaningless; put the repository on a disk"
    exit 2 ;;
esac

# 3. The machine. RUN_DATE also stamps the profiles, so that report.py can
# tell one left over from an earlier run.
RUN_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
{
  echo "date:        $RUN_DATE"
  echo "nproc:       $(nproc)"
  echo "cpu:         $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "memory:      $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "kernel:      $(uname -sr)"
  echo "os:          $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "data dir:    $WORK"
  echo "filesystem:  $FSTYPE; $(df -h --output=source,size "$WORK" | tail -1 | tr -s ' ')"
  echo "mount:       $(findmnt -no FSTYPE,OPTIONS -T "$WORK" 2>/dev/null || echo '?')"
  echo "fsync:       $("$PROBE" "$WORK" 1000)"
  echo "compiler:    $(cc --version | head -1)"
  echo "postgresql:  $("${PG_BIN}/postgres" --version 2>/dev/null || echo 'not found')"
  echo "sqlite:      $(pkg-config --modversion sqlite3 2>/dev/null || echo '?')"
  echo "lmdb:        $(pkg-config --modversion lmdb 2>/dev/null || echo '?')"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min; other work on the machine skews the numbers)"
  echo "run:         duration ${DURATION}s + warmup ${WARMUP}s per point; threads $THREADS; engines $ENGINES"
} > "$RESULTS/machine.txt"
cat "$RESULTS/machine.txt" >&2
echo "$COMMAND" > "$RESULTS/command.txt"

# 4. Every engine, workload and thread count.
rm -f "$RESULTS/results.csv"
: > "$RESULTS/run.log"
status=0
for e in $ENGINES; do
  set -- --workload "$WORKLOADS" --threads "$THREADS" \
    --duration "$DURATION" --warmup "$WARMUP" --csv "$RESULTS/results.csv"
  case "$e" in
    # unico's store in log mode: one owner process, a write-ahead log, checkpoints.
    unico-log) set -- --engine unico --label unico-log --store-base "$WORK/data-log?wal=on" "$@" ;;
    # log mode with its batch leader (docs/architecture.md, "Parallel writers")
    unico-log-leader) set -- --engine unico --label unico-log-leader \
      --store-base "$WORK/data-log-leader?wal=on&writers=leader" "$@" ;;
    # the same through unico_submit, one thread per core (not hot: a race
    # for eight values is not what writes in flight are for)
    unico-async)
      aw=$(echo ",$WORKLOADS," | sed 's/,hot,/,/; s/^,//; s/,$//')
      [ "$WORKLOADS" = all ] && aw=signup,email-change,mixed
      [ -n "$aw" ] || continue
      set -- --engine unico --label unico-async --async 256 \
        --store-base "$WORK/data-async?wal=on" "$@" --workload "$aw" --threads "$ASYNC_THREADS" ;;
    *) set -- --engine "$e" --store-base "$WORK/data" "$@" ;;
  esac
  if [ "$e" = postgres ]; then
    pg_start "$WORK/pg"
    set -- "$@" --pg "$PG_CONNINFO" --pg-pid "$PG_PID"
  fi
  log "engine $e"
  # (each engine starts with what the ones before wrote on disk: the
  # kernel's writeback and the discards of deleted stores otherwise slow
  # its syncs)
  sync
  sleep 3
  { rc=0; "$BENCH" "$@" || rc=$?; echo "$rc" > "$WORK/rc"; } 2>&1 | tee -a "$RESULTS/run.log"
  rc=$(cat "$WORK/rc")
  [ "$rc" = 0 ] || log "engine $e: unico-bench exited with status $rc"
  [ "$rc" = 0 ] || status=1
done
pg_stop "$WORK/pg"

# The library's own CPU per operation: log mode at one thread with
# sync=off (no sync, no waiting), every workload but hot (whose refusals
# are most of it); RESULTS.md's CPU section, kept out of the throughput
# tables.
case " $ENGINES " in *" unico-log "*)
  log "engine unico-log, sync=off, 1 thread"
  { rc=0; "$BENCH" --engine unico --label unico-log-nosync \
      --store-base "$WORK/data-nosync?wal=on&sync=off" --workload signup,email-change,mixed \
      --threads 1 --duration "$DURATION" --warmup "$WARMUP" --csv "$RESULTS/results.csv" ||
      rc=$?; echo "$rc" > "$WORK/rc"; } 2>&1 | tee -a "$RESULTS/run.log"
  [ "$(cat "$WORK/rc")" = 0 ] || { log "unico-log sync=off: unico-bench failed"; status=1; }
  # the same with typed values instead of JSON text (unico_insert_values)
  log "engine unico-log, sync=off, 1 thread, typed values"
  { rc=0; "$BENCH" --engine unico --label unico-log-nosync-typed --typed \
      --store-base "$WORK/data-nosync?wal=on&sync=off" --workload signup,email-change,mixed \
      --threads 1 --duration "$DURATION" --warmup "$WARMUP" --csv "$RESULTS/results.csv" ||
      rc=$?; echo "$rc" > "$WORK/rc"; } 2>&1 | tee -a "$RESULTS/run.log"
  [ "$(cat "$WORK/rc")" = 0 ] || { log "unico-log sync=off typed: unico-bench failed"; status=1; } ;;
esac

# 5. Where unico spends its time: signup at 32 threads (without the
# unico_check that ends each point), for each unico mode in $ENGINES:
# plain unico into profile.txt (+ profile-callgraph.txt), unico-log into
# profile-log.txt (+ profile-log-callgraph.txt). Two recordings per mode:
# the self-time profile as asked (-g, frame pointers), and one with DWARF
# call graphs for the inclusive time per function (the Release build has no
# frame pointers). Each recording runs PERF_DURATION seconds.
strip_cols() { sed 's/[[:space:]]*-[[:space:]]*-[[:space:]]*$//'; }
# profile_mode LABEL STORE_BASE OUT_TXT OUT_CALLGRAPH
profile_mode() {
  pm_label=$1 pm_base=$2 pm_out=$3 pm_cg=$4
  log "perf profile: $pm_label signup, 32 threads, ${PERF_DURATION}s"
  pm_opt=""
  [ "$pm_label" = unico ] || pm_opt=" --label $pm_label"
  PROF="--engine unico$pm_opt --workload signup --threads 32 --duration $PERF_DURATION --warmup $WARMUP --no-check"
  pm_data=$WORK/perf-$pm_label.data   # kept in build-bench/run/ for perf report
  # shellcheck disable=SC2086
  if perf record -F 999 -g -e cpu-clock -o "$pm_data" -- \
      "$BENCH" $PROF --store-base "$pm_base" > "$WORK/perf-run.txt" 2>&1 &&
     perf record -F 499 --call-graph dwarf,16384 -e cpu-clock -o "$WORK/perf-dwarf.data" -- \
      "$BENCH" $PROF --store-base "$pm_base" > "$WORK/perf-run2.txt" 2>&1; then
    {
      echo "# unico-bench $PROF --store-base '$(echo "$pm_base" | sed "s|^$ROOT/||")'"
      echo "# run: $RUN_DATE"
      grep -v '^\[ perf' "$WORK/perf-run.txt" || true
      echo
      echo "# Top symbols by self time: perf record -F 999 -g -e cpu-clock;"
      echo "# perf report --stdio --no-children --sort dso,symbol"
      perf report -i "$pm_data" --stdio --no-children -g none --sort dso,symbol \
        --percent-limit 0.2 2>/dev/null | grep -v '^#' | grep -v '^[[:space:]]*$' |
        strip_cols | head -25
      echo
      echo "# By shared object (libunico is linked statically into unico-bench)"
      perf report -i "$pm_data" --stdio --no-children -g none --sort dso \
        2>/dev/null | grep -v '^#' | grep -v '^[[:space:]]*$' | head -10
      echo
      echo "# Inclusive time (children) per function, user space: a second run with"
      echo "# perf record -F 499 --call-graph dwarf; perf report --children --sort symbol"
      echo "#  children     self"
      perf report -i "$WORK/perf-dwarf.data" --stdio --children -g none --sort symbol \
        --percent-limit 1.5 2>/dev/null | grep -v '^#' | grep -v '^[[:space:]]*$' |
        grep '\[\.\]' | strip_cols | head -40
    } > "$pm_out"
    # Callers, for a closer look at the hottest paths.
    perf report -i "$WORK/perf-dwarf.data" --stdio --no-children -g caller,0.5,callee \
      --percent-limit 2 2>/dev/null | head -600 > "$pm_cg" || true
  else
    log "perf record failed for $pm_label (see $WORK/perf-run*.txt); no profile"
    tail -5 "$WORK/perf-run.txt" "$WORK/perf-run2.txt" >&2 2>/dev/null || true
  fi
  rm -f "$WORK/perf-dwarf.data"
}
if [ "${BENCH_NO_PERF:-0}" != 1 ] && command -v perf >/dev/null 2>&1; then
  case " $ENGINES " in
    *" unico "*)
      profile_mode unico "$WORK/perf-data" \
        "$RESULTS/profile.txt" "$RESULTS/profile-callgraph.txt" ;;
  esac
  case " $ENGINES " in
    *" unico-log "*)
      profile_mode unico-log "$WORK/perf-data-log?wal=on" \
        "$RESULTS/profile-log.txt" "$RESULTS/profile-log-callgraph.txt" ;;
  esac
fi

# 6. Table, plot and RESULTS.md.
python3 "$ROOT/bench/report.py" --results "$RESULTS" --out "$ROOT/bench/RESULTS.md" \
  --command "$COMMAND"
if [ "$status" != 0 ]; then
  log "FAILED: some point did not run or had unexpected outcomes (see bench/results/run.log)"
fi
exit "$status"
