#!/usr/bin/env bash
# The sandbox's cost against the same work without it, in the same run:
# 100 MiB over HTTP and over HTTPS (CONNECT) through the filter proxy inside
# bubblewrap versus direct on loopback, the median latency of 200 small
# requests, and the start-up of `agentrun sandbox -- true` versus `true`.
# Targets: >= 50% of direct throughput, <= +2 ms median latency, <= 50 ms
# start-up overhead. Run it on an idle machine: both sides share 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
hack/setup.sh >/dev/null
out=$(go test -run '^$' -bench 'BenchmarkSandbox' -benchtime 1x -count 1 ./test/sandbox/)
echo "$out" | grep -E '^Benchmark'
echo "$out" | awk '
  { for (i = 2; i <= NF; i++) if ($(i+1) ~ /-(MiB\/s|ms|of-direct)$/ || $(i+1) ~ /%-of-direct$/) v[$(i+1)] = $i }
  END {
    printf "HTTP  100 MiB: direct %.0f MiB/s, sandbox %.0f MiB/s = %.0f%% (target >= 50%%)\n", v["http-direct-MiB/s"], v["http-sandbox-MiB/s"], v["http-%-of-direct"]
    printf "HTTPS 100 MiB: direct %.0f MiB/s, sandbox %.0f MiB/s = %.0f%% (target >= 50%%)\n", v["https-direct-MiB/s"], v["https-sandbox-MiB/s"], v["https-%-of-direct"]
    printf "small requests, median: direct %.2f ms, sandbox %.2f ms, +%.2f ms (target <= +2 ms)\n", v["latency-direct-ms"], v["latency-sandbox-ms"], v["latency-added-ms"]
    printf "start-up: true %.1f ms, agentrun sandbox -- true %.1f ms, +%.1f ms (target <= 50 ms)\n", v["true-ms"], v["sandbox-true-ms"], v["overhead-ms"]
  }'
