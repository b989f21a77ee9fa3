#!/usr/bin/env bash
# Scale benchmark (not a test): N AgentRuns (default 1000) created at once
# against envtest's kube-apiserver and etcd; the time until all N Jobs
# exist, against creating N Jobs directly with client-go in the same run;
# and the manager's peak memory. Target: at most 1.5x the direct time.
# Usage: hack/scale-bench.sh [-n 1000] [-workers 16] [-max-ratio 1.5]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$(hack/envtest-assets.sh)}"; export KUBEBUILDER_ASSETS
mkdir -p bin
nice -n 10 go build -o bin/manager ./cmd/manager
nice -n 10 go build -o bin/scale-bench ./hack/scale-bench
exec bin/scale-bench -manager bin/manager "$@"
