#!/usr/bin/env bash
# Apply to first model call on the local cluster (a benchmark, not a test;
# docs/benchmarks.md, "Apply to first model call"): N AgentRuns in a row on
# hack/cluster.sh's Kubernetes with the runner image present, each broken
# down into its steps (median and p95 of each), against the same claude-code
# CLI started directly on the node against the same mock model, alternating
# with the runs. Target: apply to first model request at most 3 s (median).
#
#   hack/bench-start.sh [-n 10] [--check] [-target 3s] [-v]
#
# (-v prints each run's moments; BENCH_START_KEEP=DIR keeps the logs.)
#
# It brings everything up with hack/cluster-demo.sh up (the cluster unless
# KUBECONFIG is set, the chart, the mock model on the node bridge, the
# Secret, one AgentRun that warms the node up) and down again at the end
# (make demo-down), also on failure. --check exits 1 when the median is
# above -target. Needs root (the cluster does) and the machine to itself:
# run it under flock /tmp/agentrun-heavy.lock on a shared machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cache="${AGENTRUN_CLUSTER_CACHE:-$root/.cache/cluster}"
export DEMO_NAME=bench-start DEMO_SCENARIO=${DEMO_SCENARIO:-tool}
args=()
for a in "$@"; do
  case "$a" in
    --check) args+=(-check) ;;
    *) args+=("$a") ;;
  esac
done
mkdir -p "$cache"
go build -o "$cache/bench-start" ./hack/bench-start
claude="$root/.cache/clis/claude-code/node_modules/.bin/claude"
[ -x "$claude" ] || { echo "bench-start: $claude is missing (hack/setup.sh installs it)" >&2; exit 1; }

ctrd_log=
if [ -z "${KUBECONFIG:-}" ]; then
  ctrd_log="$cache/state/logs/containerd.log"
fi
# BENCH_START_KEEP=DIR keeps the mock's request log and containerd's log
# there (the cluster's state goes with it at the end).
keep() {
  [ -n "${BENCH_START_KEEP:-}" ] || return 0
  mkdir -p "$BENCH_START_KEEP"
  cp "$cache/demo/requests.jsonl" ${ctrd_log:+"$ctrd_log"} "$BENCH_START_KEEP/" 2>/dev/null || true
}
trap 'keep; "$root/hack/cluster-demo.sh" down' EXIT
"$root/hack/cluster-demo.sh" up >/dev/null
export KUBECONFIG="${KUBECONFIG:-$cache/state/kubeconfig}"
"$root/hack/cluster-demo.sh" manifest >"$cache/demo/bench-start.yaml"
"$cache/bench-start" -manifest "$cache/demo/bench-start.yaml" -requests "$cache/demo/requests.jsonl" \
  -containerd-log "$ctrd_log" -claude "$claude" -mock-url "http://${MOCK_HOST_IP:-10.200.0.1}:${MOCK_PORT:-18080}" \
  "${args[@]}"
