#!/bin/sh
# lean_link.sh LIBUNICO_SO LIBUNICO_A WITH_DYNAMODB WITH_CASSANDRA
#               [UNICO_BIN WITH_OTLP] - what
# the library links and holds follows the build's store options
# (-DUNICO_WITH_DYNAMODB, -DUNICO_WITH_CASSANDRA; CMakeLists.txt): a store
# left out leaves no code behind (no uddb_/uaws_/usig_ functions for
# DynamoDB, no ucql_/ucass_ functions for Cassandra) and its client
# library unlinked (libcurl, libssl); a store built in has both. So the
# same check, run in the default build, shows it can see what it looks for.
# With UNICO_BIN: the unico program links libcurl exactly when the DynamoDB
# store or unico serve's OTLP exporter (-DUNICO_WITH_OTLP) is built in.
set -u
so=$1 a=$2
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
defined=$(nm "$a" 2>/dev/null | awk '$2 == "T" || $2 == "t" {print $3}')
[ -n "$defined" ] || bad "nm found no function in $a"
# check STORE ON/OFF LIBRARY SYMBOL-REGEX
check() {
  n=$(echo "$defined" | grep -cE "$4")
  case $needed in *"$3"*) linked=1 ;; *) linked=0 ;; esac
  if [ "$2" = ON ] || [ "$2" = 1 ]; then
    [ "$n" -gt 0 ] || bad "$1 built in, but no function matching $4 in $a"
    [ "$linked" = 1 ] || bad "$1 built in, but $so does not link $3"
    echo "ok: $1 built in: $n functions matching $4, $3 linked"
  else
    [ "$n" -eq 0 ] || bad "$1 left out, but $a defines $(echo "$defined" | grep -E "$4" | head -3 | tr '\n' ' ')"
    [ "$linked" = 0 ] || bad "$1 left out, but $so links $3"
    echo "ok: $1 left out: no function matching $4, no $3"
  fi
}
check dynamodb "$3" libcurl '^(uddb_|uaws_|usig_|ustore_dynamodbs?_open)'
check cassandra "$4" libssl '^(ucql_|ucass_|ustore_cassandras?_open)'
echo "NEEDED: $(echo $needed)"
if [ $# -ge 6 ]; then
  bin_needed=$(readelf -d "$5" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  [ -n "$bin_needed" ] || bad "readelf found no NEEDED entry in $5"
  want=0
  for o in "$3" "$6"; do [ "$o" = ON ] || [ "$o" = 1 ] && want=1; done
  case $bin_needed in *libcurl*) has=1 ;; *) has=0 ;; esac
  if [ "$has" != "$want" ]; then
    bad "unico program: libcurl linked=$has, expected $want (dynamodb $3, otlp $6)"
  else
    echo "ok: unico program: libcurl linked=$has (dynamodb $3, otlp $6)"
  fi
fi
[ "$fails" -eq 0 ] || exit 1
