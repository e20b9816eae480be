# spin_lib.sh - what tests/spin_model.sh and tests/spin_parallel_commit.sh
# share, sourced by both after setting $here (this folder):
#   spin_setup MODEL TMPNAME
# checks that spin and a C compiler are there (exit 77 when not) and that
# model/MODEL exists, then works in a fresh temporary folder (removed on
# exit) holding a copy of the model.
spin_setup() {
  model="$here/../model/$1"
  command -v spin >/dev/null 2>&1 || { echo "skipped: spin not installed"; exit 77; }
  CC=${CC:-cc}
  command -v "$CC" >/dev/null 2>&1 || { echo "skipped: spin not installed (no C compiler: $CC)"; exit 77; }
  [ -f "$model" ] || { echo "FAIL: no model at $model"; exit 1; }
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/$2.XXXXXX") || exit 1
  trap 'rm -rf "$tmp"' EXIT
  trap 'exit 1' HUP INT PIPE TERM
  cp "$model" "$tmp/$1"
  cd "$tmp" || exit 1
}
