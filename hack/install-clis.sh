#!/usr/bin/env bash
# Installs the pinned agent CLIs from npm into an ignored cache folder.
# Idempotent: a CLI whose pinned version is already installed is skipped.
# Usage: hack/install-clis.sh [claude-code] [codex] [pi]   (default: all it knows)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${AGENTRUN_CLI_CACHE:-$root/.cache/clis}

# Pinned versions: see ../shared/design/RUNTIMES.md for why these.
declare -A pkg=(
  [claude-code]="@anthropic-ai/claude-code@2.1.328"
  [codex]="@openai/codex@0.171.0"
  [pi]="@mariozechner/pi-coding-agent@0.73.1"
)
declare -A bin=(
  [claude-code]="node_modules/.bin/claude"
  [codex]="node_modules/.bin/codex"
  [pi]="node_modules/.bin/pi"
)

want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${!pkg[@]}")

for name in "${want[@]}"; do
  spec=${pkg[$name]:?unknown CLI $name}
  dir=$cache/$name
  stamp=$dir/.installed
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$spec" ] && [ -x "$dir/${bin[$name]}" ]; then
    echo "install-clis: $name ($spec) already installed in $dir"
    continue
  fi
  echo "install-clis: installing $spec into $dir"
  rm -rf "$dir"
  mkdir -p "$dir"
  (cd "$dir" && echo '{"private":true}' >package.json &&
    npm install --no-audit --no-fund --loglevel=error "$spec" >&2)
  [ -x "$dir/${bin[$name]}" ] || { echo "install-clis: $name installed but ${bin[$name]} is missing" >&2; exit 1; }
  echo "$spec" >"$stamp"
done
