package kubectlplugin

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrun-dev/agentrun/harvest"
)

const releaseSynopsis = "kubectl agentrun release [-n NS | -A]"

// releaseCmd removes the harvest finalizer from the agent Pods of a
// namespace (or all) with the user's own credentials: the recovery when no
// manager will (uninstalled without its pre-delete hook, its namespace
// deleted, crash-looping), so that Terminating Pods, a namespace being
// deleted and AgentRuns deleted in the foreground can go. What a released
// Pod has not handed over yet (the run's end) is lost with it once it is
// deleted; a manager that comes back still harvests a Pod that is there.
func releaseCmd(ctx context.Context, e *Env, fs *pflag.FlagSet, kf *kubeFlags, args []string) int {
	all := fs.BoolP("all-namespaces", "A", false, "release the agent Pods of every namespace")
	if code, done := parse(e, fs, kf, args, releaseSynopsis); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, fs, "unexpected argument %q: release takes only flags", fs.Arg(0))
	}
	k, err := kf.connect(e)
	if err != nil {
		return fail(e, fs, err)
	}
	ns := k.ns
	if *all {
		ns = metav1.NamespaceAll
	}
	released, err := harvest.Release(ctx, k.c, ns)
	for _, p := range released {
		fmt.Fprintf(e.Stdout, "pod/%s released (namespace %s)\n", p.Name, p.Namespace)
	}
	if err != nil {
		return fail(e, fs, err)
	}
	if len(released) == 0 {
		fmt.Fprintln(e.Stderr, "No agent Pod holds the "+harvest.Finalizer+" finalizer"+where(ns)+".")
	}
	return 0
}

func where(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}
