# Sourced by hack/envtest-assets.sh and hack/cluster.sh: what both need to
# build Kubernetes binaries from the committed scratch module hack/k8s-tools
# (its go.mod and go.sum pin every version). Expects $root.

k8s_version=v1.34.4
k8s_mod="$root/hack/k8s-tools"

# k8s_key names a build: it changes whenever the pins (go.sum) or the Go
# toolchain change, so a stale binary is never reused.
k8s_key() {
  echo "$k8s_version-$( (cat "$k8s_mod/go.sum" "$k8s_mod/go.mod"; go env GOVERSION) | sha256sum | cut -c1-12)"
}

# k8s_build DIR PACKAGE... builds the packages into DIR with the version
# stamps a release build carries (`kubectl version`, the API server's
# /version and the kubelet's node info read them).
k8s_build() {
  local dir=$1 minor pkg ldflags="-s -w"
  shift
  minor=${k8s_version#v1.}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  (cd "$k8s_mod" && GOFLAGS="-mod=readonly -modcacherw" CGO_ENABLED=0 nice -n 10 \
    go build -trimpath -ldflags "$ldflags" -o "$dir/" "$@")
}
