#!/usr/bin/env bash
# Regenerates everything controller-gen derives from the Go markers:
#   api/v1alpha1/zz_generated.deepcopy.go   (make generate)
#   config/crd/bases/agentrun.dev_agentruns.yaml,
#   config/crd/bases/agentrun.dev_agentrunpolicies.yaml,
#   config/crd/bases/agentrun.dev_agentbudgets.yaml, config/rbac/role.yaml,
#   charts/agentrun/files/agentrun.dev_agentruns.yaml,
#   charts/agentrun/files/agentrun.dev_agentbudgets.yaml,
#   charts/agentrun/files/manager-role.yaml (copies for the Helm chart's
#   templates), charts/agentrun/crds/agentrun.dev_agentrunpolicies.yaml (the
#   chart installs it from crds/: see TestPolicyCRDIsInCRDsDir) and
#   charts/agentrun/files/admission-policy.yaml (a copy of the hand-written
#   config/policy/admission_policy.yaml)      (make manifests)
# Usage: hack/k8s-generate.sh [generate|manifests|all] [OUTDIR]
# With OUTDIR the files are written below OUTDIR instead of the repository
# (the staleness test compares the two).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-all}
out=${2:-$root}
cg=$("$root/hack/k8s-tool.sh" controller-gen)
cd "$root"
header=hack/k8s-boilerplate.go.txt

if [ "$what" = generate ] || [ "$what" = all ]; then
  mkdir -p "$out/api/v1alpha1"
  "$cg" object:headerFile="$header" paths=./api/... output:object:dir="$out/api/v1alpha1"
fi
if [ "$what" = manifests ] || [ "$what" = all ]; then
  mkdir -p "$out/config/crd/bases" "$out/config/rbac" "$out/charts/agentrun/files" "$out/charts/agentrun/crds"
  "$cg" crd paths=./api/... output:crd:dir="$out/config/crd/bases"
  "$cg" rbac:roleName=agentrun-manager paths=./controllers/... output:rbac:dir="$out/config/rbac"
  cp "$out/config/crd/bases/agentrun.dev_agentruns.yaml" "$out/charts/agentrun/files/agentrun.dev_agentruns.yaml"
  cp "$out/config/crd/bases/agentrun.dev_agentbudgets.yaml" "$out/charts/agentrun/files/agentrun.dev_agentbudgets.yaml"
  cp "$out/config/crd/bases/agentrun.dev_agentrunpolicies.yaml" "$out/charts/agentrun/crds/agentrun.dev_agentrunpolicies.yaml"
  cp "$out/config/rbac/role.yaml" "$out/charts/agentrun/files/manager-role.yaml"
  cp "$root/config/policy/admission_policy.yaml" "$out/charts/agentrun/files/admission-policy.yaml"
fi
