#!/usr/bin/env bash
# The git workspace's cost against plain git, in the same run: agentrun's
# clone and publish (clone, the agent's commit recorded, the run's branch
# pushed) of a synthesized repository (default 50 MB, 500 files of random
# text) against `git clone --depth 1`, a commit and `git push` of the same
# repository from the same server (git http-backend over TLS, a token);
# and recording and patching a change of 10 files in a repository of
# 100,000 files, with the git processes' peak memory. Target: ratio <= 1.3.
#   AGENTRUN_BENCH_GIT_MB=50 AGENTRUN_BENCH_GIT_FILES=100000 hack/bench-git.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=$(go test -run '^$' -bench 'BenchmarkCloneAndPublish|BenchmarkPublishManyFiles' -benchtime "${AGENTRUN_BENCH_GIT_N:-3}x" -count 1 -timeout 30m ./gitworkspace/)
echo "$out" | grep -E '^Benchmark'
echo "$out" | awk '
  { for (i = 2; i <= NF; i++) if ($(i+1) ~ /^(plain-ms|agentrun-ms|ratio|repo-MB|files|record-ms|patch-ms|git-peak-MiB|agentrun-peak-MiB)$/) v[$(i+1)] = $i }
  END {
    printf "clone and publish, %d MB: git %.0f ms, agentrun %.0f ms = %.2fx (target <= 1.3x)\n", v["repo-MB"], v["plain-ms"], v["agentrun-ms"], v["ratio"]
    printf "publish, %d files: record %.0f ms, patch %.0f ms; peak memory: git %.0f MiB, agentrun %.0f MiB\n", v["files"], v["record-ms"], v["patch-ms"], v["git-peak-MiB"], v["agentrun-peak-MiB"]
  }'
