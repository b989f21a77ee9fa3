#!/usr/bin/env bash
# The whole test suite: set-up, static checks, every Go test (the real
# agent CLIs against the project's mock model, the sandbox attacks, the
# controller against a real API server), the end-to-end test on a real
# single-node cluster, and a short run of each fuzz target. This is what
# `make test` and .ci/run call. It runs as root (the cluster needs it).
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
go vet -tags e2e ./test/e2e/
(cd hack/images && go vet ./...)
(cd hack/otel-collector && go vet ./...)
echo "== golangci-lint (.golangci.yml; also hack/images, hack/otel-collector and the e2e tag)"
hack/golangci-lint.sh
echo "== ui bundle (hack/ui-build.sh check: kubectl agentrun ui's committed script is the build of its pinned sources)"
hack/ui-build.sh check
echo "== go test"
KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$(hack/envtest-assets.sh)}"; export KUBEBUILDER_ASSETS  # envtest: kube-apiserver, etcd, kubectl
AGENTRUN_OTELCOL="${AGENTRUN_OTELCOL:-$(hack/otel-collector.sh)}"; export AGENTRUN_OTELCOL  # the OpenTelemetry Collector the telemetry tests export to
go test -count=1 -timeout 30m ./...
echo "== image recipes (hack/images: the Go image builder installs what the Dockerfiles do)"
(cd hack/images && go test -count=1 ./...)
echo "== end to end (test/e2e: a real single-node Kubernetes, brought up and down by the test)"
if [ "$(id -u)" -eq 0 ]; then
  go test -tags e2e -count=1 -timeout 40m -v ./test/e2e/
else
  echo "test/e2e needs root (it runs a kubelet and containerd); run make test-e2e as root" >&2
  exit 1
fi
echo "== fuzz (short)"
hack/fuzz.sh "${FUZZTIME:-10s}"
