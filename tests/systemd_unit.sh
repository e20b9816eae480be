#!/bin/sh
# systemd_unit.sh - contrib/systemd/unico.service passes `systemd-analyze
# verify`: its directives, hardening options and ExecStart. Debian has
# systemd-analyze only in the systemd package itself, so where it is
# missing (containers, CI) the test is skipped (exit 77; ctest label live)
# rather than passed.
# Usage: systemd_unit.sh UNIT UNICO_BINARY SCRATCH_DIR
set -eu
unit=$1 unico=$2 dir=$3
# The probes the unit's comments give: readiness on /readyz, liveness on
# /healthz (docs/http.md#deploying); checked with or without systemd.
grep -q 'GET /readyz (200 only while writes can be served' "$unit" || {
  echo "systemd_unit: $unit does not point readiness probes at /readyz"; exit 1; }
grep -q 'liveness check.*asks GET /healthz' "$unit" || {
  echo "systemd_unit: $unit does not point liveness checks at /healthz"; exit 1; }
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "systemd_unit: systemd-analyze not installed (package systemd): skipped"
  exit 77
fi
rm -rf "$dir" && mkdir -p "$dir"
# ExecStart names the installed /usr/local/bin/unico; verify checks that it
# is executable, so check a copy that runs the built binary. --man=no: the
# man pages of Documentation= need not be installed here.
sed "s|/usr/local/bin/unico|$unico|" "$unit" > "$dir/unico.service"
grep -q "^ExecStart=$unico serve " "$dir/unico.service"
out=$(systemd-analyze verify --man=no "$dir/unico.service" 2>&1) || {
  echo "$out"; echo "systemd_unit: systemd-analyze verify failed"; exit 1; }
if [ -n "$out" ]; then
  echo "$out"; echo "systemd_unit: systemd-analyze verify warned"; exit 1
fi
echo "systemd_unit: $unit verified"
