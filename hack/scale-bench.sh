#!/usr/bin/env bash
# Scale benchmark (not a test): N AgentRuns (default 1000) created at once
# against envtest's kube-apiserver and etcd, with the manager running (live)
# and before it starts (backlog); the time until all N Jobs exist, against
# creating N Jobs directly with client-go in the same run; when the first
# and the last status were written; the manager's peak memory, CPU,
# requests and reconciles. Targets (--check exits 1 below one): backlog at
# most 1.3x direct, live at most 2x, every status within 5 s of the last
# Job. -n 10000 gives the memory at 10,000 runs. docs/benchmarks.md.
# Usage: hack/scale-bench.sh [-n 1000] [-workers 16] [-max-concurrent-reconciles N] [-manager-log FILE] [-apiserver-profile PREFIX]
#        [-kube-api-qps N] [-kube-api-burst N] [-kube-api-streaming-list true|false] [--check]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$(hack/envtest-assets.sh)}"; export KUBEBUILDER_ASSETS
mkdir -p bin
nice -n 10 go build -o bin/manager ./cmd/manager
nice -n 10 go build -o bin/scale-bench ./hack/scale-bench
exec bin/scale-bench -manager bin/manager "$@"
