#!/bin/sh
# bench/http/load.sh - the signup workload over HTTP: wrk with
# bench/http/signup.lua against `unico serve` on a fresh embedded store, at a
# few connection counts (the store in log mode, unico serve's default); beside it, the same workload with no HTTP in
# between (unico-bench, in process) on unico and on PostgreSQL 15 as the
# baseline. Appends to bench/results/http.csv and prints a markdown table.
# CPU µs/op: for unico serve, the server process's CPU (user + system, from
# /proc; wrk's not counted) over the run per request; in process, the
# benchmark process's per operation; for PostgreSQL, the client's and the
# server processes' per operation (unico-bench's figure).
#
# Usage: sh bench/http/load.sh
# Environment:
#   HTTP_CLIENTS     connection (and bench thread) counts (default 1,4,32,64)
#   HTTP_DURATION    seconds per point (default 5)
#   HTTP_ENGINES     which rows: "null http https http-loop http-delay http-leader
#                    unico postgres"
#                    (default all; http: unico serve's defaults, https: the
#                    same over HTTPS (--tls-cert, a P-256 certificate made by
#                    tests/support/tls_certs.sh; wrk resumes no TLS session,
#                    so each connection makes one handshake), http-loop:
#                    --event-loop 2; http-delay: the defaults with the store
#                    option sync_delay_us=1000 (docs/cli.md); http-leader:
#                    the defaults on a store with log mode's batch leader
#                    (writers=leader; parallel writers are the default);
#                    null: wrk against unico-null-server, an HTTP server
#                    that answers 201 and does nothing else: the ceiling)
#   HTTP_SERVE_ARGS  extra options for unico serve (e.g. "--event-loop 32")
#   HTTP_NO_BUILD=1  use build-bench/ as it is
# Needs wrk; the baselines need build-bench/bench/unico-bench (bench/run.sh
# builds it) and, for PostgreSQL, bench/lib/pg.sh. A missing baseline is
# skipped with a note, never faked.
# Exit status: 0 when every point ran, no request got an unexpected status,
# every server exited 0 after SIGTERM and `unico check` found the store
# clean; 1 otherwise.
set -eu

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
CLIENTS=${HTTP_CLIENTS:-1,4,32,64}
DURATION=${HTTP_DURATION:-5}
ENGINES=${HTTP_ENGINES:-null http https http-loop http-delay http-leader unico postgres}
BUILD=$ROOT/build-bench
WORK=$BUILD/http
RESULTS=$ROOT/bench/results
CSV=$RESULTS/http.csv
UNICO=$BUILD/unico
BENCH=$BUILD/bench/unico-bench
NULLSRV=$BUILD/bench/unico-null-server
SCHEMA=$ROOT/bench/http/schema.cql
LUA=$ROOT/bench/http/signup.lua
DATE=$(date -u '+%Y-%m-%dT%H:%M:%SZ')
status=0

log() { echo "load.sh: $*" >&2; }
has() { case " $ENGINES " in *" $1 "*) return 0 ;; esac; return 1; }

command -v wrk >/dev/null 2>&1 || { log "wrk is not installed (apt-get install wrk)"; exit 1; }
if [ "${HTTP_NO_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  targets="--target unico_cli"
  if has unico || has postgres; then targets="$targets --target unico_bench"; fi
  if has null; then targets="$targets --target null_server"; fi
  # shellcheck disable=SC2086
  cmake --build "$BUILD" -j"$(nproc)" $targets >/dev/null
fi

rm -rf "$WORK"
mkdir -p "$WORK" "$RESULTS"
PG_STARTED=0
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  if [ "$PG_STARTED" = 1 ]; then pg_stop "$WORK/pg" || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

HEADER="date,engine,transport,workload,clients,duration_s,ops_per_s,p50_us,p99_us,created,conflicts,unexpected,cpu_us_per_op"
if [ ! -f "$CSV" ]; then
  echo "$HEADER" >"$CSV"
elif [ "$(head -1 "$CSV")" != "$HEADER" ]; then
  # (rows from before the CPU column have it empty)
  sed -i "1s/.*/$HEADER/" "$CSV"
fi
ROWS=$WORK/rows.csv
: >"$ROWS"
row() { # engine transport clients ops p50 p99 created conflicts unexpected cpu_us_per_op
  echo "$DATE,$1,$2,signup,$3,$DURATION,$4,$5,$6,$7,$8,$9,${10:-}" | tee -a "$CSV" >>"$ROWS"
}
# CPU time (user + system, clock ticks) a process has used so far.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

# 0. The ceiling: wrk against a server that does no work at all.
if has null; then
  if [ -x "$NULLSRV" ]; then
    for c in $(echo "$CLIENTS" | tr ',' ' '); do
      "$NULLSRV" 0 2 >"$WORK/null-$c.out" 2>&1 &
      SERVER_PID=$!
      i=0
      while ! grep -q listening "$WORK/null-$c.out" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
      port=$(sed -n 's/^listening \([0-9]*\)/\1/p' "$WORK/null-$c.out")
      [ -n "$port" ] || { log "unico-null-server did not start"; exit 1; }
      t=2
      [ "$c" -lt 2 ] && t=1
      wrk -t"$t" -c"$c" -d"${DURATION}s" --latency -s "$LUA" "http://127.0.0.1:$port" >"$WORK/null-$c.wrk" 2>&1 || status=1
      kill -TERM "$SERVER_PID"
      wait "$SERVER_PID" || true
      SERVER_PID=
      rps=$(sed -n 's/^Requests\/sec:[[:space:]]*\([0-9.]*\).*/\1/p' "$WORK/null-$c.wrk")
      set -- $(sed -n 's/^latency_us: p50=\([0-9]*\) p90=[0-9]* p99=\([0-9]*\)/\1 \2/p' "$WORK/null-$c.wrk")
      row null "http-wrk (no work)" "$c" "$rps" "${1:-}" "${2:-}" "" "" 0
    done
  else
    log "no $NULLSRV: skipping the null rows"
  fi
fi

# 1. unico serve + wrk, a fresh store per connection count; "http" with
# unico serve's defaults (in log mode an event loop per CPU, at least two,
# whose answers wait for durability on suspended connections), "http-loop"
# with --event-loop 2 (the same on 2 CPUs), "http-delay" the defaults on a
# store with sync_delay_us=1000.
serve_rows() { # a tag, the transport's label, store options, then unico serve's options
  tag=$1 label=$2 query=$3
  shift 3
  opts="$*" # (the loop's "set --" takes over the positional parameters)
  for c in $(echo "$CLIENTS" | tr ',' ' '); do
    dir=$WORK/serve-$tag-$c
    mkdir -p "$dir"
    # shellcheck disable=SC2086
    "$UNICO" serve --store "lmdb:$dir/data?wal=on$query" --listen 127.0.0.1:0 --access-log off \
      --schema "$SCHEMA" $opts ${HTTP_SERVE_ARGS:-} >"$dir/out.txt" 2>"$dir/err.txt" &
    SERVER_PID=$!
    i=0
    while [ ! -s "$dir/out.txt" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    url=$(sed -n 's/.*"listen":"\([^"]*\)".*/\1/p' "$dir/out.txt")
    [ -n "$url" ] || { log "unico serve did not start:"; cat "$dir/err.txt" >&2; exit 1; }
    t=2
    [ "$c" -lt 2 ] && t=1
    # the server's CPU over the run, per request (wrk itself not counted)
    cpu0=$(cpu_ticks "$SERVER_PID")
    wrk -t"$t" -c"$c" -d"${DURATION}s" --latency -s "$LUA" "$url" >"$dir/wrk.txt" 2>&1 || status=1
    cpu1=$(cpu_ticks "$SERVER_PID")
    kill -TERM "$SERVER_PID"
    rc=0
    wait "$SERVER_PID" || rc=$?
    SERVER_PID=
    [ "$rc" = 0 ] || { log "unico serve exited $rc after SIGTERM"; status=1; }
    rps=$(sed -n 's/^Requests\/sec:[[:space:]]*\([0-9.]*\).*/\1/p' "$dir/wrk.txt")
    set -- $(sed -n 's/^statuses: 201=\([0-9]*\) 409=\([0-9]*\) other=\([0-9]*\)/\1 \2 \3/p' "$dir/wrk.txt")
    created=${1:-0} conflicts=${2:-0} other=${3:-?}
    set -- $(sed -n 's/^latency_us: p50=\([0-9]*\) p90=[0-9]* p99=\([0-9]*\)/\1 \2/p' "$dir/wrk.txt")
    p50=${1:-} p99=${2:-}
    nreq=$(sed -n 's/^[[:space:]]*\([0-9]*\) requests in .*/\1/p' "$dir/wrk.txt")
    cpu=$(awk -v a="$cpu0" -v b="$cpu1" -v t="$TICK" -v n="${nreq:-0}" \
      'BEGIN { if (n > 0) printf "%.1f", (b - a) * 1e6 / t / n }')
    if [ -z "$rps" ] || [ "$other" != 0 ]; then
      log "wrk at $c connections: unexpected statuses or no result:"
      cat "$dir/wrk.txt" >&2
      status=1
    fi
    if ! "$UNICO" --store "lmdb:$dir/data?wal=on" check >"$dir/check.json"; then
      log "unico check found the store of $c connections unclean: $(cat "$dir/check.json")"
      status=1
    fi
    row unico-log "$label${HTTP_SERVE_ARGS:+ $HTTP_SERVE_ARGS}" "$c" "$rps" "$p50" "$p99" \
      "$created" "$conflicts" "$other" "$cpu"
    rm -rf "$dir/data"
  done
}
if has http; then serve_rows threads http-wrk ""; fi
if has https; then
  sh "$ROOT/tests/support/tls_certs.sh" "$WORK/certs" >/dev/null 2>&1 ||
    { log "tests/support/tls_certs.sh failed (needs openssl)"; exit 1; }
  serve_rows https https-wrk "" --tls-cert "$WORK/certs/server.pem" --tls-key "$WORK/certs/server.key"
fi
if has http-loop; then serve_rows loop "http-wrk --event-loop 2" "" --event-loop 2; fi
if has http-delay; then serve_rows delay "http-wrk sync_delay_us=1000" "&sync_delay_us=1000"; fi
if has http-leader; then serve_rows leader "http-wrk writers=leader" "&writers=leader"; fi

# unico-bench CSV: engine,workload,threads,ops_per_s,p50_us,p99_us,p999_us,cpu_us_per_op,ops,errors,conflicts,retries,...
bench_rows() { # engine transport csv
  # shellcheck disable=SC2034
  tail -n +2 "$3" | while IFS=, read -r eng wl th ops p50 p99 p999 cpu n errors conflicts retries rest; do
    row "$1" "$2" "$th" "$ops" "$p50" "$p99" "$((n - conflicts))" "$conflicts" "$errors" "$cpu"
  done
}

# 2. the same workload in process, no HTTP: what the server costs.
if has unico; then
  if [ -x "$BENCH" ]; then
    "$BENCH" --engine unico --workload signup --threads "$CLIENTS" --duration "$DURATION" \
      --warmup 1 --store-base "$WORK/bench-unico?wal=on" --label unico-log --csv "$WORK/unico.csv" >"$WORK/unico.log" 2>&1 ||
      { log "unico-bench (unico) failed: $(tail -3 "$WORK/unico.log")"; status=1; }
    [ -f "$WORK/unico.csv" ] && bench_rows unico-log in-process "$WORK/unico.csv"
  else
    log "no $BENCH: skipping the in-process unico row (sh bench/run.sh builds it)"
  fi
fi

# 3. PostgreSQL 15, the same constraints, through libpq from unico-bench.
if has postgres; then
  if [ -x "$BENCH" ] && [ -f "$ROOT/bench/lib/pg.sh" ]; then
    # its own port (names the socket), apart from bench/run.sh's 54329
    PG_PORT=${PG_PORT:-54339}
    # (a connection per client: past 180 clients, more than the default 200)
    maxc=$(echo "$CLIENTS" | tr ',' '\n' | sort -n | tail -1)
    [ "$maxc" -le 180 ] || PG_MAX_CONNECTIONS=$((maxc + 20))
    export PG_PORT PG_MAX_CONNECTIONS
    . "$ROOT/bench/lib/pg.sh"
    if pg_start "$WORK/pg"; then
      PG_STARTED=1
      "$BENCH" --engine postgres --pg "$PG_CONNINFO" --pg-pid "$PG_PID" --workload signup \
        --threads "$CLIENTS" --duration "$DURATION" --warmup 1 --csv "$WORK/pg.csv" \
        >"$WORK/pg.log" 2>&1 || { log "unico-bench (postgres) failed: $(tail -3 "$WORK/pg.log")"; status=1; }
      [ -f "$WORK/pg.csv" ] && bench_rows postgres libpq "$WORK/pg.csv"
      pg_stop "$WORK/pg" || true
      PG_STARTED=0
    else
      log "PostgreSQL did not start: skipping the baseline"
    fi
  else
    log "no unico-bench or bench/lib/pg.sh: skipping the PostgreSQL baseline"
  fi
fi

# 4. The table.
echo
echo "signup, ${DURATION}s per point, $(nproc) CPUs ($DATE)"
echo
echo "| engine | transport | clients | ops/s | p50 µs | p99 µs | created | conflicts (409) | unexpected | CPU µs/op |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
while IFS=, read -r d eng tr wl c dur ops p50 p99 cr cf un cpu; do
  echo "| $eng | $tr | $c | $ops | $p50 | $p99 | $cr | $cf | $un | $cpu |"
done <"$ROWS"
exit $status
