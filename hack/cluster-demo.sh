#!/usr/bin/env bash
# `make demo` / `make demo-down`: one AgentRun on a real Kubernetes.
#
#   hack/cluster-demo.sh up     cluster (hack/cluster.sh up, unless KUBECONFIG
#                               is set), images imported, CRD installed, the
#                               manager started outside the cluster with the
#                               kubeconfig (no kube-proxy here), the mock model
#                               on the node bridge address, a Secret with a
#                               dummy key, the sample AgentRun applied and
#                               waited for; prints it as YAML
#   hack/cluster-demo.sh down   stops the manager and the mock model, deletes
#                               the demo objects, and (if `up` started it) the
#                               cluster
#
# With KUBECONFIG set the cluster is yours: images are not imported (the
# runner image must already be on the nodes as agentrun-runner:dev) and the
# mock model must be reachable from the Pods at MOCK_HOST_IP (default the
# node bridge address 10.200.0.1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${AGENTRUN_CLUSTER_CACHE:-$root/.cache/cluster}"
demo="$cache/demo"
name=${DEMO_NAME:-demo}
scenario=${DEMO_SCENARIO:-parallel}
host_ip=${MOCK_HOST_IP:-10.200.0.1}
mock_port=${MOCK_PORT:-18080}

log() { echo "demo: $*" >&2; }

stop_pid() { # file
  local pid i
  [ -f "$1" ] || return 0
  pid=$(cat "$1")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

up() {
  local t0 kubectl
  t0=$(date +%s)
  mkdir -p "$demo"
  if [ -z "${KUBECONFIG:-}" ]; then
    KUBECONFIG=$("$root/hack/cluster.sh" up)
    echo "$KUBECONFIG" >"$demo/started-cluster"
    "$root/hack/cluster-images.sh" import manager runner
  fi
  export KUBECONFIG
  kubectl="$("$root/hack/envtest-assets.sh")/kubectl"
  echo "$kubectl" >"$demo/kubectl"

  (cd "$root" && go build -o "$demo/manager" ./cmd/manager && go build -o "$demo/mockmodel" ./cmd/mockmodel &&
    cd hack/images && go build -o "$demo/forward" ./forward)

  "$kubectl" apply -f "$root/config/crd/bases/" >&2
  "$kubectl" wait --for=condition=Established crd/agentruns.agentrun.dev --timeout=60s >/dev/null

  # The mock model listens on loopback only; forward shows it to the Pods.
  if ! { [ -f "$demo/mockmodel.pid" ] && kill -0 "$(cat "$demo/mockmodel.pid")" 2>/dev/null; }; then
    : >"$demo/mock.url"
    setsid "$demo/mockmodel" --addr 127.0.0.1:0 >"$demo/mock.url" 2>"$demo/mockmodel.log" </dev/null &
    echo $! >"$demo/mockmodel.pid"
    for _ in $(seq 50); do [ -s "$demo/mock.url" ] && break; sleep 0.1; done
    stop_pid "$demo/forward.pid"
    setsid "$demo/forward" "$host_ip:$mock_port" "$(head -1 "$demo/mock.url" | sed 's|^http://||')" \
      >"$demo/forward.log" 2>&1 </dev/null &
    echo $! >"$demo/forward.pid"
  fi
  if ! { [ -f "$demo/manager.pid" ] && kill -0 "$(cat "$demo/manager.pid")" 2>/dev/null; }; then
    setsid "$demo/manager" --metrics-bind-address 0 --health-probe-bind-address 127.0.0.1:0 \
      --runner-image agentrun-runner:dev --runner-image-pull-policy IfNotPresent \
      >"$demo/manager.log" 2>&1 </dev/null &
    echo $! >"$demo/manager.pid"
  fi

  "$kubectl" delete agentrun "$name" --ignore-not-found --wait=true >/dev/null
  "$kubectl" create secret generic agent-keys --from-literal=anthropic=mock-key \
    --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
  "$kubectl" apply -f - >&2 <<EOF
apiVersion: agentrun.dev/v1alpha1
kind: AgentRun
metadata:
  name: $name
spec:
  runtime: claude-code
  model: sonnet
  prompt:
    text: "Please run the demo. scenario:$scenario"
  env:
    - name: ANTHROPIC_BASE_URL
      value: http://mock-model.test:$mock_port
    - name: ANTHROPIC_API_KEY
      valueFrom:
        secretKeyRef: {name: agent-keys, key: anthropic}
    - name: CLAUDE_CODE_MAX_RETRIES
      value: "1"
  timeout: 5m
  network:
    mode: custom
    addHosts:
      - {name: mock-model.test, ip: "$host_ip"}
    allowHosts:
      - mock-model.test:$mock_port
      - $host_ip:$mock_port
EOF
  log "waiting for agentrun/$name to succeed"
  if ! "$kubectl" wait --for=condition=Succeeded "agentrun/$name" --timeout=300s >&2; then
    "$kubectl" get agentrun "$name" -o yaml
    "$kubectl" get pods -o wide >&2 || true
    log "agentrun/$name did not succeed; manager log: $demo/manager.log"
    exit 1
  fi
  "$kubectl" get agentrun "$name" -o yaml
  log "done in $(( $(date +%s) - t0 ))s (hack/cluster-demo.sh down, or make demo-down, to stop)"
}

down() {
  local kubectl
  stop_pid "$demo/manager.pid"
  stop_pid "$demo/forward.pid"
  stop_pid "$demo/mockmodel.pid"
  if [ -f "$demo/started-cluster" ]; then
    "$root/hack/cluster.sh" down
  elif [ -n "${KUBECONFIG:-}" ] && [ -f "$demo/kubectl" ]; then
    kubectl=$(cat "$demo/kubectl")
    "$kubectl" delete agentrun "$name" --ignore-not-found >&2 || true
    "$kubectl" delete secret agent-keys --ignore-not-found >&2 || true
  fi
  rm -rf "$demo"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
