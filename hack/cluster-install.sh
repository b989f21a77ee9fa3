#!/usr/bin/env bash
# Installs (or upgrades) agentrun's operator with its Helm chart
# (charts/agentrun) on the cluster KUBECONFIG names; `make demo` and the
# end-to-end tests (test/e2e) both use it.
#
#   KUBECONFIG=... hack/cluster-install.sh
#
# On hack/cluster.sh's own cluster it first imports the manager and runner
# images built without Docker (hack/cluster-images.sh) and adds
# hack/cluster-values.yaml; the manager image's build key goes into a Pod
# annotation, so a rebuilt image under the same tag rolls the manager. On any
# other cluster (kind, for example) the images must already be on the nodes.
# HELM_VALUES names an extra values file.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${AGENTRUN_CLUSTER_CACHE:-$root/.cache/cluster}"
: "${KUBECONFIG:?set KUBECONFIG to the cluster to install on}"

log() { echo "install: $*" >&2; }

kubectl="$("$root/hack/envtest-assets.sh")/kubectl"
helm=$("$root/hack/k8s-tool.sh" helm)
args=()
if [ "$(realpath "$KUBECONFIG")" = "$(realpath -m "$cache/state/kubeconfig")" ]; then
  "$root/hack/cluster-images.sh" import manager runner
  args+=(-f "$root/hack/cluster-values.yaml"
    --set-string "podAnnotations.agentrun\.dev/image-key=$(cat "$cache/images/manager.tar.key")")
fi
if [ -n "${HELM_VALUES:-}" ]; then args+=(-f "$HELM_VALUES"); fi

# Helm installs a chart's CRDs only once; applying them first keeps a
# changed CRD current on a cluster that already has the release.
"$kubectl" apply --server-side --force-conflicts -f "$root/charts/agentrun/crds/" >&2
"$kubectl" wait --for=condition=Established crd/agentruns.agentrun.dev --timeout=60s >/dev/null
log "helm upgrade --install agentrun charts/agentrun --namespace agentrun-system"
if ! "$helm" upgrade --install agentrun "$root/charts/agentrun" --kubeconfig "$KUBECONFIG" \
  --namespace agentrun-system --create-namespace "${args[@]}" --wait --timeout 3m >&2; then
  "$kubectl" -n agentrun-system get pods -o wide >&2 || true
  "$kubectl" -n agentrun-system logs deploy/agentrun-manager --tail 50 >&2 || true
  log "the manager did not become ready"
  exit 1
fi
log "the manager is ready"
