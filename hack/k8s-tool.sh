#!/usr/bin/env bash
# Builds (once) a pinned Go tool from the Go module proxy into the ignored
# .cache/tools and prints its path:
#   hack/k8s-tool.sh controller-gen   sigs.k8s.io/controller-tools (CRD, RBAC, deepcopy)
#   hack/k8s-tool.sh helm             helm.sh/helm/v3 (chart lint and template tests)
#   hack/k8s-tool.sh crd-ref-docs     github.com/elastic/crd-ref-docs (docs/api-reference.md)
# The version pins live here; `go install pkg@version` checks every module
# against the checksum database. Idempotent: an existing binary is reused.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${AGENTRUN_TOOLS_CACHE:-$root/.cache/tools}"

case "${1:-}" in
  controller-gen) pkg=sigs.k8s.io/controller-tools/cmd/controller-gen; version=v0.19.0 ;;
  helm) pkg=helm.sh/helm/v3/cmd/helm; version=v3.19.0 ;;
  crd-ref-docs) pkg=github.com/elastic/crd-ref-docs; version=v0.3.0 ;;
  *) echo "usage: $0 controller-gen|helm|crd-ref-docs" >&2; exit 2 ;;
esac
dir="$cache/$1-$version-$(go env GOVERSION)"
bin="$dir/$1"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi

mkdir -p "$cache"
exec 9>"$cache/.lock-$1"
flock 9
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
echo "k8s-tool: building $pkg@$version" >&2
tmp="$dir.tmp"
rm -rf "$tmp"
GOBIN="$tmp" GOFLAGS="-modcacherw -trimpath" CGO_ENABLED=0 nice -n 10 go install "$pkg@$version" >&2
rm -rf "$dir"
mv "$tmp" "$dir"
echo "$bin"
