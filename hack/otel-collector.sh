#!/usr/bin/env bash
# Builds (once) the OpenTelemetry Collector that the telemetry tests export
# to and prints its path: the committed scratch module hack/otel-collector
# (OTLP receiver and file exporter, collector v0.161.0; its go.mod and
# go.sum pin every version, this script never runs `go mod tidy` there),
# from the Go module proxy.
#
#   AGENTRUN_OTELCOL="$(hack/otel-collector.sh)"
#
# Progress goes to stderr. Idempotent: when the binary exists for the
# current go.sum and Go toolchain, nothing is built (a few milliseconds); a
# cold build takes a few minutes on two cores. The binary goes to the
# ignored .cache/otel-collector/<key>/ (or AGENTRUN_OTELCOL_CACHE), the
# modules and build cache to Go's own GOMODCACHE and GOCACHE. Run it under
# the heavy lock when building (hack/test.sh does).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${AGENTRUN_OTELCOL_CACHE:-$root/.cache/otel-collector}"
mod="$root/hack/otel-collector"
key=$( (cat "$mod/go.sum" "$mod/go.mod" "$mod/main.go"; go env GOVERSION) | sha256sum | cut -c1-12)
bin="$cache/$key/agentrun-otelcol"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
start=$(date +%s)
echo "otel-collector: building the OpenTelemetry Collector (OTLP receiver, file exporter)" >&2
tmp="$cache/.tmp-$key"
rm -rf "$tmp"
mkdir -p "$tmp"
(cd "$mod" && GOFLAGS="-mod=readonly -modcacherw" CGO_ENABLED=0 nice -n 10 \
  go build -trimpath -ldflags "-s -w" -o "$tmp/agentrun-otelcol" .)
rm -rf "${bin%/*}"
mv "$tmp" "${bin%/*}"
# Builds of older pins are never used again.
find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name "$key" ! -name '.tmp-*' -exec rm -rf {} +
echo "otel-collector: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
