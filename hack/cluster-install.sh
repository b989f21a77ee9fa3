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
  # The kubelet's --root-dir is in the cluster's state directory: the
  # node profile DaemonSet writes the seccomp profile there.
  args+=(-f "$root/hack/cluster-values.yaml" --set "sandboxProfiles.kubeletRootDir=$cache/state/kubelet"
    --set-string "podAnnotations.agentrun\.dev/image-key=$(cat "$cache/images/manager.tar.key")")
fi
if [ -n "${HELM_VALUES:-}" ]; then args+=(-f "$HELM_VALUES"); fi

# The chart installs and upgrades the CRD (templates/crd.yaml). A CRD that
# an older chart installed from crds/, or that was applied by hand, is not
# the release's: adopt it first, as docs/kubernetes/install.md tells users to.
if "$kubectl" get crd agentruns.agentrun.dev >/dev/null 2>&1 &&
  [ "$("$kubectl" get crd agentruns.agentrun.dev -o 'jsonpath={.metadata.annotations.meta\.helm\.sh/release-name}')" != agentrun ]; then
  log "adopting the existing AgentRun CRD into the release"
  "$kubectl" label --overwrite crd agentruns.agentrun.dev app.kubernetes.io/managed-by=Helm >&2
  "$kubectl" annotate --overwrite crd agentruns.agentrun.dev \
    meta.helm.sh/release-name=agentrun meta.helm.sh/release-namespace=agentrun-system >&2
fi
# Helm installs the chart's crds/ (the AgentRunPolicy CRD) on the first
# install only; an upgrade applies them first, as docs/kubernetes/install.md
# tells users to.
if "$helm" status agentrun -n agentrun-system --kubeconfig "$KUBECONFIG" >/dev/null 2>&1; then
  log "kubectl apply --server-side --force-conflicts -f charts/agentrun/crds/ (an upgrade)"
  "$kubectl" apply --server-side --force-conflicts -f "$root/charts/agentrun/crds/" >&2
fi
log "helm upgrade --install agentrun charts/agentrun --namespace agentrun-system"
if ! "$helm" upgrade --install agentrun "$root/charts/agentrun" --kubeconfig "$KUBECONFIG" \
  --namespace agentrun-system --create-namespace "${args[@]}" --wait --timeout 3m >&2; then
  "$kubectl" -n agentrun-system get pods -o wide >&2 || true
  "$kubectl" -n agentrun-system logs deploy/agentrun-manager --tail 50 >&2 || true
  log "the manager did not become ready"
  exit 1
fi
log "the manager is ready"
