#!/bin/sh
# openapi_lint.sh - docs/openapi.json, the description of `unico serve`'s
# HTTP API, under a real OpenAPI linter: redocly lint, from the npm package
# @redocly/cli at the version pinned here, installed by scripts/deps.sh
# (through `install` below) into a directory outside the source tree.
#
#   openapi_lint.sh install                    # scripts/deps.sh runs it (as root)
#   openapi_lint.sh lint SRCDIR WORKDIR VERSION  # the test openapi_lint
#
# `lint` runs redocly lint with SRCDIR/redocly.yaml (the recommended rules,
# warnings made errors): it must pass with no problem at all. The
# document's info.version must be VERSION (the project's). Then, to show
# the lint can fail, it lints a copy with a dangling reference, which must
# be refused. `install` needs npm and the npm registry, and does nothing
# when the pinned version is there; `lint` never downloads: without the
# installed package, or without node, it fails saying so. The package lives
# in $UNICO_REDOCLY_DIR, default /opt/unico/redocly.
set -eu

PKG_VERSION=2.77.0 # @redocly/cli
DIR=${UNICO_REDOCLY_DIR:-/opt/unico/redocly}
BIN="$DIR/node_modules/.bin/redocly"
# no telemetry, no look for a newer version: the tests reach no network
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1

die() {
  echo "openapi_lint: $*" >&2
  exit 1
}

need() {
  command -v "$1" >/dev/null 2>&1 ||
    die "$1 is not installed, and redocly needs it ($2); run scripts/deps.sh (Debian: apt-get install $3)"
}

installed() {
  pkg="$DIR/node_modules/@redocly/cli/package.json"
  [ -f "$pkg" ] && grep -q "\"version\": \"$PKG_VERSION\"" "$pkg" && [ -x "$BIN" ]
}

install() {
  if installed; then
    echo "openapi_lint: @redocly/cli@$PKG_VERSION is installed in $DIR" >&2
    return 0
  fi
  need npm "to install @redocly/cli" "nodejs npm"
  mkdir -p "$DIR"
  echo "openapi_lint: installing @redocly/cli@$PKG_VERSION into $DIR" >&2
  npm install --prefix "$DIR" --no-audit --no-fund --no-save \
    --loglevel=error "@redocly/cli@$PKG_VERSION" >"$DIR/npm.log" 2>&1 ||
    { cat "$DIR/npm.log" >&2; die "npm install @redocly/cli@$PKG_VERSION failed"; }
  installed || die "npm ran, but @redocly/cli $PKG_VERSION is not in $DIR/node_modules"
}

# redocly_lint FILE: redocly's output in $WORK/lint.out; its exit status
redocly_lint() {
  set +e
  (cd "$SRC" && "$BIN" lint --config "$SRC/redocly.yaml" "$1") >"$WORK/lint.out" 2>&1
  rc=$?
  set -e
  return $rc
}

lint() {
  SRC=$1
  WORK=$2
  want=$3
  need node "redocly is a Node.js program" "nodejs"
  # @redocly/cli 2.77.0 says it needs node 20.19 or newer
  node -e 'const [a, b] = process.versions.node.split(".").map(Number);
           process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' ||
    die "redocly $PKG_VERSION needs Node.js 20.19 or newer; $(command -v node) is $(node --version)"
  need python3 "to read the document's version" "python3"
  installed ||
    die "redocly (npm package @redocly/cli@$PKG_VERSION) is not installed in $DIR; run scripts/deps.sh (or: sh tests/openapi_lint.sh install), or point UNICO_REDOCLY_DIR at an install"
  rm -rf "$WORK"
  mkdir -p "$WORK"
  doc="$SRC/docs/openapi.json"
  fails=0
  if redocly_lint "$doc" && ! grep -Eqi '[0-9]+ (warning|error)s?\b' "$WORK/lint.out"; then
    echo "ok   redocly lint docs/openapi.json: clean"
  else
    grep -v '[║╔╚]' "$WORK/lint.out"
    echo "FAIL: redocly lint docs/openapi.json"
    fails=$((fails + 1))
  fi
  got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["info"]["version"])' "$doc")
  if [ "$got" = "$want" ]; then
    echo "ok   info.version is $want"
  else
    echo "FAIL: docs/openapi.json says info.version $got; the project is $want (include/unico.h)"
    fails=$((fails + 1))
  fi
  # the lint can fail: a reference to a schema that is not there
  sed '0,/"#\/components\/schemas\/Error"/s//"#\/components\/schemas\/NoSuchSchema"/' "$doc" >"$WORK/broken.json"
  if cmp -s "$doc" "$WORK/broken.json"; then
    echo "FAIL: could not break a copy of docs/openapi.json (no reference to #/components/schemas/Error)"
    fails=$((fails + 1))
  elif redocly_lint "$WORK/broken.json"; then
    grep -v '[║╔╚]' "$WORK/lint.out"
    echo "FAIL: redocly lint passed a document with a dangling reference"
    fails=$((fails + 1))
  else
    echo "ok   a dangling reference fails the lint"
  fi
  [ $fails = 0 ] && echo "all passed" || echo "$fails failed"
  [ $fails = 0 ]
}

case "${1:-}" in
install)
  install
  ;;
lint)
  [ $# -eq 4 ] || die "usage: $0 lint SRCDIR WORKDIR VERSION"
  lint "$2" "$3" "$4"
  ;;
*)
  die "usage: $0 install | lint SRCDIR WORKDIR VERSION"
  ;;
esac
