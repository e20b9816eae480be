# spin_lib.sh - what tests/spin_model.sh and tests/spin_parallel_commit.sh
# share, sourced by both after setting $here (tests/, their folder):
#   spin_setup MODEL TMPNAME
# checks that spin and a C compiler are there (exit 1 when not: scripts/
# deps.sh installs spin, so its absence is a broken setup) and that
# model/MODEL exists, then works in a fresh temporary folder (removed on
# exit) holding a copy of the model ($pml); then
#   verify NAME EXPECT SPIN-DEFINES...
# runs pan on one configuration (PANCC, PANRUN set by the caller), prints
# one line, and sets fail=1 when the result is not EXPECT.
spin_setup() {
  model="$here/../model/$1"
  command -v spin >/dev/null 2>&1 || { echo "FAIL: spin not installed (scripts/deps.sh installs it)"; exit 1; }
  CC=${CC:-cc}
  command -v "$CC" >/dev/null 2>&1 || { echo "FAIL: no C compiler for spin's verifier: $CC"; exit 1; }
  [ -f "$model" ] || { echo "FAIL: no model at $model"; exit 1; }
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/$2.XXXXXX") || exit 1
  trap 'rm -rf "$tmp"' EXIT
  trap 'exit 1' HUP INT PIPE TERM
  pml=$1
  cp "$model" "$tmp/$1"
  cd "$tmp" || exit 1
}

# verify NAME EXPECT SPIN-DEFINES...: EXPECT is pass, fail or note
verify() {
  name=$1 expect=$2
  shift 2
  case $expect in
  pass) opt=-O2 ;;
  *) opt=-O0 ;;
  esac
  rm -f pan pan.* "$pml.trail"
  if ! spin "$@" -a "$pml" >spin.out 2>&1; then
    echo "FAIL $name: spin -a $*"
    cat spin.out
    fail=1
    return
  fi
  # shellcheck disable=SC2086
  if ! "$CC" $opt $PANCC -o pan pan.c >cc.out 2>&1; then
    echo "FAIL $name: compiling pan"
    cat cc.out
    fail=1
    return
  fi
  t0=$(date +%s)
  # shellcheck disable=SC2086
  ./pan $PANRUN >pan.out 2>&1
  t1=$(date +%s)
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out | head -n 1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.out | head -n 1)
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -n 1)
  inv=$(sed -n 's/.*assertion violated (\(inv[1-4]\).*/\1/p' pan.out | head -n 1)
  fig="states stored ${states:-?}, depth ${depth:-?}, $((t1 - t0)) s"
  truncated=0
  if grep -q -e 'max search depth too small' -e 'MEMLIM' -e 'out of memory' \
      -e 'resize hashtable' pan.out; then
    truncated=1
  fi
  case $expect in
  pass)
    if [ "$truncated" = 0 ] && [ "${errors:-x}" = 0 ] &&
      ! grep -q 'Search not completed' pan.out; then
      echo "ok   $name: no violation, search complete ($fig)"
    else
      echo "FAIL $name: expected errors: 0 and a complete search ($fig)"
      grep -e 'violated' -e 'errors:' -e 'too small' -e 'MEMLIM' \
        -e 'memory' -e 'not completed' pan.out | cut -c1-200
      [ -f "$pml.trail" ] && spin "$@" -t -p "$pml" | tail -n 40
      fail=1
    fi
    ;;
  fail)
    if [ "${errors:-0}" -gt 0 ] && grep -q 'assertion violated' pan.out; then
      echo "ok   $name: ${inv:-an assertion} violated, as it should ($fig)"
    else
      echo "FAIL $name: the broken variant was not caught ($fig)"
      fail=1
    fi
    ;;
  note)
    if [ "${errors:-0}" -gt 0 ]; then
      echo "note $name: ${inv:-an assertion} violated (see model/README.md) ($fig)"
    else
      echo "note $name: no violation ($fig)"
    fi
    ;;
  esac
}
