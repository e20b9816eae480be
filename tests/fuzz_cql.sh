#!/bin/sh
# fuzz_cql.sh - fuzz the CQL v4 decoder (tests/fuzz_cql.c) with libFuzzer.
#
#   tests/fuzz_cql.sh [CAPTURES_DIR]
#
# Seeds: one file per frame (header and body) of every *.jsonl capture in
# CAPTURES_DIR (default: tests/data/cql-captures).
# Runs FUZZ_SECONDS (default 60); exits non-zero on any crash or sanitizer
# report, and prints the run's figures. Set FUZZ_KEEP=DIR to keep the
# grown corpus there.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
caps=${1:-$root/tests/data/cql-captures}
secs=${FUZZ_SECONDS:-60}
cc=${CC_FUZZ:-clang}

if ! ls "$caps"/*.jsonl >/dev/null 2>&1; then
  echo "fuzz_cql: no captures at $caps" >&2
  exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

"$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I "$root/src" "$root/tests/fuzz_cql.c" "$root/src/store/cql_proto.c" \
  "$root/src/util/buf.c" -o "$work/fuzz_cql"

mkdir "$work/seeds" "$work/corpus" "$work/crashes"
python3 - "$caps" "$work/seeds" <<'EOF'
import glob, json, os, struct, sys
ops = {"ERROR": 0, "STARTUP": 1, "READY": 2, "AUTHENTICATE": 3, "OPTIONS": 5,
       "SUPPORTED": 6, "QUERY": 7, "RESULT": 8, "PREPARE": 9, "EXECUTE": 10,
       "REGISTER": 11, "EVENT": 12, "BATCH": 13, "AUTH_CHALLENGE": 14,
       "AUTH_RESPONSE": 15, "AUTH_SUCCESS": 16}
n = 0
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    for line in open(path):
        r = json.loads(line)
        body = bytes.fromhex(r["body_hex"])
        head = struct.pack(">BBhBi", r["version"], r["flags"], r["stream"],
                           ops[r["opcode"]], len(body))
        name = "%s-%03d-%s" % (r["scenario"], r["seq"], r["dir"])
        with open(os.path.join(sys.argv[2], name), "wb") as f:
            f.write(head + body)
        n += 1
print("fuzz_cql: %d seed frames" % n)
EOF

status=0
"$work/fuzz_cql" -max_len=65536 -max_total_time="$secs" -print_final_stats=1 \
  -artifact_prefix="$work/crashes/" "$work/corpus" "$work/seeds" \
  >"$work/log" 2>&1 || status=$?

if [ "$status" -ne 0 ] || grep -q -e 'ERROR: AddressSanitizer' \
     -e 'ERROR: libFuzzer' -e 'runtime error:' -e 'ERROR: LeakSanitizer' \
     "$work/log"; then
  tail -n 60 "$work/log"
  for a in "$work"/crashes/*; do
    [ -f "$a" ] && { echo "artifact: $(basename "$a")"; od -An -tx1 "$a" | head -n 20; }
  done
  echo "fuzz_cql: FAILED (status $status)"
  exit 1
fi

if [ -n "${FUZZ_KEEP:-}" ]; then
  mkdir -p "$FUZZ_KEEP"
  cp "$work"/corpus/* "$FUZZ_KEEP"/ 2>/dev/null || true
fi

# The last status line and the final stats.
grep -E '^#[0-9]+' "$work/log" | tail -n 1
grep -E '^stat::' "$work/log"
echo "fuzz_cql: corpus $(ls "$work/corpus" | wc -l) files, ${secs}s, no crash"
