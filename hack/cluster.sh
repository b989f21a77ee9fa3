#!/usr/bin/env bash
# A real single-node Kubernetes 1.34 on this machine, without Docker or
# systemd (docs/development.md, "The local cluster", says what it takes):
#
#   hack/cluster.sh up       start it (idempotent); prints the kubeconfig path
#   hack/cluster.sh down     stop it and leave the machine as it was found
#   hack/cluster.sh status   what runs; exit 0 when the node is Ready
#   hack/cluster.sh env      KUBECONFIG=... and PATH=... lines for `eval`
#
# Everything lives in the repository's ignored .cache/cluster (or
# AGENTRUN_CLUSTER_CACHE):
#   bin/<key>/   kube-controller-manager, kube-scheduler, kubelet, built through
#                hack/k8s-tools (kube-apiserver, kubectl, etcd come from
#                hack/envtest-assets.sh)
#   debs/, pkgs/ containerd 1.6.20, runc 1.1.5, CNI plugins 1.1.1: Debian
#                packages fetched with `apt-get download`, unpacked with
#                `dpkg-deb -x`, never installed
#   images/      the docker-archives of hack/cluster-images.sh
#   state/       certificates, kubeconfig, etcd data, containerd and kubelet
#                roots, logs, PIDs, the saved kernel settings
#
# Listeners: etcd, controller-manager, scheduler, the kubelet's healthz and
# containerd's streaming server on 127.0.0.1; the kube-apiserver and the
# kubelet's API on the node address 10.200.0.1 of the port-less bridge
# agentrun-node that `up` creates, reachable from this host and its Pods only.
# Pods get 10.201.0.0/24 on the CNI bridge agentrun-cni0 (gateway 10.201.0.1);
# they reach the host on 10.200.0.1. No kube-proxy: Service addresses do not
# route, so an in-cluster client (the manager) is pointed at the API server's
# own endpoint, 10.200.0.1:16443, by KUBERNETES_SERVICE_HOST/PORT
# (hack/cluster-values.yaml).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${AGENTRUN_CLUSTER_CACHE:-$root/.cache/cluster}"
state="$cache/state"
. "$root/hack/k8s-build.sh"

node_name=agentrun-node
node_bridge=agentrun-node
node_ip=10.200.0.1
cni_bridge=agentrun-cni0
pod_cidr=10.201.0.0/24
service_cidr=10.202.0.0/24
etcd_port=23790
etcd_peer_port=23800
api_port=16443
kcm_port=10257
sched_port=10259
kubelet_port=10250
kubelet_healthz_port=10248
pause_image=docker.io/library/agentrun-pause:dev

# Kernel settings the CNI bridge plugin and the kubelet change.
sysctls=(net.ipv4.ip_forward kernel.panic kernel.panic_on_oops vm.overcommit_memory
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
# Paths the components write outside the state dir whatever their flags.
outside=(/var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /run/containerd
  /run/netns /var/run/netns /etc/cni /opt/cni /opt/containerd)

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }

pkgs="$cache/pkgs"
kubectl_bin() { echo "$(k8s_assets)/kubectl"; }
k8s_assets() { "$root/hack/envtest-assets.sh"; }
ctr_cmd() { "$pkgs/usr/bin/ctr" --address "$state/containerd/containerd.sock" "$@"; }
kc() { "$(kubectl_bin)" --kubeconfig "$state/kubeconfig" "$@"; }

# ---------------------------------------------------------------- binaries
node_binaries() {
  local key out tmp start
  key=$(k8s_key)
  out="$cache/bin/$key"
  if [ -x "$out/kubelet" ] && [ -x "$out/kube-scheduler" ] && [ -x "$out/kube-controller-manager" ]; then
    echo "$out"; return
  fi
  mkdir -p "$cache/bin"
  exec 8>"$cache/bin/.lock"
  flock 8
  if [ ! -x "$out/kubelet" ] || [ ! -x "$out/kube-scheduler" ] || [ ! -x "$out/kube-controller-manager" ]; then
    tmp="$cache/bin/.tmp-$key"
    rm -rf "$tmp"; mkdir -p "$tmp"
    start=$(date +%s)
    log "building kube-controller-manager, kube-scheduler, kubelet $k8s_version (about 10 min cold on 2 cores)"
    k8s_build "$tmp" k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet >&2
    rm -rf "$out"; mv "$tmp" "$out"
    # Binaries of older pins are never used again.
    find "$cache/bin" -mindepth 1 -maxdepth 1 -type d -name 'v*' ! -name "$key" -exec rm -rf {} +
    log "built in $(( $(date +%s) - start ))s into $out"
  fi
  exec 8>&-
  echo "$out"
}

runtime_packages() {
  [ -x "$pkgs/usr/bin/containerd" ] && [ -x "$pkgs/usr/sbin/runc" ] && [ -x "$pkgs/usr/lib/cni/bridge" ] && return
  mkdir -p "$cache/debs"
  log "fetching containerd, runc, containernetworking-plugins from Debian (apt-get download)"
  (cd "$cache/debs" && apt-get download containerd runc containernetworking-plugins >&2 2>/dev/null) ||
    (cd "$cache/debs" && apt-get download containerd runc containernetworking-plugins >&2)
  rm -rf "$pkgs.tmp"; mkdir -p "$pkgs.tmp"
  local d
  for d in "$cache"/debs/*.deb; do dpkg-deb -x "$d" "$pkgs.tmp"; done
  rm -rf "$pkgs"; mv "$pkgs.tmp" "$pkgs"
}

# ---------------------------------------------------------------- certificates
pki() {
  local p="$state/pki"
  # done-2: the controller manager's own certificate was added.
  [ -f "$p/done-2" ] && return
  rm -rf "$p"; mkdir -p "$p"
  log "certificates (openssl)"
  (
    cd "$p"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
      -subj "/CN=agentrun-test-ca" 2>/dev/null
    cert() { # name subject [extfile]
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" \
        -days 3650 ${3:+-extfile "$3"} 2>/dev/null
      rm -f "$1.csr"
    }
    printf 'subjectAltName=IP:127.0.0.1,IP:%s,IP:10.202.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n' "$node_ip" >apiserver.ext
    cert apiserver "/CN=kube-apiserver" apiserver.ext
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    cert admin "/O=system:masters/CN=agentrun-admin" client.ext
    cert kubelet "/O=system:nodes/CN=system:node:$node_name" client.ext
    # The controller manager as itself, its controllers with their own
    # service accounts (--use-service-account-credentials), as on real
    # clusters: admission can tell the Job controller from a user.
    cert controller-manager "/CN=system:kube-controller-manager" client.ext
    printf 'subjectAltName=IP:%s,DNS:%s\nextendedKeyUsage=serverAuth\n' "$node_ip" "$node_name" >kubelet-serving.ext
    cert kubelet-serving "/CN=$node_name" kubelet-serving.ext
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    touch done-2
  )
}

kubeconfig() { # file user
  local p="$state/pki"
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: agentrun
  cluster:
    server: https://$node_ip:$api_port
    certificate-authority: $p/ca.crt
users:
- name: $2
  user:
    client-certificate: $p/$2.crt
    client-key: $p/$2.key
contexts:
- name: agentrun
  context: {cluster: agentrun, user: $2}
current-context: agentrun
EOF
}

# ---------------------------------------------------------------- processes
pidfile() { echo "$state/pids/$1"; }
running() {
  local f; f=$(pidfile "$1")
  [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}
start() { # name command...
  local name=$1; shift
  if running "$name"; then return; fi
  mkdir -p "$state/pids" "$state/logs"
  setsid "$@" >>"$state/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$(pidfile "$name")"
}
wait_for() { # what seconds command...
  local what=$1 secs=$2; shift 2
  local i
  for ((i = 0; i < secs * 5; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  die "$what not ready after ${secs}s (logs in $state/logs)"
}
stop() { # name
  local f pid i; f=$(pidfile "$1")
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# ---------------------------------------------------------------- host state
save_host() {
  [ -f "$state/host/saved" ] && return
  mkdir -p "$state/host"
  local s p
  for s in "${sysctls[@]}"; do
    [ -e "/proc/sys/${s//.//}" ] && echo "$s=$(cat "/proc/sys/${s//.//}")"
  done >"$state/host/sysctl"
  for p in "${outside[@]}"; do
    [ -e "$p" ] || [ -L "$p" ] || echo "$p"
  done >"$state/host/absent"
  touch "$state/host/saved"
}

network() {
  if ! ip link show "$node_bridge" >/dev/null 2>&1; then
    ip link add "$node_bridge" type bridge
  fi
  ip addr show dev "$node_bridge" | grep -q "inet $node_ip/" || ip addr add "$node_ip/32" dev "$node_bridge"
  ip link set "$node_bridge" up
}

configs() {
  local c="$state/containerd"
  mkdir -p "$c" "$state/cni/net.d" "$state/cni/ipam" "$state/cni/cache" "$state/kubelet" "$state/pod-logs"
  cat >"$c/config.toml" <<EOF
version = 2
root = "$c/root"
state = "$c/state"
[grpc]
  address = "$c/containerd.sock"
[ttrpc]
  address = ""
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$pkgs/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$pkgs/usr/lib/cni"
    conf_dir = "$state/cni/net.d"
EOF
  cat >"$state/cni/net.d/10-agentrun.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "agentrun",
  "plugins": [
    {"type": "bridge", "bridge": "$cni_bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$state/cni/ipam", "ranges": [[{"subnet": "$pod_cidr"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "loopback"}
  ]
}
EOF
  cat >"$state/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz_port
tlsCertFile: $state/pki/kubelet-serving.crt
tlsPrivateKeyFile: $state/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $state/pki/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$c/containerd.sock
podLogsDir: $state/pod-logs
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "0%", imagefs.available: "0%", nodefs.inodesFree: "0%"}
serializeImagePulls: false
resolvConf: /etc/resolv.conf
EOF
}

# ---------------------------------------------------------------- up
up() {
  local assets nodebin
  command -v openssl >/dev/null || die "openssl is missing (apt-get install openssl)"
  [ "$(id -u)" = 0 ] || die "must run as root (kubelet, containerd, mounts)"
  assets=$(k8s_assets)
  nodebin=$(node_binaries)
  runtime_packages
  mkdir -p "$state"
  save_host
  pki
  kubeconfig "$state/kubeconfig" admin
  kubeconfig "$state/kubelet.kubeconfig" kubelet
  kubeconfig "$state/controller-manager.kubeconfig" controller-manager
  network
  configs
  export PATH="$pkgs/usr/bin:$pkgs/usr/sbin:$PATH"

  start etcd "$assets/etcd" --name agentrun --data-dir "$state/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "agentrun=http://127.0.0.1:$etcd_peer_port" --log-level warn
  start containerd "$pkgs/usr/bin/containerd" --config "$state/containerd/config.toml"
  local p="$state/pki"
  start kube-apiserver "$assets/kube-apiserver" \
    --bind-address "$node_ip" --secure-port "$api_port" --advertise-address "$node_ip" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --client-ca-file "$p/ca.crt" --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
    --service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range "$service_cidr" --authorization-mode Node,RBAC \
    --kubelet-client-certificate "$p/admin.crt" --kubelet-client-key "$p/admin.key" \
    --kubelet-preferred-address-types InternalIP --allow-privileged=true \
    --profiling=false
  wait_for "etcd" 30 curl -sf "http://127.0.0.1:$etcd_port/health"
  wait_for "kube-apiserver" 90 "$assets/kubectl" --kubeconfig "$state/kubeconfig" get --raw /readyz
  start kube-controller-manager "$nodebin/kube-controller-manager" \
    --kubeconfig "$state/controller-manager.kubeconfig" --authentication-kubeconfig "$state/kubeconfig" \
    --authorization-kubeconfig "$state/kubeconfig" --bind-address 127.0.0.1 --secure-port "$kcm_port" \
    --leader-elect=false --service-account-private-key-file "$p/sa.key" --root-ca-file "$p/ca.crt" \
    --use-service-account-credentials=true --cluster-signing-cert-file "$p/ca.crt" \
    --cluster-signing-key-file "$p/ca.key" --controllers '*,-nodeipam' --profiling=false
  start kube-scheduler "$nodebin/kube-scheduler" --kubeconfig "$state/kubeconfig" \
    --authentication-kubeconfig "$state/kubeconfig" --authorization-kubeconfig "$state/kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$sched_port" --leader-elect=false --profiling=false
  wait_for "containerd" 30 ctr_cmd version
  import_pause
  start kubelet "$nodebin/kubelet" --config "$state/kubelet-config.yaml" \
    --kubeconfig "$state/kubelet.kubeconfig" --root-dir "$state/kubelet" \
    --hostname-override "$node_name" --node-ip "$node_ip"
  wait_for "node $node_name Ready" 90 sh -c "'$assets/kubectl' --kubeconfig '$state/kubeconfig' get node $node_name -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
  # Give the node its pod CIDR for tools that read it (nodeipam is off).
  kc patch node "$node_name" --type merge -p "{\"spec\":{\"podCIDR\":\"$pod_cidr\",\"podCIDRs\":[\"$pod_cidr\"]}}" >/dev/null 2>&1 || true
  wait_for "default ServiceAccount" 30 kc get serviceaccount default
  log "up: node $node_name Ready; KUBECONFIG=$state/kubeconfig"
  echo "$state/kubeconfig"
}

import_pause() {
  # Listed first: under pipefail, grep -q closing the pipe early would
  # fail the check.
  local images
  images=$(ctr_cmd -n k8s.io images ls -q)
  if grep -qx "$pause_image" <<<"$images"; then return; fi
  "$root/hack/cluster-images.sh" pause >/dev/null
  ctr_cmd -n k8s.io images import "$cache/images/pause.tar" >&2
}

# ---------------------------------------------------------------- down
kill_cgroup_procs() {
  local d pid
  for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [ -d "$d" ] || continue
    # A cgroup may vanish while we read: ignore read errors.
    { find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null || true; } | while read -r pid; do
      kill -KILL "$pid" 2>/dev/null || true
    done
  done
  return 0
}

# The runc shims of our containerd: they outlive it and hold the containers.
shim_pids() {
  local f pid
  for f in /proc/[0-9]*/cmdline; do
    pid=${f#/proc/}; pid=${pid%/cmdline}
    if tr '\0' ' ' 2>/dev/null <"$f" | grep -q "^$pkgs/usr/bin/containerd-shim.* -address $state/containerd/containerd.sock"; then
      echo "$pid"
    fi
  done
}

unmount_under() { # dir...
  local d m
  for d in "$@"; do
    findmnt -rn -o TARGET | awk -v d="$d" 'index($0, d) == 1' | sort -r | while read -r m; do
      m=$(printf '%b' "$m")
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
    done
  done
}

remove_cgroups() {
  local d
  for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [ -d "$d" ] && log "cgroup $d still there (processes left?)"
  done
  return 0
}

down() {
  local pid i name
  [ -d "$state" ] || { log "down: nothing to do"; return 0; }
  # Clean as much as possible even when one step fails; check at the end.
  set +e
  # Stop the node first, so nothing restarts the containers.
  stop kubelet
  for name in kube-scheduler kube-controller-manager kube-apiserver; do stop "$name"; done
  kill_cgroup_procs
  for pid in $(shim_pids); do kill -KILL "$pid" 2>/dev/null || true; done
  stop containerd
  stop etcd
  for i in 1 2 3; do kill_cgroup_procs; [ -z "$(shim_pids)" ] && break; sleep 0.5; done
  for pid in $(shim_pids); do kill -KILL "$pid" 2>/dev/null || true; done
  # Network namespaces containerd pinned, then everything mounted under our paths.
  local nsdirs=()
  for i in /run/netns /var/run/netns; do [ -d "$i" ] && nsdirs+=("$i/cni-"); done
  # findmnt names mounts by the resolved path: .cache may be a link (a
  # worktree's to the main checkout's).
  local real
  real=$(realpath -m "$state")
  unmount_under "${nsdirs[@]}" "$real/" /run/containerd/ /var/lib/kubelet/
  rm -f /run/netns/cni-* 2>/dev/null || true
  remove_cgroups
  ip link show "$cni_bridge" >/dev/null 2>&1 && ip link del "$cni_bridge"
  ip link show "$node_bridge" >/dev/null 2>&1 && ip link del "$node_bridge"
  # veths of Pods whose netns went away disappear with it; remove strays.
  if [ -f "$state/host/absent" ]; then
    while read -r p; do [ -n "$p" ] && rm -rf "$p"; done <"$state/host/absent"
  fi
  if [ -f "$state/host/sysctl" ]; then
    while IFS== read -r k v; do sysctl -qw "$k=$v" >/dev/null || log "could not restore $k"; done <"$state/host/sysctl"
  fi
  local left=()
  [ -n "$(shim_pids)" ] && left+=("containerd shims")
  for name in etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    running "$name" && left+=("$name")
  done
  ip link show "$node_bridge" >/dev/null 2>&1 && left+=("link $node_bridge")
  ip link show "$cni_bridge" >/dev/null 2>&1 && left+=("link $cni_bridge")
  for i in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do [ -d "$i" ] && left+=("$i"); done
  grep -q "^$real/" <<<"$(findmnt -rn -o TARGET)" && left+=("mounts under $real")
  if [ ${#left[@]} -gt 0 ]; then
    log "down: left behind: ${left[*]} (run down again; state kept in $state)"
    return 1
  fi
  rm -rf "$state"
  log "down: stopped and cleaned"
}

status() {
  local name ok=0
  for name in etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    if running "$name"; then echo "$name: running (pid $(cat "$(pidfile "$name")"))"; else echo "$name: stopped"; ok=1; fi
  done
  if [ "$ok" = 0 ]; then
    kc get nodes -o wide || ok=1
  fi
  return "$ok"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  env) echo "export KUBECONFIG=$state/kubeconfig"; echo "export PATH=$(dirname "$(kubectl_bin)"):$pkgs/usr/bin:\$PATH" ;;
  *) echo "usage: $0 up|down|status|env" >&2; exit 2 ;;
esac
