#!/bin/sh
# run.sh - run one libFuzzer target for a fixed time on its seeds.
#
#   tests/fuzz/run.sh FUZZER SECONDS SEED_DIR... [-- LIBFUZZER_OPTION...]
#
# FUZZER is a fuzz_NAME binary of a -DUNICO_FUZZ=ON build. The seeds are
# read from each SEED_DIR (never written: the corpus grows in a temporary
# directory); a SEED_DIR holding CQL captures (*.jsonl, as in
# tests/data/cql-captures) gives one seed per frame. UNICO_FUZZ_SECONDS
# overrides SECONDS (ctest's timeout for the test is set from the build's
# UNICO_FUZZ_SECONDS: run longer ones by hand, or reconfigure). Exits non-zero on a crash, a sanitizer
# report, a leak or a timeout (an input taking over 10 s), after printing
# the report and the input in hex; the input is kept in UNICO_FUZZ_CRASHES
# (default ./crashes), ready to be added to tests/fuzz/corpus/NAME. Prints
# the run's last status line (execs, coverage, exec/s) and final stats.
# UNICO_FUZZ_KEEP=DIR keeps the grown corpus there.
set -eu

[ $# -ge 3 ] || { echo "usage: $0 FUZZER SECONDS SEED_DIR... [-- OPTION...]" >&2; exit 2; }
fuzzer=$1
secs=${UNICO_FUZZ_SECONDS:-$2}
shift 2
name=$(basename "$fuzzer")
[ -x "$fuzzer" ] || { echo "$name: no fuzzer at $fuzzer (build it: cmake --build DIR --target fuzzers)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/unico-$name-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/corpus" "$work/seeds" "$work/crashes"

dirs=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  d=$1
  shift
  if ls "$d"/*.jsonl >/dev/null 2>&1; then
    python3 - "$d" "$work/seeds" <<'PY'
import glob, json, os, struct, sys
ops = {"ERROR": 0, "STARTUP": 1, "READY": 2, "AUTHENTICATE": 3, "OPTIONS": 5,
       "SUPPORTED": 6, "QUERY": 7, "RESULT": 8, "PREPARE": 9, "EXECUTE": 10,
       "REGISTER": 11, "EVENT": 12, "BATCH": 13, "AUTH_CHALLENGE": 14,
       "AUTH_RESPONSE": 15, "AUTH_SUCCESS": 16}
src, out = sys.argv[1], sys.argv[2]
for path in sorted(glob.glob(os.path.join(src, "*.jsonl"))):
    base = os.path.basename(path)[:-6]
    for i, line in enumerate(open(path)):
        r = json.loads(line)
        body = bytes.fromhex(r["body_hex"])
        head = struct.pack(">BBhBi", r["version"], r["flags"], r["stream"],
                           ops[r["opcode"]], len(body))
        with open(os.path.join(out, "%s-%03d" % (base, i)), "wb") as f:
            f.write(head + body)
PY
  elif [ -n "$(ls -A "$d" 2>/dev/null)" ]; then
    dirs="$dirs $d"
  else
    echo "$name: no seeds in $d (the corpus is part of the repository)" >&2
    exit 1
  fi
done
[ "${1:-}" = "--" ] && shift
[ -n "$(ls -A "$work/seeds")" ] && dirs="$dirs $work/seeds"

echo "$name: ${secs}s on the seeds in$dirs"
status=0
# shellcheck disable=SC2086
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 \
  -print_final_stats=1 -artifact_prefix="$work/crashes/" "$@" \
  "$work/corpus" $dirs >"$work/log" 2>&1 || status=$?

if [ "$status" -ne 0 ] || grep -q -e 'ERROR: AddressSanitizer' -e 'ERROR: libFuzzer' \
     -e 'runtime error:' -e 'ERROR: LeakSanitizer' "$work/log"; then
  tail -n 80 "$work/log"
  keep=${UNICO_FUZZ_CRASHES:-./crashes}
  mkdir -p "$keep"
  for a in "$work"/crashes/*; do
    [ -f "$a" ] || continue
    cp "$a" "$keep/"
    echo "$name: input $(basename "$a") ($(wc -c <"$a") bytes), kept as $keep/$(basename "$a"):"
    od -An -c "$a" | head -n 40
  done
  echo "$name: FAILED (status $status); fix the bug, then add the input to tests/fuzz/corpus/${name#fuzz_}/"
  exit 1
fi

if [ -n "${UNICO_FUZZ_KEEP:-}" ]; then
  mkdir -p "$UNICO_FUZZ_KEEP"
  cp "$work"/corpus/* "$UNICO_FUZZ_KEEP"/ 2>/dev/null || true
fi
grep -E '^#[0-9]+' "$work/log" | tail -n 1
grep -E '^stat::' "$work/log" | tr '\n' ' '
echo
echo "$name: $(ls "$work/corpus" | wc -l) new inputs in ${secs}s, no crash"
