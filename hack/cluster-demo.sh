#!/usr/bin/env bash
# `make demo` / `make demo-down`: one AgentRun on a real Kubernetes.
#
#   hack/cluster-demo.sh up     cluster (hack/cluster.sh up, unless KUBECONFIG
#                               is set); the operator installed with the Helm
#                               chart (hack/cluster-install.sh); the
#                               mock model on the node bridge address; a
#                               Secret with a dummy key; the sample AgentRun
#                               applied and waited for; prints it as YAML
#   hack/cluster-demo.sh manifest  prints the AgentRun that `up` applies
#                               (controllers/crd_test.go validates it)
#   hack/cluster-demo.sh down   stops the mock model, deletes the demo objects,
#                               the release (if `up` installed it) and the
#                               cluster (if `up` started it)
#
# With KUBECONFIG set the cluster is yours (kind, for example): images are not
# imported, so agentrun-manager and agentrun-runner, tagged with the chart's
# appVersion (0.1.0), must already be on the nodes (`kind load docker-image
# ...`); HELM_VALUES names an extra values file; the mock model must be
# reachable from the Pods at MOCK_HOST_IP (default 10.200.0.1, the node
# bridge of hack/cluster.sh).
# With ANTHROPIC_API_KEY set the run talks to the real model instead of the
# mock; the run may reach api.anthropic.com:443 only.
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

# agentrun_manifest prints the demo AgentRun: against the mock model, or
# against Anthropic's API when ANTHROPIC_API_KEY is set.
agentrun_manifest() {
  if [ -n "${ANTHROPIC_API_KEY:-}" ]; then
    cat <<EOF
apiVersion: agentrun.dev/v1alpha1
kind: AgentRun
metadata:
  name: $name
spec:
  runtime: claude-code
  model: ${DEMO_MODEL:-sonnet}
  prompt:
    text: "List the files in the workspace with ls, then say in one sentence what you found."
  credentials:
    - name: ANTHROPIC_API_KEY
      valueFrom:
        secretKeyRef: {name: agent-keys, key: anthropic}
      hosts: [api.anthropic.com:443]
  timeout: 5m
  limits:
    maxTurns: 5
  network:
    mode: Custom
    allowHosts:
      - api.anthropic.com:443
EOF
    return
  fi
  cat <<EOF
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
    - name: CLAUDE_CODE_MAX_RETRIES
      value: "1"
  credentials:
    - name: ANTHROPIC_API_KEY
      valueFrom:
        secretKeyRef: {name: agent-keys, key: anthropic}
      # The mock speaks plain HTTP: only a host declared http:// gets the
      # key unencrypted (docs/credentials.md).
      hosts: [http://mock-model.test:$mock_port]
  timeout: 5m
  network:
    mode: Custom
    addHosts:
      - {name: mock-model.test, ip: "$host_ip"}
    allowHosts:
      - mock-model.test:$mock_port
      - $host_ip:$mock_port
EOF
}

# start_mock runs the loopback-only mock model and shows it to the Pods on
# the node bridge address through hack/images/forward.
start_mock() {
  (cd "$root" && go build -o "$demo/mockmodel" ./cmd/mockmodel && cd hack/images && go build -o "$demo/forward" ./forward)
  if { [ -f "$demo/mockmodel.pid" ] && kill -0 "$(cat "$demo/mockmodel.pid")" 2>/dev/null; }; then
    return
  fi
  : >"$demo/mock.url"
  # The mock answers only calls with the demo's key, which only the
  # runner holds: the agent has a stand-in (spec.credentials).
  # --request-log: each request with its receive time (hack/bench-start.sh).
  DEMO_KEY=$1 setsid "$demo/mockmodel" --addr 127.0.0.1:0 --api-key-env DEMO_KEY --request-log "$demo/requests.jsonl" >"$demo/mock.url" 2>"$demo/mockmodel.log" </dev/null &
  echo $! >"$demo/mockmodel.pid"
  for _ in $(seq 50); do [ -s "$demo/mock.url" ] && break; sleep 0.1; done
  stop_pid "$demo/forward.pid"
  setsid "$demo/forward" "$host_ip:$mock_port" "$(head -1 "$demo/mock.url" | sed 's|^http://||')" \
    >"$demo/forward.log" 2>&1 </dev/null &
  echo $! >"$demo/forward.pid"
}

up() {
  local t0 t1 key=mock-key
  t0=$(date +%s)
  mkdir -p "$demo"
  if [ -z "${KUBECONFIG:-}" ]; then
    KUBECONFIG=$("$root/hack/cluster.sh" up)
    echo "$KUBECONFIG" >"$demo/started-cluster"
  fi
  export KUBECONFIG
  kubectl="$("$root/hack/envtest-assets.sh")/kubectl"
  echo "$kubectl" >"$demo/kubectl"

  # The release is ours to remove at `down` only if this demo installed it.
  if [ ! -f "$demo/installed-release" ] &&
    ! "$("$root/hack/k8s-tool.sh" helm)" status agentrun -n agentrun-system --kubeconfig "$KUBECONFIG" >/dev/null 2>&1; then
    touch "$demo/installed-release"
  fi
  "$root/hack/cluster-install.sh"
  if [ -n "${ANTHROPIC_API_KEY:-}" ]; then
    key=$ANTHROPIC_API_KEY
  else
    start_mock "$key"
  fi
  "$kubectl" delete agentrun "$name" --ignore-not-found --wait=true >/dev/null
  # The key goes through a pipe (printf is a builtin), never into a
  # process's arguments.
  printf '%s' "$key" | "$kubectl" create secret generic agent-keys --from-file=anthropic=/dev/stdin \
    --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
  agentrun_manifest | "$kubectl" apply -f - >&2
  t1=$(date +%s)
  log "waiting for agentrun/$name to finish"
  if ! "$kubectl" wait --for=condition=Succeeded "agentrun/$name" --timeout=300s >&2; then
    "$kubectl" get agentrun "$name" -o yaml
    "$kubectl" get pods -o wide >&2 || true
    "$kubectl" -n agentrun-system logs deploy/agentrun-manager --tail 30 >&2 || true
    log "agentrun/$name did not succeed"
    exit 1
  fi
  "$kubectl" get agentrun "$name" -o yaml
  log "Succeeded $(($(date +%s) - t1))s after apply; demo done in $(($(date +%s) - t0))s (make demo-down stops it)"
}

down() {
  local kubectl helm
  stop_pid "$demo/forward.pid"
  stop_pid "$demo/mockmodel.pid"
  if [ -f "$demo/started-cluster" ]; then
    "$root/hack/cluster.sh" down
  elif [ -n "${KUBECONFIG:-}" ] && [ -f "$demo/kubectl" ]; then
    kubectl=$(cat "$demo/kubectl")
    "$kubectl" delete agentrun "$name" --ignore-not-found >&2 || true
    "$kubectl" delete secret agent-keys --ignore-not-found >&2 || true
    if [ -f "$demo/installed-release" ]; then
      helm=$("$root/hack/k8s-tool.sh" helm)
      "$helm" uninstall agentrun --namespace agentrun-system --kubeconfig "$KUBECONFIG" >&2 || true
    fi
  fi
  rm -rf "$demo"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  manifest) agentrun_manifest ;;
  *) echo "usage: $0 up|down|manifest" >&2; exit 2 ;;
esac
