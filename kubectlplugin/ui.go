package kubectlplugin

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/agentrun-dev/agentrun/kubectlplugin/ui"
)

// uiCmd serves the web view of kubectlplugin/ui on the loopback address,
// with the user's kubeconfig, until Ctrl-C.
func uiCmd(ctx context.Context, e *Env, fs *pflag.FlagSet, kf *kubeFlags, args []string) int {
	all := fs.BoolP("all-namespaces", "A", false, "show the runs of every namespace")
	port := fs.Int("port", 0, "the port to listen on (0: any free port)")
	address := fs.String("address", "127.0.0.1", "the loopback address to listen on")
	noOpen := fs.Bool("no-open", false, "print the URL only; do not open a browser")
	traceURL := fs.String("trace-url", "", "link a run's trace: a URL in which {traceID} is replaced by status.traceID (https://tempo.example/trace/{traceID})")
	if code, done := parse(e, fs, kf, args, "kubectl agentrun ui [-n NS | -A] [--port P] [--address 127.0.0.1] [--no-open] [--trace-url URL]"); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, fs, "unexpected argument %q: ui takes only flags", fs.Arg(0))
	}
	if _, err := ui.ListenAddress(*address, *port); err != nil {
		return usageError(e, fs, "%v", err)
	}
	k, err := kf.connect(e)
	if err != nil {
		return fail(e, fs, err)
	}
	ns := k.ns
	if *all {
		ns = ""
	}
	err = ui.Run(ctx, ui.Options{Config: k.cfg, Client: k.c, Namespace: ns, Logs: uiLogs{e: e, k: k},
		Address: *address, Port: *port, TraceURL: *traceURL, Open: !*noOpen, Stdout: e.Stdout, Stderr: e.Stderr, Now: e.Now})
	if err != nil {
		return fail(e, fs, err)
	}
	return 0
}

// uiLogs gives the ui the follower of `logs -f`: the same waiting for the
// Pod, reading and reading on, through the same LogSource.
type uiLogs struct {
	e *Env
	k *kube
}

func (l uiLogs) Follow(ctx context.Context, namespace, name string, sink ui.LogSink) error {
	k := *l.k
	k.ns = namespace
	_, err := newFollowerTo(l.e, &k, name, uiSink{sink}, true).show(ctx)
	return err
}

// uiSink is a ui.LogSink as a follower's lineSink.
type uiSink struct{ s ui.LogSink }

func (u uiSink) line(b []byte) (bool, error) { return u.s.Line(b) }
func (u uiSink) note(msg string)             { u.s.Note(msg) }
func (u uiSink) close()                      {}
