package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/gitworkspace"
	"github.com/agentrun-dev/agentrun/internal/safefile"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/proxy"
)

// repo is a run's --repo: the checkout agentrun made before the agent,
// the proxy's fetch scope for the agent's own fetches, and how the change
// is published.
type repo struct {
	spec     gitworkspace.Spec
	checkout *gitworkspace.Checkout
	scope    *gitworkspace.FetchScope
	// tempWorkspace is the workspace agentrun made (no --cwd), removed
	// after the run.
	tempWorkspace string
	patchFile     string
	runID         string
	// files writes the patch: never through a link in the workspace.
	files safefile.Guard
	// hostAllowed: the network policy allows the repository's host for
	// any request, not only the fetch (see allow).
	hostAllowed bool
}

// publishTimeout bounds recording and publishing the change after the
// agent: a push of a large change over a slow link is the longest part.
const publishTimeout = 15 * time.Minute

// prepareRepo checks the --repo flags and clones the repository into the
// workspace (a temporary one without --cwd), before anything else of the
// run: the sandbox is then built over the checkout. A bad flag rejects the
// run; a clone that fails (an unreachable host, a refused credential, a
// ref that does not exist) fails it before the agent starts, with what the
// server said.
func prepareRepo(ctx context.Context, o *Options, runID string) (*repo, error) {
	g := o.GitFlags
	if g.Repo == "" {
		for flag, set := range map[string]bool{"--ref": g.Ref != "", "--git-credential": g.GitCredential != "", "--branch": g.Branch != "",
			"--patch": g.PatchFile != "", "--submodules": g.Submodules, "--git-plain-http": g.GitPlainHTTP, "--git-auth": g.GitAuth != ""} {
			if set {
				return nil, reject("%s is for --repo: pass --repo URL, or drop it", flag)
			}
		}
		return nil, nil
	}
	auth, err := gitworkspace.ParseAuth(g.GitAuth)
	if err != nil {
		return nil, reject("%v", err)
	}
	push := g.Push
	if push == "" {
		push = podcontract.DefaultPush
	}
	when := g.PushWhen
	if when == "" {
		when = podcontract.DefaultPushWhen
	}
	switch {
	case push != gitworkspace.PushNone && push != gitworkspace.PushBranch && push != gitworkspace.PushPatch:
		return nil, reject("--push %q: use none, branch or patch", push)
	case when != gitworkspace.WhenSucceeded && when != gitworkspace.WhenAlways:
		return nil, reject("--push-when %q: use succeeded or always", when)
	case g.Branch != "" && push != gitworkspace.PushBranch:
		return nil, reject("--branch is for --push branch (the push is %s)", push)
	case g.PatchFile != "" && push != gitworkspace.PushPatch:
		return nil, reject("--patch is for --push patch (the push is %s)", push)
	case g.Depth < 0:
		return nil, reject("--depth must be 0 (the whole history) or more")
	case o.Sandbox == "none" && g.GitCredential != "":
		return nil, reject("--git-credential needs the sandbox: without it the agent could read agentrun's environment, the token included")
	}
	r := &repo{runID: runID, spec: gitworkspace.Spec{Repository: g.Repo, Ref: g.Ref, Depth: g.Depth, Submodules: g.Submodules,
		PlainHTTP: g.GitPlainHTTP, Auth: auth, Push: push, When: when, Branch: g.Branch, CAFile: o.UpstreamCA, Resolve: map[string]string{}}}
	for _, h := range o.AddHosts {
		if name, ip, ok := strings.Cut(h, "="); ok {
			r.spec.Resolve[strings.ToLower(name)] = ip
		}
	}
	if push == gitworkspace.PushBranch && r.spec.Branch == "" {
		r.spec.Branch = "agentrun/" + runID
	}
	if g.GitCredential != "" {
		v, ok := os.LookupEnv(g.GitCredential)
		if !ok || strings.TrimSpace(v) == "" {
			return nil, reject("--git-credential %s: the variable %s is not set in agentrun's environment; export the token there (it never appears on the command line)", g.GitCredential, g.GitCredential)
		}
		r.spec.Token = v
	}
	if o.Cwd == "" {
		dir, err := os.MkdirTemp("", "agentrun-repo-")
		if err != nil {
			return nil, err
		}
		r.tempWorkspace, o.Cwd = dir, dir
	} else if err := gitworkspace.CheckEmpty(o.Cwd); err != nil {
		return nil, reject("%v", err)
	}
	r.patchFile = g.PatchFile
	if push == gitworkspace.PushPatch && r.patchFile == "" {
		r.patchFile = defaultPatchFile(runID)
	}
	// The checkout is the agent's to commit in; no git on the host runs
	// in it but agentrun's own, which trusts none of it.
	o.WritableGit = true
	c, err := gitworkspace.Clone(ctx, r.spec, o.Cwd)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("--repo: %w", err)
	}
	r.checkout = c
	r.files = FilesFor(o.Cwd)
	return r, nil
}

// defaultPatchFile is where a patch goes without --patch: agentrun's state
// directory ($XDG_STATE_HOME/agentrun, else ~/.local/state/agentrun),
// patches/<the run's id>.patch.
func defaultPatchFile(runID string) string {
	state := os.Getenv("XDG_STATE_HOME")
	if state == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(state, "agentrun", "patches", runID+".patch")
}

// close removes agentrun's private repository and a temporary workspace.
func (r *repo) close() {
	if r == nil {
		return
	}
	r.checkout.Close()
	if r.tempWorkspace != "" {
		os.RemoveAll(r.tempWorkspace)
	}
}

// agentVars are the agent's git variables: its configuration file (the
// stand-in, the CA bundle, an identity for its commits), no prompt.
func (r *repo) agentVars(stateDir string) [][2]string {
	if r == nil || r.scope == nil {
		return nil
	}
	return [][2]string{{"GIT_CONFIG_GLOBAL", filepath.Join(stateDir, "agentrun-gitconfig")}, {"GIT_TERMINAL_PROMPT", "0"}}
}

// writeAgentConfig writes the agent's git configuration into the state
// directory, which the sandbox reads.
func (r *repo) writeAgentConfig(stateDir, caBundle string) error {
	if r == nil || r.scope == nil {
		return nil
	}
	return os.WriteFile(filepath.Join(stateDir, "agentrun-gitconfig"), []byte(r.scope.AgentConfig(caBundle)), 0o644)
}

// publish records the agent's change and publishes it as --push says
// (when --push-when allows: a run that did not finish is only reported
// by default), and returns end.git.
func (r *repo) publish(status string, warn func(string)) *events.Git {
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	c := r.checkout
	g := &events.Git{Repository: c.Remote(), Ref: c.Ref, BaseCommit: c.Base, HeadCommit: c.Base, Paths: []string{}}
	ch, err := c.Record(ctx, r.runID)
	if err != nil {
		g.Detail = "the change could not be recorded: " + err.Error()
		warn(g.Detail)
		return g
	}
	g.HeadCommit, g.Commits, g.FilesChanged, g.Insertions, g.Deletions = ch.Head, ch.Commits, ch.FilesChanged, ch.Insertions, ch.Deletions
	g.Paths = append(g.Paths, ch.Paths...)
	var notes []string
	publish := r.spec.When == gitworkspace.WhenAlways || status == events.StatusFinished
	switch {
	case ch.Empty():
		notes = append(notes, "nothing changed: nothing published")
	case r.spec.Push == gitworkspace.PushNone:
	case !publish:
		notes = append(notes, fmt.Sprintf("not published: the run ended %s (--push-when succeeded)", status))
	case r.spec.Push == gitworkspace.PushBranch:
		g.Branch = events.String(r.spec.Branch)
		if err := c.Push(ctx, ch, r.spec.Branch); err != nil {
			notes = append(notes, err.Error())
		} else {
			g.Pushed = true
		}
	case r.spec.Push == gitworkspace.PushPatch:
		patch, err := c.Patch(ctx, ch)
		if err == nil {
			err = r.writePatch(patch)
		}
		if err != nil {
			notes = append(notes, "the patch could not be written: "+err.Error())
		} else {
			g.Patch = events.String(r.patchFile)
		}
	}
	g.Detail = strings.Join(append(append([]string{}, ch.Notes...), notes...), "; ")
	return g
}

// writePatch writes the patch without following a link the agent left in
// the workspace (a --patch inside it, or on the way to it).
func (r *repo) writePatch(patch []byte) error {
	if err := r.files.MkdirAll(filepath.Dir(r.patchFile), 0o755); err != nil {
		return err
	}
	return r.files.WriteFile(r.patchFile, bytes.NewReader(patch), 0o644)
}

// allow lets the agent reach the repository for its fetches: the
// repository's host:port joins a custom allow list (as a credential
// destination does) and the proxy's fetch scope will claim it. Whether the
// policy allowed the host before (mode full, an --allow-host of it)
// decides whether requests other than the fetch pass (without the
// token). Without the sandbox or the network, the agent cannot reach it,
// and nothing is added.
func (r *repo) allow(p *prepared) error {
	if r == nil || !p.iso.sandboxed() || p.iso.policy.Mode == proxy.ModeNone {
		return nil
	}
	d := r.checkout.Dest()
	if p.creds != nil && len(p.creds.set.For(d.Host, d.Port)) > 0 {
		return reject("--repo's host %s is also a --credential destination: the proxy can hold one of them for it", d)
	}
	r.hostAllowed = p.iso.policy.Decide(d.Host, d.Port, p.iso.resolver).Allowed
	return allowCredentialDest(p.iso, d)
}

// newScope makes the proxy's fetch scope with the run's authority.
func (r *repo) newScope(c *creds) {
	if r == nil || c == nil || c.authority == nil {
		return
	}
	r.scope = gitworkspace.NewFetchScope(r.checkout, c.authority, c.roots, r.hostAllowed)
}
