#!/usr/bin/env bash
# Live usage benchmark (not a test): N AgentRuns (default 1000) running at
# once against envtest's kube-apiserver and etcd, the manager as its own
# process, each run's events sidecar played by the real progress server on
# a loopback address of its own, and a model call ending every 5-25 s per
# run. Reports the freshness of live usage (model call end -> usage in
# status through a watch: p50, p95, p99, max), the manager's API requests
# per second idle and with model calls (what live usage adds), the API
# server's count, and the manager's CPU and memory. Target: p95 at most 10s
# (docs/benchmarks.md, docs/kubernetes/live-usage.md). About 4 minutes on 2 cores.
# Usage: hack/bench-live-usage.sh [-n 1000] [-window 2m] [-call-min 5s] [-call-max 25s] [-max-p95 10s]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$(hack/envtest-assets.sh)}"; export KUBEBUILDER_ASSETS
mkdir -p bin
nice -n 10 go build -o bin/manager ./cmd/manager
nice -n 10 go build -o bin/bench-live-usage ./hack/bench-live-usage
exec bin/bench-live-usage -manager bin/manager "$@"
