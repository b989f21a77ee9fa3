#!/usr/bin/env bash
# Builds (once) the pinned golangci-lint v2 with the project's Go from the Go
# module proxy into the ignored .cache/tools, then runs it over the main
# module, the separate modules hack/images and hack/otel-collector, and the
# e2e-tagged test/e2e. The configuration is the checked-in .golangci.yml.
#
#   hack/golangci-lint.sh           lint everything (what make lint and hack/test.sh run)
#   hack/golangci-lint.sh path      print the binary's path (building it if needed)
#
# The binary is keyed by the pinned version and the Go version, so a bump of
# either rebuilds it; otherwise it is reused. `go install pkg@version` checks
# every module against the checksum database. The build (a few minutes on
# two cores) waits for the machine's shared heavy lock, AGENTRUN_HEAVY_LOCK
# (default /tmp/agentrun-heavy.lock); set it empty when the caller already
# holds that lock, or the build would wait for its own caller.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${AGENTRUN_TOOLS_CACHE:-$root/.cache/tools}"
pkg=github.com/golangci/golangci-lint/v2/cmd/golangci-lint
version=v2.15.0

dir="$cache/golangci-lint-$version-$(go env GOVERSION)"
bin="$dir/golangci-lint"
if [ ! -x "$bin" ]; then
  mkdir -p "$cache"
  exec 9>"$cache/.lock-golangci-lint"
  flock 9
  if [ ! -x "$bin" ]; then
    echo "golangci-lint: building $pkg@$version" >&2
    tmp="$dir.tmp"
    rm -rf "$tmp"
    heavy=()
    if [ -n "${AGENTRUN_HEAVY_LOCK-/tmp/agentrun-heavy.lock}" ]; then
      heavy=(flock -o "${AGENTRUN_HEAVY_LOCK-/tmp/agentrun-heavy.lock}")
    fi
    GOBIN="$tmp" GOFLAGS="-modcacherw -trimpath" CGO_ENABLED=0 \
      "${heavy[@]}" nice -n 10 go install "$pkg@$version" >&2
    rm -rf "$dir"
    mv "$tmp" "$dir"
  fi
  exec 9>&-
fi

if [ "${1:-}" = path ]; then echo "$bin"; exit 0; fi

cd "$root"
config="$root/.golangci.yml"
# The analysis cache beside the binary: the second run over unchanged code takes seconds.
export GOLANGCI_LINT_CACHE="${GOLANGCI_LINT_CACHE:-$cache/golangci-lint-cache}"
status=0
echo "golangci-lint: ./... (with the e2e build tag, so test/e2e is covered)" >&2
"$bin" run --config "$config" --build-tags e2e ./... || status=1
for mod in hack/images hack/otel-collector; do
  echo "golangci-lint: $mod" >&2
  (cd "$mod" && "$bin" run --config "$config" ./...) || status=1
done
exit "$status"
