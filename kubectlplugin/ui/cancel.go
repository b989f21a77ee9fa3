package ui

import (
	"context"
	"encoding/json"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// The ui's one write: stopping a run, the change the user could make
// with kubectl. It is the field of this build's AgentRun API, in one
// place: stopPatch and stopRequested.

// stopSpec is what a merge patch sets in the spec to stop a run
// gracefully (SIGINT to the CLI; partial usage and result kept; end
// status interrupted, reason Cancelled).
var stopSpec = map[string]any{"stop": string(v1alpha1.StopGraceful)}

// stopPatch is that merge patch, as kubectl takes it.
var stopPatch = mustJSON(map[string]any{"spec": stopSpec})

// stopRequested reports whether the run was asked to stop.
func stopRequested(run *v1alpha1.AgentRun) bool { return run.Spec.Stopped() }

// stopCommand is the kubectl command that does what the button does.
func stopCommand(ns, name string) string {
	return "kubectl -n " + shellWord(ns) + " patch agentrun " + shellWord(name) + ` --type merge -p '` + string(stopPatch) + `'`
}

// stopRun patches the run, as the user: the API server's RBAC and the
// CRD's rules (a stop cannot be undone) decide. The uid precondition
// stops a run of the same name made after the page was loaded.
func stopRun(ctx context.Context, c client.Client, ns, name string, uid types.UID) error {
	run := &v1alpha1.AgentRun{}
	run.Namespace, run.Name, run.UID = ns, name, uid
	patch := mustJSON(map[string]any{"metadata": map[string]any{"uid": uid}, "spec": stopSpec})
	return c.Patch(ctx, run, client.RawPatch(types.MergePatchType, patch))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
