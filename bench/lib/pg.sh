# bench/lib/pg.sh - start and stop a private, throw-away PostgreSQL 15 server
# for benchmarks and load tests. POSIX sh; source it, then:
#
#   . bench/lib/pg.sh
#   pg_start "$PWD/build-bench/pg"      # initdb + start; exports the variables below
#   trap 'pg_stop "$PWD/build-bench/pg"' EXIT INT TERM   # the caller owns the trap
#   psql "$PG_CONNINFO" -c 'select 1'
#   pg_stop "$PWD/build-bench/pg"       # stop the server and delete DIR
#
# pg_start DIR exports:
#   PGHOST       the private unix-socket directory (no TCP: listen_addresses='')
#   PGPORT       the port (names the socket file; PG_PORT overrides, default 54329)
#   PGUSER       the superuser (unico), PGDATABASE (unico_bench)
#   PG_PID       the postmaster's pid (its children are the backends)
#   PG_CONNINFO  "host=... port=... user=... dbname=..." for libpq
#   PG_DATA      the data directory (DIR/data); the server log is DIR/server.log
# Settings: fsync=on, synchronous_commit=on, max_connections=200 (or
# PG_MAX_CONNECTIONS),
# shared_buffers=256MB, trust authentication on the private socket only.
#
# Running as root: PostgreSQL refuses to, so a system user (PG_OS_USER,
# default "unicobench") is created if missing and initdb/pg_ctl run as it
# through runuser (or su); DIR is made owned by it. Every parent of DIR must
# be searchable by that user (a dir under the repository is).
# pg_stop DIR stops the server (fast shutdown) and removes DIR, unless
# PG_KEEP=1 (then the data and log stay for inspection).
# Binaries: PG_BIN (default /usr/lib/postgresql/15/bin).

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_OS_USER=${PG_OS_USER:-unicobench}

# Run a command as the server's OS user (itself when not root).
_pg_as() {
  if [ "$(id -u)" -eq 0 ]; then
    if command -v runuser >/dev/null 2>&1; then
      runuser -u "$PG_OS_USER" -- "$@"
    else
      # su needs one command string; quote each argument.
      _pg_cmd=""
      for _a in "$@"; do
        _pg_cmd="$_pg_cmd '$(printf '%s' "$_a" | sed "s/'/'\\\\''/g")'"
      done
      su -s /bin/sh "$PG_OS_USER" -c "$_pg_cmd"
    fi
  else
    "$@"
  fi
}

pg_start() {
  [ -n "${1:-}" ] || { echo "pg_start: usage: pg_start DIR" >&2; return 1; }
  [ -x "$PG_BIN/initdb" ] || { echo "pg_start: no PostgreSQL at $PG_BIN (sh scripts/deps.sh --bench)" >&2; return 1; }
  mkdir -p "$1" || return 1
  _pg_dir=$(cd "$1" && pwd) || return 1
  if [ "$(id -u)" -eq 0 ]; then
    if ! id "$PG_OS_USER" >/dev/null 2>&1; then
      useradd --system --no-create-home --home-dir /nonexistent \
        --shell /bin/sh "$PG_OS_USER" 2>/dev/null || id "$PG_OS_USER" >/dev/null 2>&1 ||
        { echo "pg_start: cannot create user $PG_OS_USER" >&2; return 1; }
    fi
    chown -R "$PG_OS_USER" "$_pg_dir" || return 1
    if ! _pg_as test -w "$_pg_dir"; then
      echo "pg_start: user $PG_OS_USER cannot reach $_pg_dir (a parent directory is not searchable)" >&2
      return 1
    fi
  fi
  # A unix socket path is limited to ~107 bytes: use DIR/sock when short
  # enough, else a private directory under /tmp.
  if [ ${#_pg_dir} -lt 80 ]; then
    _pg_sock="$_pg_dir/sock"
    mkdir -p "$_pg_sock" || return 1
  else
    _pg_sock=$(mktemp -d /tmp/unico-pg.XXXXXX) || return 1
  fi
  echo "$_pg_sock" > "$_pg_dir/sockdir"
  [ "$(id -u)" -eq 0 ] && chown "$PG_OS_USER" "$_pg_sock" "$_pg_dir/sockdir"
  _pg_port=${PG_PORT:-54329}
  if [ ! -f "$_pg_dir/data/PG_VERSION" ]; then
    _pg_as "$PG_BIN/initdb" -D "$_pg_dir/data" -U unico --auth=trust \
      --encoding=UTF8 --locale=C.UTF-8 >"$_pg_dir/initdb.log" 2>&1 || {
      echo "pg_start: initdb failed; see $_pg_dir/initdb.log:" >&2
      tail -5 "$_pg_dir/initdb.log" >&2
      return 1
    }
    cat >>"$_pg_dir/data/postgresql.conf" <<CONF
# bench/lib/pg.sh
listen_addresses = ''
unix_socket_directories = '$_pg_sock'
port = $_pg_port
fsync = on
synchronous_commit = on
full_page_writes = on
max_connections = ${PG_MAX_CONNECTIONS:-200}
shared_buffers = 256MB
dynamic_shared_memory_type = posix
logging_collector = off
CONF
  fi
  _pg_as "$PG_BIN/pg_ctl" -D "$_pg_dir/data" -l "$_pg_dir/server.log" -w -t 60 \
    -o "-k $_pg_sock -p $_pg_port" start >/dev/null || {
    echo "pg_start: server did not start; see $_pg_dir/server.log:" >&2
    tail -5 "$_pg_dir/server.log" >&2
    return 1
  }
  PG_PID=$(head -1 "$_pg_dir/data/postmaster.pid")
  PGHOST=$_pg_sock
  PGPORT=$_pg_port
  PGUSER=unico
  PGDATABASE=unico_bench
  PG_DATA=$_pg_dir/data
  PG_CONNINFO="host=$PGHOST port=$PGPORT user=$PGUSER dbname=$PGDATABASE"
  export PG_PID PGHOST PGPORT PGUSER PGDATABASE PG_DATA PG_CONNINFO
  if ! "$PG_BIN/psql" -X -q -d "host=$PGHOST port=$PGPORT user=$PGUSER dbname=postgres" \
      -tAc "SELECT 1 FROM pg_database WHERE datname='unico_bench'" | grep -q 1; then
    "$PG_BIN/psql" -X -q -d "host=$PGHOST port=$PGPORT user=$PGUSER dbname=postgres" \
      -c "CREATE DATABASE unico_bench" >/dev/null || return 1
  fi
  return 0
}

pg_stop() {
  [ -n "${1:-}" ] || { echo "pg_stop: usage: pg_stop DIR" >&2; return 1; }
  [ -d "$1" ] || return 0
  _pg_dir=$(cd "$1" && pwd) || return 1
  if [ -f "$_pg_dir/data/postmaster.pid" ]; then
    _pg_as "$PG_BIN/pg_ctl" -D "$_pg_dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
      echo "pg_stop: pg_ctl stop failed (see $_pg_dir/server.log)" >&2
  fi
  if [ "${PG_KEEP:-0}" != 1 ]; then
    if [ -f "$_pg_dir/sockdir" ]; then
      _pg_sock=$(cat "$_pg_dir/sockdir")
      case "$_pg_sock" in /tmp/unico-pg.*) rm -rf "$_pg_sock" ;; esac
    fi
    rm -rf "$_pg_dir"
  fi
  return 0
}
