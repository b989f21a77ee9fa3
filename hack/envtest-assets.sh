#!/usr/bin/env bash
# Builds (once) and locates the binaries that controller-runtime's envtest
# starts: kube-apiserver and kubectl from k8s.io/kubernetes v1.34.4 and etcd
# 3.6.4, all from the Go module proxy through the committed scratch module in
# hack/k8s-tools (its go.mod and go.sum pin every version; this script never
# runs `go mod tidy` there).
#
# Prints the asset directory on stdout, so:
#   export KUBEBUILDER_ASSETS="$(hack/envtest-assets.sh)"
# Progress goes to stderr. Idempotent: when the three binaries exist for the
# current go.sum, nothing is built. A cold build takes 10-14 minutes on two
# cores (kube-apiserver dominates); warm, a few milliseconds.
#
# The binaries go to the repository's ignored .cache/ (or AGENTRUN_K8S_CACHE):
#   $cache/bin/<key>/{kube-apiserver,kubectl,etcd}   (about 190 MB)
# The modules (about 740 MB) and the build cache (about 3 GB) go to Go's own
# GOMODCACHE and GOCACHE, so a fresh clone on the same machine (CI's) only
# links: about a minute instead of ten.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${AGENTRUN_K8S_CACHE:-$root/.cache/k8s}"
. "$root/hack/k8s-build.sh"
key=$(k8s_key)
out="$cache/bin/$key"

have_all() {
  [ -x "$out/kube-apiserver" ] && [ -x "$out/kubectl" ] && [ -x "$out/etcd" ]
}

if have_all; then
  echo "$out"
  exit 0
fi

mkdir -p "$cache/bin"
# One build at a time: a second caller waits for the first and then finds
# the binaries.
exec 9>"$cache/bin/.lock"
flock 9
if have_all; then
  echo "$out"
  exit 0
fi

tmp="$cache/bin/.tmp-$key"
rm -rf "$tmp"
mkdir -p "$tmp"
start=$(date +%s)
echo "envtest-assets: downloading modules into $(go env GOMODCACHE)" >&2
(cd "$k8s_mod" && GOFLAGS="-mod=readonly -modcacherw" go mod download)
echo "envtest-assets: building etcd 3.6.4" >&2
(cd "$k8s_mod" && GOFLAGS="-mod=readonly -modcacherw" CGO_ENABLED=0 nice -n 10 \
  go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" ./etcd)
echo "envtest-assets: building kube-apiserver and kubectl $k8s_version (10-14 min cold on 2 cores)" >&2
k8s_build "$tmp" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
"$tmp/kube-apiserver" --version >&2
rm -rf "$out"
mv "$tmp" "$out"
# Binaries of older pins are never used again.
find "$cache/bin" -mindepth 1 -maxdepth 1 -type d -name 'v*' ! -name "$key" -exec rm -rf {} +
echo "envtest-assets: built in $(( $(date +%s) - start ))s into $out" >&2
echo "$out"
