package kubectlplugin

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/agentrun-dev/agentrun/internal/version"
)

// versionCmd prints the plugin's version, its commit and the pinned agent
// CLIs; it needs no cluster.
func versionCmd(_ context.Context, e *Env, fs *pflag.FlagSet, kf *kubeFlags, args []string) int {
	output := fs.StringP("output", "o", "text", "text, or json for one JSON object")
	if code, done := parse(e, fs, kf, args, "kubectl agentrun version [-o text|json]"); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, fs, "unexpected argument %q: version takes only flags", fs.Arg(0))
	}
	info := version.Get()
	switch *output {
	case "text":
		fmt.Fprint(e.Stdout, info.Text("kubectl-agentrun"))
	case "json":
		fmt.Fprint(e.Stdout, info.JSON())
	default:
		return usageError(e, fs, "--output %q: use text or json", *output)
	}
	return 0
}
