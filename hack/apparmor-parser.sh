#!/usr/bin/env bash
# Prints the directory of an unpacked Debian apparmor package (sbin/
# apparmor_parser and etc/apparmor.d), fetched once with apt-get download
# into .cache/apparmor: the AppArmor profile's test parses it there, without
# installing the package (whose scripts would load profiles into a kernel
# this machine may not have).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/.cache/apparmor"
if [ ! -x "$dir/root/sbin/apparmor_parser" ]; then
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  (cd "$dir.tmp" && apt-get download apparmor >/dev/null 2>&1 && dpkg-deb -x apparmor_*.deb root) || {
    echo "apparmor-parser: apt-get download apparmor failed (run apt-get update?)" >&2
    exit 1
  }
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$dir/root"
