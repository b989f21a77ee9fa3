#!/usr/bin/env bash
# Builds the script of kubectl agentrun ui's pages, kubectlplugin/ui/assets/app.js,
# from kubectlplugin/ui/web: its sources (src/) and its pinned npm packages
# (package.json with exact versions, package-lock.json with their hashes),
# installed with `npm ci` into the ignored .cache/ui-build. The bundle is
# committed, so `go build` and the plugin's release need no npm; its first
# line names the hash of the sources it was built from, which a Go test
# (TestBundleMatchesSources) checks on every `go test`.
#
# Usage: hack/ui-build.sh          build and write assets/app.js
#        hack/ui-build.sh check    build again and fail unless the committed
#                                  bundle is exactly that build
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
web=$root/kubectlplugin/ui/web
bundle=$root/kubectlplugin/ui/assets/app.js
cache=$root/.cache/ui-build
mode=${1:-build}
case $mode in build | check) ;; *) echo "usage: hack/ui-build.sh [check]" >&2; exit 2 ;; esac

# The pinned packages: a new lock installs again. --ignore-scripts: the
# build needs none (esbuild's own binary comes in its platform package).
lock=$(cat "$web/package.json" "$web/package-lock.json" | sha256sum | cut -c1-16)
if [ ! -f "$cache/.installed" ] || [ "$(cat "$cache/.installed")" != "$lock" ]; then
  rm -rf "$cache"
  mkdir -p "$cache"
  cp "$web/package.json" "$web/package-lock.json" "$cache/"
  (cd "$cache" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
  echo "$lock" >"$cache/.installed"
fi

# The sources' hash: sha256sum of every file of web/ in byte order of
# their paths, hashed again (the Go test computes the same).
sources=$(cd "$web" && find . -type f -not -path './node_modules/*' | sed 's|^\./||' | LC_ALL=C sort |
  while read -r f; do sha256sum "$f"; done | sha256sum | cut -d' ' -f1)

rm -rf "$cache/src" "$cache/out"
cp -r "$web/src" "$cache/src"
(cd "$cache" && node_modules/.bin/esbuild src/main.js --bundle --minify --format=iife --target=es2020 \
  --legal-comments=eof --charset=utf8 --log-level=warning \
  "--banner:js=/* kubectl agentrun ui, built by hack/ui-build.sh from kubectlplugin/ui/web, sources sha256:$sources */" \
  --outfile=out/app.js)

if [ "$mode" = check ]; then
  if ! cmp -s "$cache/out/app.js" "$bundle"; then
    echo "ui-build: $bundle is not the build of kubectlplugin/ui/web: run hack/ui-build.sh and commit it" >&2
    exit 1
  fi
  echo "ui-build: the committed bundle is the build of its sources"
else
  cp "$cache/out/app.js" "$bundle"
  echo "ui-build: wrote $bundle ($(wc -c <"$bundle") bytes)"
fi
