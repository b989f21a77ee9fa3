#!/usr/bin/env bash
# The real-CLI suites (test/cli) against the newest published version of
# every agent CLI, beside the same suites against the pinned ones
# (adapters/clis.txt), and what changed: the versions, and each test that
# passes on one side and not on the other. Not part of `make test`: its
# result changes with the registry. A bump is then one edit of
# adapters/clis.txt plus this report as its evidence.
#   hack/test-clis-latest.sh [go test -run REGEXP]
# Writes the two runs' go test -json output and the report to
# .cache/clis-latest/report/. Exits 1 when a test that passes pinned fails
# on the newest versions.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
latest=$root/.cache/clis-latest
report=$latest/report
mkdir -p "$report"
run=${1:-.}

hack/setup.sh >/dev/null
AGENTRUN_CLIS_LATEST=1 AGENTRUN_CLI_CACHE=$latest hack/install-clis.sh

bins() { # bins CACHE: the AGENTRUN_*_BIN variables for the CLIs of CACHE
  local cache=$1 name binary
  while read -r name _ _ binary _; do
    case $name in
      claude-code) echo "AGENTRUN_CLAUDE_BIN=$cache/$name/node_modules/.bin/$binary" ;;
      *) echo "AGENTRUN_$(tr a-z- A-Z_ <<<"$name")_BIN=$cache/$name/node_modules/.bin/$binary" ;;
    esac
  done < <(grep -v '^[[:space:]]*\(#\|$\)' adapters/clis.txt)
}

suite() { # suite NAME CACHE
  echo "== test/cli with the $1 CLIs" >&2
  env $(bins "$2") AGENTRUN_CLI_CACHE="$2" go test -count=1 -json -timeout 40m -run "$run" ./test/cli/ >"$report/$1.json" || true
}
suite pinned "$root/.cache/clis"
suite latest "$latest"

outcomes() { # TEST ACTION lines of the top-level tests
  jq -r 'select(.Test != null and (.Test | contains("/") | not) and (.Action == "pass" or .Action == "fail" or .Action == "skip")) | "\(.Test) \(.Action)"' "$report/$1.json" | sort
}
command -v jq >/dev/null || { echo "test-clis-latest: jq is missing (apt-get install jq)" >&2; exit 1; }
{
  echo "# agent CLIs: pinned (adapters/clis.txt) and newest published"
  while read -r name package version _; do
    printf '%-12s %-32s pinned %-12s newest %s\n' "$name" "$package" "$version" "$(cut -d' ' -f1 "$latest/$name/.installed" | sed 's/.*@//')"
  done < <(grep -v '^[[:space:]]*\(#\|$\)' adapters/clis.txt)
  echo
  echo "# tests whose outcome differs (test: pinned -> newest)"
  join -a1 -a2 -e missing -o 0,1.2,2.2 <(outcomes pinned) <(outcomes latest) | awk '$2 != $3 {print $1 ": " $2 " -> " $3; n++} END {if (!n) print "(none: every test has the same outcome)"}'
} | tee "$report/report.txt"
! grep -q ': pass -> ' "$report/report.txt"
