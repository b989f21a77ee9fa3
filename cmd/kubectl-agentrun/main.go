// Command kubectl-agentrun is the kubectl plugin for AgentRuns: copied
// onto PATH (or installed with krew, hack/krew/agentrun.yaml) it is
// `kubectl agentrun get|logs|usage|run|ui`. The verbs are in package kubectlplugin.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentrun-dev/agentrun/kubectlplugin"
)

func main() {
	// controller-runtime's client logs through its own logger, and prints
	// a warning with a stack trace when none is set within 30 s, which a
	// followed run outlives. The plugin tells the user what matters
	// itself (API warnings go to stderr as kubectl writes them).
	ctrllog.SetLogger(logr.Discard())
	// Ctrl-C stops following; the run itself goes on.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := kubectlplugin.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}.Main(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
