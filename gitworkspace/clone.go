package gitworkspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentrun-dev/agentrun/proxy/credentials"
)

// Checkout is a repository cloned for one run: the workspace the agent
// gets, and agentrun's own bare repository beside it (outside the
// sandbox's reach) that holds the base commit and, after the run, the
// change.
type Checkout struct {
	spec      Spec
	remote    *remote
	git       *hostGit // without the token
	private   string   // agentrun's directory: the bare repository, scratch
	repo      string   // the bare repository, GIT_DIR of every later step
	workspace string
	// Ref is the ref the user asked for, or the remote's default branch
	// ("refs/heads/main"); Base the commit it named.
	Ref  string
	Base string
	// Branch is the workspace's local branch ("" for a detached HEAD at a
	// tag or a commit id).
	Branch string
}

// Dest is the repository's host:port (the proxy's fetch scope claims it).
func (c *Checkout) Dest() credentials.Dest {
	return credentials.Dest{Host: c.remote.host, Port: c.remote.port, Plain: c.remote.url.Scheme == "http"}
}

// Remote is the repository URL.
func (c *Checkout) Remote() string { return c.remote.String() }

// Close removes agentrun's private directory (never the workspace).
func (c *Checkout) Close() {
	if c != nil && c.private != "" {
		os.RemoveAll(c.private)
	}
}

// CheckEmpty refuses a workspace that holds anything: a clone would mix
// with it (reusing a volume that holds the same repository is a later
// step, docs/git.md).
func CheckEmpty(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return fmt.Errorf("the workspace %s is not empty: --repo clones into an empty directory (drop --cwd to clone into a temporary one)", dir)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// Clone clones the spec's repository at its ref into workspace (empty or
// missing), before the agent starts. What it fetches it fetches into a
// bare repository of agentrun's own first, with the token in the git
// command's environment only, and checks every object; the workspace then
// gets a plain checkout from it whose remote is the repository's URL,
// without any credential. Errors say what the server said, without the
// token.
func Clone(ctx context.Context, s Spec, workspace string) (_ *Checkout, err error) {
	s.Limits = s.Limits.withDefaults()
	if s.Depth < 0 {
		return nil, errors.New("--depth must be 0 (the whole history) or more")
	}
	if err := validRef(s.Ref); err != nil {
		return nil, err
	}
	r, err := parseRemote(s.Repository, s.PlainHTTP)
	if err != nil {
		return nil, err
	}
	if err := CheckEmpty(workspace); err != nil {
		return nil, err
	}
	private, err := os.MkdirTemp("", "agentrun-git-")
	if err != nil {
		return nil, err
	}
	c := &Checkout{spec: s, remote: r, private: private, repo: filepath.Join(private, "repo.git"), workspace: workspace}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	home := filepath.Join(private, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return nil, err
	}
	c.git = &hostGit{home: home, caFile: s.CAFile}
	if ip, ok := s.Resolve[r.host]; ok {
		if strings.Contains(ip, ":") {
			ip = "[" + ip + "]"
		}
		c.git.resolve = []string{fmt.Sprintf("%s:%d:%s", r.host, r.port, ip)}
	}
	if _, err := c.git.run(ctx, "init", "-q", "--bare", c.repo); err != nil {
		return nil, err
	}
	auth := c.authGit(false)
	ref, target, err := c.resolveRef(ctx, auth)
	if err != nil {
		return nil, err
	}
	c.Ref = ref
	fetch := []string{"--git-dir", c.repo, "fetch", "-q", "--no-tags", "--no-write-fetch-head"}
	if s.Depth > 0 {
		fetch = append(fetch, fmt.Sprintf("--depth=%d", s.Depth))
	}
	fetch = append(fetch, r.String(), "+"+target+":refs/agentrun/base")
	if err := c.watchSize(ctx, func(ctx context.Context) error { _, err := auth.run(ctx, fetch...); return err }); err != nil {
		return nil, c.explain(err)
	}
	out, err := c.git.run(ctx, "--git-dir", c.repo, "rev-parse", "--verify", "refs/agentrun/base^{commit}")
	if err != nil {
		return nil, fmt.Errorf("--ref %s names no commit on %s", s.Ref, r)
	}
	c.Base = strings.TrimSpace(string(out))
	if err := c.checkout(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// authGit is the host git with the token for the repository's URLs (and,
// with host, every URL of its host: a submodule on the same forge).
func (c *Checkout) authGit(host bool) *hostGit {
	if c.spec.Token == "" {
		return c.git
	}
	h := c.spec.Auth.header(c.spec.Token)
	key := c.remote.headerKey()
	if host {
		key = c.remote.hostHeaderKey()
	}
	g := c.git.with("GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0="+key, "GIT_CONFIG_VALUE_0=Authorization: "+h)
	g.secrets = append(g.secrets, c.spec.Token, strings.TrimPrefix(strings.TrimPrefix(h, "Basic "), "Bearer "))
	return g
}

// resolveRef finds what to fetch: the remote's default branch for no
// --ref, a branch or a tag by its name, a refs/ name, or a commit id as
// it is. It returns the ref as reported and what to fetch.
func (c *Checkout) resolveRef(ctx context.Context, auth *hostGit) (string, string, error) {
	ls := *auth
	ls.maxOutput = 64 << 20
	out, err := ls.run(ctx, "ls-remote", "--symref", c.remote.String())
	if err != nil {
		return "", "", c.explain(err)
	}
	refs := map[string]bool{}
	head := ""
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "ref:" && f[2] == "HEAD":
			head = f[1]
		case len(f) == 2:
			refs[f[1]] = true
		}
	}
	ref := c.spec.Ref
	switch {
	case ref == "" && head != "":
		return head, head, nil
	case ref == "":
		return "", "", fmt.Errorf("%s names no default branch: pass --ref", c.remote)
	case hexID().MatchString(ref):
		return ref, ref, nil
	case refs[ref] && strings.HasPrefix(ref, "refs/"):
		return ref, ref, nil
	case refs["refs/heads/"+ref]:
		return "refs/heads/" + ref, "refs/heads/" + ref, nil
	case refs["refs/tags/"+ref]:
		return "refs/tags/" + ref, "refs/tags/" + ref, nil
	}
	return "", "", fmt.Errorf("--ref %s does not exist on %s (%s): give a branch, a tag or a full commit id", ref, c.remote, someBranches(refs))
}

// someBranches names a few of the remote's branches for an error.
func someBranches(refs map[string]bool) string {
	var b []string
	for r := range refs {
		if n, ok := strings.CutPrefix(r, "refs/heads/"); ok && len(b) < 5 {
			b = append(b, n)
		}
	}
	if len(b) == 0 {
		return "it has no branches"
	}
	return "branches include " + strings.Join(b, ", ")
}

// explain turns a git failure against the remote into what the user can
// do about it.
func (c *Checkout) explain(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "could not resolve host"), strings.Contains(msg, "Could not resolve host"),
		strings.Contains(msg, "Failed to connect"), strings.Contains(msg, "Connection refused"), strings.Contains(msg, "Connection timed out"):
		return fmt.Errorf("cannot reach %s: %s", c.remote.url.Host, msg)
	case strings.Contains(msg, "Authentication failed"), strings.Contains(msg, "401"), strings.Contains(msg, "403"),
		strings.Contains(msg, "could not read Username"), strings.Contains(msg, "terminal prompts disabled"):
		hint := "the server refused the git credential"
		if c.spec.Token == "" {
			hint = "the server asks for a credential: pass --git-credential NAME"
		}
		return fmt.Errorf("%s (%s): %s", hint, c.remote, msg)
	}
	return fmt.Errorf("fetching %s: %s", c.remote, msg)
}

// watchSize runs fetch and stops it once the bare repository's objects
// pass the size bound: git has no bound of its own on what a fetch takes.
func (c *Checkout) watchSize(ctx context.Context, fetch func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var over atomic.Bool
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if dirSize(filepath.Join(c.repo, "objects"), c.spec.Limits.RepoBytes) > c.spec.Limits.RepoBytes {
					over.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	err := fetch(ctx)
	close(done)
	if over.Load() || dirSize(filepath.Join(c.repo, "objects"), c.spec.Limits.RepoBytes) > c.spec.Limits.RepoBytes {
		return fmt.Errorf("the repository is larger than the bound of %d MiB: fetch less history (--depth) or raise the bound", c.spec.Limits.RepoBytes>>20)
	}
	return err
}

// dirSize sums the sizes of the regular files under dir, stopping once it
// passes stop.
func dirSize(dir string, stop int64) int64 {
	var n int64
	// The walk's callback swallows every error (an unreadable entry counts
	// as nothing) and stops with SkipAll, so WalkDir itself returns nil.
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		if n > stop {
			return filepath.SkipAll
		}
		return nil
	})
	return n
}

// checkout makes the workspace an ordinary repository at the base commit:
// its objects copied from agentrun's (its shallow boundary too), a local
// branch tracking the ref's branch (a detached HEAD for a tag or a
// commit), and the repository's URL as origin, with no credential.
func (c *Checkout) checkout(ctx context.Context) error {
	ws := c.workspace
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return err
	}
	g := c.git
	local := *c.git
	local.allowFile = true
	if _, err := g.run(ctx, "init", "-q", ws); err != nil {
		return err
	}
	gitDir := filepath.Join(ws, ".git")
	branch, isBranch := strings.CutPrefix(c.Ref, "refs/heads/")
	track := "refs/remotes/origin/" + branch
	if !isBranch {
		track = "refs/agentrun/base"
	}
	if _, err := local.run(ctx, "--git-dir", gitDir, "fetch", "-q", "--no-tags", "--update-shallow", "--no-write-fetch-head",
		"file://"+c.repo, "refs/agentrun/base:"+track); err != nil {
		return err
	}
	steps := [][]string{
		{"remote", "add", "origin", c.remote.String()},
	}
	if isBranch {
		c.Branch = branch
		steps = append(steps,
			[]string{"update-ref", "refs/heads/" + branch, c.Base},
			[]string{"symbolic-ref", "HEAD", "refs/heads/" + branch},
			[]string{"config", "branch." + branch + ".remote", "origin"},
			[]string{"config", "branch." + branch + ".merge", c.Ref})
	} else {
		steps = append(steps, []string{"update-ref", "--no-deref", "HEAD", c.Base}, []string{"update-ref", "-d", "refs/agentrun/base"})
	}
	for _, s := range steps {
		if _, err := g.run(ctx, append([]string{"--git-dir", gitDir}, s...)...); err != nil {
			return err
		}
	}
	if _, err := g.run(ctx, "--git-dir", gitDir, "--work-tree", ws, "checkout", "-q", "--force", "HEAD", "--", "."); err != nil {
		return fmt.Errorf("checking out %s: %v", c.Base, err)
	}
	if c.spec.Submodules {
		if err := c.submodules(ctx); err != nil {
			return err
		}
	}
	if err := c.giveToOwner(); err != nil {
		return err
	}
	// The checkout's index, made a moment ago by agentrun (its stat data
	// refreshed after the change of owner), is the one Record starts from:
	// it spares reading again every file the agent left alone. The
	// agent's own index is never read.
	if _, err := g.run(ctx, "--git-dir", gitDir, "--work-tree", ws, "update-index", "-q", "--refresh"); err != nil {
		return err
	}
	idx, err := os.ReadFile(filepath.Join(gitDir, "index"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.private, "index"), idx, 0o600)
}

// submodules clones the submodules of the checkout, their URLs as the
// repository's .gitmodules names them (https only; the token goes to the
// repository's host only), into the workspace's .git/modules.
func (c *Checkout) submodules(ctx context.Context) error {
	ws := c.workspace
	args := []string{"--git-dir", filepath.Join(ws, ".git"), "--work-tree", ws, "-C", ws, "submodule", "update", "--init", "--recursive", "--quiet"}
	if c.spec.Depth > 0 {
		args = append(args, fmt.Sprintf("--depth=%d", c.spec.Depth))
	}
	if _, err := c.authGit(true).run(ctx, args...); err != nil {
		return fmt.Errorf("cloning the submodules: %v", err)
	}
	return nil
}

// giveToOwner makes what root cloned into another user's workspace that
// user's: the agent writes the workspace as its owner (an idmapped mount
// maps the owner to the agent's user), and a root-owned file would be
// read-only to it. Nothing in the workspace is the agent's yet, so the
// walk may trust it, but it still changes links themselves, not their
// targets.
func (c *Checkout) giveToOwner() error {
	if os.Geteuid() != 0 {
		return nil
	}
	st, err := os.Stat(c.workspace)
	if err != nil {
		return err
	}
	sys := st.Sys().(*syscall.Stat_t)
	if sys.Uid == 0 && sys.Gid == 0 {
		return nil
	}
	return filepath.WalkDir(c.workspace, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(sys.Uid), int(sys.Gid))
	})
}
