#!/usr/bin/env bash
# kubectl agentrun ui benchmark (not a test): the runs list of 1,000
# AgentRuns against envtest's kube-apiserver, loaded in headless Chromium
# (Debian's, from hack/setup.sh). Reports the time from navigation to the
# list's first full render, as a ratio to `kubectl agentrun get` printing
# the same runs (measured in the same run), and the Go heap the server
# holds with those runs in its watch. Reported, not asserted. About 2
# minutes on 2 cores (most of it making the 1,000 runs).
# Usage: hack/bench-ui.sh [ROUNDS]   (default 5)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$(hack/envtest-assets.sh)}"; export KUBEBUILDER_ASSETS
exec go test -run '^$' -bench '^BenchmarkUIRunsPage$' -benchtime "${1:-5}x" -timeout 20m ./kubectlplugin/
