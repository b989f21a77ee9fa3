#!/usr/bin/env bash
# The credential path's cost against an opaque tunnel, in the same run: a
# 32 MiB server-sent event stream and 300 small requests over one kept-alive
# connection, once through a plain CONNECT tunnel and once through the
# filter proxy's credential path (TLS terminated with the run's authority,
# the key put in, the body metered and scrubbed, TLS to the upstream).
# Targets: >= 50% of the tunnel's throughput, <= +2 ms median latency. Run
# it on an idle machine: both sides share the cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=$(go test -run '^$' -bench 'BenchmarkInterception' -benchtime 1x -count "${COUNT:-3}" ./proxy/credentials/)
echo "$out" | grep -E '^Benchmark'
echo "$out" | awk '
  /^BenchmarkInterception/ {
    for (i = 2; i <= NF; i++) v[$(i+1)] = $i
    n++; printf "run %d: tunnel %.0f MiB/s, credential path %.0f MiB/s = %.0f%% (target >= 50%%); small requests, median: tunnel %.3f ms, credential path %.3f ms, +%.3f ms (target <= +2 ms)\n",
      n, v["tunnel-MiB/s"], v["intercept-MiB/s"], v["%-of-tunnel"], v["tunnel-latency-ms"], v["intercept-latency-ms"], v["latency-added-ms"]
  }'
