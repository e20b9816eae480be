#!/bin/sh
# Install what unico needs to build and test, from Debian's packages.
# Idempotent: installs only what is missing. Run as root (or with sudo).
set -eu
PKGS="build-essential cmake pkg-config liblmdb-dev lmdb-utils libjansson-dev libutf8proc-dev libcmocka-dev python3"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "deps: installing$missing" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
