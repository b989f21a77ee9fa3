package kubectlplugin

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events/format/text"
)

// Where the manager keeps a run's patch (controllers.PatchKey; the plugin
// does not import the manager).
const patchKey = "change.patch.gz"

// maxPatchBytes bounds the patch the plugin unpacks: a gzip of at most
// 900 KiB rarely holds more than a few MiB, and one that does is a bomb.
const maxPatchBytes = 256 << 20

// diffCmd prints a run's change: the patch the manager kept (push mode
// Patch), ready for `git am`, or, for a pushed branch, where it is and how
// to fetch it. --stat prints what status.git says instead.
func diffCmd(ctx context.Context, e *Env, fs *pflag.FlagSet, kf *kubeFlags, args []string) int {
	stat := fs.Bool("stat", false, "print the change's summary (status.git) instead of the patch")
	if code, done := parse(e, fs, kf, args, "kubectl agentrun diff NAME [--stat]"); done {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(e, fs, "expected one run name, got %d", fs.NArg())
	}
	k, err := kf.connect(e)
	if err != nil {
		return fail(e, fs, err)
	}
	run := &v1alpha1.AgentRun{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: fs.Arg(0)}, run); err != nil {
		return fail(e, fs, err)
	}
	g := run.Status.Git
	switch {
	case run.Spec.Git == nil:
		return fail(e, fs, fmt.Errorf("AgentRun %s has no spec.git: it worked on no repository", run.Name))
	case g == nil && !ended(run):
		return fail(e, fs, fmt.Errorf("AgentRun %s has not ended yet (%s): its change is published at the end", run.Name, orNone(phase(run))))
	case g == nil:
		return fail(e, fs, fmt.Errorf("AgentRun %s reports no change: %s", run.Name, orNone(run.Status.Detail)))
	case *stat:
		printGitStat(e.Stdout, g)
		return 0
	case g.PatchConfigMap != "":
		patch, err := readPatch(ctx, k, run.Namespace, g.PatchConfigMap)
		if err != nil {
			return fail(e, fs, err)
		}
		if isTerminal(e.Stdout) {
			// The agent wrote this: on a terminal, no escape sequence of
			// its may act (piped to git am, it stays byte for byte).
			patch = []byte(printableLines(string(patch)))
		}
		_, err = e.Stdout.Write(patch)
		if err != nil {
			return fail(e, fs, err)
		}
		return 0
	case g.Pushed:
		fmt.Fprintf(e.Stdout, "# the change is on the branch %s of %s (%s..%s)\ngit fetch %s %s && git log -p %s..FETCH_HEAD\n",
			text.Printable(g.Branch), text.Printable(g.Repository), short(g.BaseCommit), short(g.HeadCommit),
			shellQuote(g.Repository), shellQuote(g.Branch), shellQuote(g.BaseCommit))
		return 0
	case g.BaseCommit == g.HeadCommit:
		fmt.Fprintln(e.Stderr, "the agent changed nothing")
		return 0
	}
	why := g.Detail
	if why == "" {
		why = "spec.git.push.mode is None"
	}
	return fail(e, fs, fmt.Errorf("the change of AgentRun %s (%s) was not published: %s", run.Name, orNone(g.DiffStat), text.Printable(why)))
}

// readPatch reads and unpacks a run's patch ConfigMap.
func readPatch(ctx context.Context, k *kube, namespace, name string) ([]byte, error) {
	cm := &corev1.ConfigMap{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm); err != nil {
		return nil, fmt.Errorf("the patch's ConfigMap: %w", err)
	}
	gz, ok := cm.BinaryData[patchKey]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s has no %s", name, patchKey)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %w", name, err)
	}
	b, err := io.ReadAll(io.LimitReader(zr, maxPatchBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("ConfigMap %s: %w", name, err)
	case len(b) > maxPatchBytes:
		return nil, errors.New("the patch unpacks to more than 256 MiB: refused")
	}
	return b, nil
}

// printGitStat is --stat: the change as status.git reports it.
func printGitStat(w io.Writer, g *v1alpha1.GitStatus) {
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-11s %s\n", k+":", text.Printable(v))
		}
	}
	line("repository", g.Repository)
	line("ref", g.Ref)
	line("base", g.BaseCommit)
	line("head", g.HeadCommit)
	fmt.Fprintf(w, "%-11s %d commits, %d files changed, %d insertions(+), %d deletions(-)\n", "change:", g.Commits, g.FilesChanged, g.Insertions, g.Deletions)
	switch {
	case g.Pushed:
		line("pushed to", g.Branch)
	case g.PatchConfigMap != "":
		line("patch", "ConfigMap "+g.PatchConfigMap)
	}
	for _, p := range g.Paths {
		fmt.Fprintf(w, "  %s\n", text.Printable(p))
	}
	line("detail", g.Detail)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// printableLines keeps the lines and makes each printable.
func printableLines(s string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		nl := strings.HasSuffix(l, "\n")
		l = text.Printable(strings.TrimSuffix(l, "\n"))
		if nl {
			l += "\n"
		}
		lines[i] = l
	}
	return strings.Join(lines, "")
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// shellQuote quotes s for a POSIX shell, so a name the agent influenced
// cannot run anything when the line is pasted.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(text.Printable(s), "'", `'\''`) + "'"
}
