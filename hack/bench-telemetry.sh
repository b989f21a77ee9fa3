#!/usr/bin/env bash
# Telemetry benchmark (not a test): `agentrun translate` of a large
# claude-code capture (default 64 MiB) with the OTLP export off and on,
# alternately in the same run, to a real OpenTelemetry Collector on
# 127.0.0.1 (hack/otel-collector.sh), then with the collector down and
# black-holed. Prints both throughputs and their ratio (target: >= 0.9 of
# the throughput without export) and how much longer a replay takes when
# the collector is gone (bounded by the 2 s final flush).
# Usage: hack/bench-telemetry.sh [--check] [-size MiB] [-rounds N] [-min-ratio 0.9]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
collector=$(hack/otel-collector.sh)
mkdir -p bin
nice -n 10 go build -o bin/agentrun ./cmd/agentrun
nice -n 10 go build -o bin/bench-telemetry ./hack/bench-telemetry
args=()
for a in "$@"; do
  case "$a" in
    --check) args+=(-check) ;;
    *) args+=("$a") ;;
  esac
done
exec bin/bench-telemetry -agentrun bin/agentrun -collector "$collector" "${args[@]}"
