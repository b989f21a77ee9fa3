#!/usr/bin/env bash
# The main job on one machine, before Kubernetes: the real claude-code CLI,
# launched by `agentrun run` inside bubblewrap, talks to the project's mock
# model (on 127.0.0.1) only through agentrun's filter proxy, which routes the
# test host name mock-model.test to it; agentrun prints the unified event
# stream in the text format.
# Usage: hack/demo-local.sh [SCENARIO] [agentrun run flags...]   (default: parallel)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scenario=${1:-parallel}
shift || true
bin=$root/bin
[ -x "$bin/agentrun" ] && [ -x "$bin/mockmodel" ] || (cd "$root" && make build >/dev/null)
"$root/hack/install-clis.sh" claude-code >/dev/null

work=$(mktemp -d)
trap 'kill "$mock_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin/mockmodel" --addr 127.0.0.1:0 >"$work/url" 2>"$work/mock.log" &
mock_pid=$!
for _ in $(seq 50); do [ -s "$work/url" ] && break; sleep 0.1; done
url=$(head -1 "$work/url")
port=${url##*:}
mkdir -p "$work/repo"
echo "mock model at $url, seen by the agent as http://mock-model.test:$port; workspace $work/repo" >&2

export AGENTRUN_CLAUDE_BIN="$root/.cache/clis/claude-code/node_modules/.bin/claude"
"$bin/agentrun" run --runtime claude-code --model sonnet --format text --cwd "$work/repo" \
  --add-host mock-model.test=127.0.0.1 --allow-host "mock-model.test:$port" --allow-host "127.0.0.1:$port" \
  --env ANTHROPIC_BASE_URL="http://mock-model.test:$port" --env ANTHROPIC_API_KEY=mock-key --env CLAUDE_CODE_MAX_RETRIES=1 \
  "$@" "Please run the demo. scenario:$scenario"
