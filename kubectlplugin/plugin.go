// Package kubectlplugin is `kubectl agentrun`, the kubectl plugin for AgentRuns:
//
//	get [NAME]        a wide table: status, reason, tokens, cost, duration, result
//	logs NAME [-f]    the events sidecar's stream, rendered (followed to its end)
//	usage             tokens and cost summed over runs, by namespace, runtime or model
//	run --runtime R   an AgentRun made from flags, followed like `logs -f`
//	ui                a web view of runs, live events and spend (kubectlplugin/ui)
//	diff NAME         the run's change: its patch for git am, or its branch
//	release           frees agent Pods from the harvest finalizer when no manager will
//
// cmd/kubectl-agentrun is a thin main around Env.Main. The verbs talk to
// the API server with controller-runtime's client, from kubectl's own
// kubeconfig loading (client-go's clientcmd, the code kubectl's flags end
// in), and read container logs through a LogSource, which the tests
// replace: envtest has no kubelet to serve pods/log.
package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/agentrun-dev/agentrun/events"
)

// Env is where the plugin runs: its streams, its clock and its log source.
// The zero value of every field but the streams is filled in by Main.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Now is the clock of AGE, running durations and --since.
	Now func() time.Time
	// Poll is how often a follower looks at the run and its Pod while it
	// waits (for a Pod, a container, the end in status).
	Poll time.Duration
	// NewLogSource returns where container logs come from; nil reads
	// pods/log through the API server.
	NewLogSource func(*rest.Config) (LogSource, error)
}

// Exit codes of the plugin's own failures. `run` exits with the run's
// outcome instead (runExitCodes), so exitNoCluster is none of those.
const (
	exitError = 1 // the API server refused, the run or its log is not there
	exitUsage = 2 // bad flags or arguments
	// exitNoCluster: no cluster to talk to (no kubeconfig, or one that
	// does not load); nothing was sent.
	exitNoCluster = 4
)

// runExitCodes map a run's end status to the exit code of `agentrun run`
// (docs/events.md, "Exit codes"), so a script reads a Kubernetes run's
// outcome as it reads a local one.
var runExitCodes = map[string]int{
	events.StatusFinished:    0,
	events.StatusFailed:      1,
	events.StatusRejected:    2,
	events.StatusLimit:       3,
	events.StatusTimeout:     124,
	events.StatusInterrupted: 130,
}

const usageText = `kubectl agentrun: AgentRuns from kubectl.

Usage:
  kubectl agentrun get [NAME] [-n NS | -A] [-l SELECTOR]
  kubectl agentrun logs NAME [-f] [--format text|rich|jsonl]
  kubectl agentrun usage [-n NS | -A] [-l SELECTOR] [--since DURATION] [--by namespace|runtime|model]
  kubectl agentrun run --runtime RUNTIME [--model M] [-f FILE | PROMPT] [flags]
  kubectl agentrun ui [-n NS | -A] [--port P] [--address 127.0.0.1] [--no-open] [--trace-url URL]
  kubectl agentrun diff NAME [--stat]
  kubectl agentrun release [-n NS | -A]
  kubectl agentrun version [-o text|json]

kubectl's connection flags (--kubeconfig, --context, -n/--namespace, --server, ...)
work with every verb. Run "kubectl agentrun VERB -h" for the flags of a verb.
`

// connectionHelp closes every verb's help.
const connectionHelp = `kubectl's connection flags work too: --kubeconfig, --context, --cluster, --user,
-n/--namespace, --server, --token, --as, --as-group, --certificate-authority,
--insecure-skip-tls-verify, --request-timeout, ... (see "kubectl options").
`

// verbs are the plugin's commands, each given its flag set (with the
// connection flags already bound) and the arguments to parse.
var verbs = map[string]func(ctx context.Context, e *Env, fs *pflag.FlagSet, kf *kubeFlags, args []string) int{
	"get":     getCmd,
	"logs":    logsCmd,
	"usage":   usageCmd,
	"run":     runCmd,
	"ui":      uiCmd,
	"diff":    diffCmd,
	"release": releaseCmd,
	"version": versionCmd,
}

// Main runs one `kubectl agentrun` command line and returns its exit code.
func (e Env) Main(ctx context.Context, args []string) int {
	if e.Stdin == nil {
		e.Stdin = os.Stdin
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	if e.Poll <= 0 {
		e.Poll = time.Second
	}
	if e.NewLogSource == nil {
		e.NewLogSource = apiLogSource
	}
	// The connection flags may come before the verb too (`kubectl agentrun
	// -n team get`): a first pass finds the verb, and the verb's own flag
	// set parses everything else, those flags included.
	root := pflag.NewFlagSet("kubectl agentrun", pflag.ContinueOnError)
	root.SetInterspersed(false)
	root.SetOutput(io.Discard)
	newKubeFlags().bind(root)
	if len(args) > 0 && args[0] == "--version" {
		args = append([]string{"version"}, args[1:]...)
	}
	if err := root.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(e.Stdout, usageText)
			return 0
		}
		fmt.Fprintf(e.Stderr, "kubectl agentrun: %v\n\n%s", err, usageText)
		return exitUsage
	}
	if root.NArg() == 0 {
		fmt.Fprint(e.Stderr, usageText)
		return exitUsage
	}
	name := root.Arg(0)
	switch name {
	case "help":
		fmt.Fprint(e.Stdout, usageText)
		return 0
	}
	verb, ok := verbs[name]
	if !ok {
		fmt.Fprintf(e.Stderr, "kubectl agentrun: unknown verb %q\n\n%s", name, usageText)
		return exitUsage
	}
	before := args[:len(args)-root.NArg()]
	rest := append(append([]string{}, before...), root.Args()[1:]...)
	fs := pflag.NewFlagSet("kubectl agentrun "+name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	kf := newKubeFlags()
	kf.bind(fs)
	return verb(ctx, &e, fs, kf, rest)
}

// parse parses a verb's flags; done is true when the command line was
// answered already (help, or a usage error).
func parse(e *Env, fs *pflag.FlagSet, kf *kubeFlags, args []string, synopsis string) (code int, done bool) {
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		// The verb's own flags; the connection flags are kubectl's, and
		// listing all twenty would bury them.
		own := pflag.NewFlagSet(fs.Name(), pflag.ContinueOnError)
		fs.VisitAll(func(f *pflag.Flag) {
			if !kf.isConnection(f.Name) {
				own.AddFlag(f)
			}
		})
		fmt.Fprintf(e.Stdout, "Usage: %s\n\nFlags:\n%s\n%s", synopsis, own.FlagUsages(), connectionHelp)
		return 0, true
	}
	if err != nil {
		return usageError(e, fs, "%v", err), true
	}
	return 0, false
}

// usageError says what is wrong with the command line and how it looks.
func usageError(e *Env, fs *pflag.FlagSet, format string, a ...any) int {
	fmt.Fprintf(e.Stderr, "%s: %s\nRun \"%s -h\" for its flags.\n", fs.Name(), fmt.Sprintf(format, a...), fs.Name())
	return exitUsage
}

// fail reports an error of a verb and returns exitError, or exitNoCluster
// when there is no cluster to talk to.
func fail(e *Env, fs *pflag.FlagSet, err error) int {
	fmt.Fprintf(e.Stderr, "%s: %s\n", fs.Name(), strings.TrimSpace(err.Error()))
	var nc noClusterError
	if errors.As(err, &nc) {
		return exitNoCluster
	}
	return exitError
}

// apiLogSource reads pods/log through the API server.
func apiLogSource(cfg *rest.Config) (LogSource, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return apiLogs{cs}, nil
}
