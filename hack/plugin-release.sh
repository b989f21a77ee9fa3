#!/usr/bin/env bash
# The release of the kubectl plugin (`kubectl agentrun`):
#
#   hack/plugin-release.sh VERSION                  build the tarballs into dist/ and
#                                                   write dist/agentrun.yaml
#   hack/plugin-release.sh manifest VERSION DIR     only write DIR/agentrun.yaml from
#                                                   the tarballs already in DIR
#   hack/plugin-release.sh tarball VERSION OS/ARCH DIR   only build one platform's
#                                                   tarball into DIR
#
# VERSION is krew's: v MAJOR.MINOR.PATCH. The tarballs are
# kubectl-agentrun_VERSION_OS_ARCH.tar.gz for linux and darwin on amd64 and
# arm64, each holding the static binary kubectl-agentrun and the LICENSE; they are built
# reproducibly (no cgo, -trimpath, fixed tar metadata), so the same commit
# gives the same sums. Upload them to the GitHub release VERSION: that is
# where the URIs of hack/krew/agentrun.yaml point. dist/agentrun.yaml is
# that template with VERSION and the tarballs' sha256 filled in.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
platforms="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"

die() { echo "plugin-release: $*" >&2; exit 1; }

check_version() {
  [[ $1 =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "version $1: write vMAJOR.MINOR.PATCH, for example v0.3.0"
}

# manifest VERSION DIR: the template's comments dropped, every v0.0.0 made
# VERSION, and each platform's sha256 the sum of the tarball its uri names.
manifest() {
  local version=$1 dir=$2
  check_version "$version"
  local tmp="$dir/agentrun.yaml.tmp"
  {
    echo "# kubectl agentrun $version: written by hack/plugin-release.sh from hack/krew/agentrun.yaml."
    awk -v version="$version" -v dir="$dir" '
      !started && /^#/ { next }
      { started = 1; gsub(/v0\.0\.0/, version) }
      /^ *uri: / { n = split($2, parts, "/"); file = parts[n] }
      /^ *sha256: / {
        cmd = "sha256sum \"" dir "/" file "\""
        if ((cmd | getline line) <= 0) { print "plugin-release: no " dir "/" file > "/dev/stderr"; failed = 1; exit 1 }
        close(cmd)
        split(line, sum, " ")
        sub(/"0+"/, "\"" sum[1] "\"")
        sub(/ *# filled by .*/, "")
      }
      { print }
      END { if (failed) exit 1 }
    ' "$root/hack/krew/agentrun.yaml"
  } > "$tmp" || { rm -f "$tmp"; die "could not write $dir/agentrun.yaml"; }
  mv "$tmp" "$dir/agentrun.yaml"
  echo "$dir/agentrun.yaml"
}

# tarball VERSION OS/ARCH DIR: the plugin's tarball of one platform, the
# static binary kubectl-agentrun and the LICENSE (krew wants it in the
# archive) at its top.
tarball() {
  local version=$1 os=${2%/*} arch=${2#*/} dir=$3 stage
  check_version "$version"
  stage=$(mktemp -d)
  # `kubectl agentrun version` prints the release's version and commit.
  (cd "$root" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -X github.com/agentrun-dev/agentrun/internal/version.Version=${version#v} -X github.com/agentrun-dev/agentrun/internal/version.Commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
    -o "$stage/kubectl-agentrun" ./cmd/kubectl-agentrun)
  cp "$root/LICENSE" "$stage/LICENSE"
  tar -C "$stage" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - LICENSE kubectl-agentrun |
    gzip -n -9 > "$dir/kubectl-agentrun_${version}_${os}_${arch}.tar.gz"
  rm -rf "$stage"
  echo "plugin-release: $dir/kubectl-agentrun_${version}_${os}_${arch}.tar.gz" >&2
}

build() {
  local version=$1 dist="$root/dist"
  check_version "$version"
  mkdir -p "$dist"
  for platform in $platforms; do
    tarball "$version" "$platform" "$dist"
  done
  manifest "$version" "$dist"
}

case "${1:-}" in
  manifest) [[ $# -eq 3 ]] || die "usage: hack/plugin-release.sh manifest VERSION DIR"; manifest "$2" "$3" ;;
  tarball) [[ $# -eq 4 ]] || die "usage: hack/plugin-release.sh tarball VERSION OS/ARCH DIR"; tarball "$2" "$3" "$4" ;;
  v*) [[ $# -eq 1 ]] || die "usage: hack/plugin-release.sh VERSION"; build "$1" ;;
  *) die "usage: hack/plugin-release.sh VERSION | manifest VERSION DIR | tarball VERSION OS/ARCH DIR" ;;
esac
