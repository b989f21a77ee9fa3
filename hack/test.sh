#!/usr/bin/env bash
# The whole test suite: set-up, static checks, every Go test (the real
# claude-code CLI against the project's mock model included) and a short run
# of each fuzz target. This is what `make test` and .ci/run call.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

hack/setup.sh
export AGENTRUN_CLAUDE_BIN="$root/.cache/clis/claude-code/node_modules/.bin/claude"

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
echo "== go vet"
go vet ./...
echo "== go test"
KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$(hack/envtest-assets.sh)}"; export KUBEBUILDER_ASSETS  # envtest: kube-apiserver, etcd, kubectl
go test -count=1 -timeout 30m ./...
echo "== fuzz (short)"
hack/fuzz.sh "${FUZZTIME:-10s}"
