package gitworkspace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/internal/gitserver"
)

const testToken = "ghp_test-token-0123456789abcdef"

// fixture is a git server with one repository and a Spec for it.
type fixture struct {
	srv  *gitserver.Server
	spec Spec
	base string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv, err := gitserver.Start(gitserver.Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	base, err := srv.Create("app", map[string]string{"README.md": "hello\n", "src/main.go": "package main\n"},
		map[string]string{"src/main.go": "package main\n\nfunc main() {}\n"})
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, srv.CAPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, base: base, spec: Spec{Repository: srv.Repo("app"), Depth: 1, Token: testToken,
		Auth: Auth{User: DefaultBasicUser}, CAFile: ca, Push: PushBranch}}
}

// sh runs a shell command in dir, as an agent's tool would.
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("sh", "-ec", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.com", "GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

// TestCloneRecordPushPatch is the whole path on the host: a clone at the
// default branch with the token, the agent's commit and what it left
// uncommitted recorded, the run's branch pushed (and only it), and the
// patch applying to the base with git am. The token is nowhere in the
// workspace.
func TestCloneRecordPushPatch(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ws := filepath.Join(t.TempDir(), "ws")
	c, err := Clone(ctx, f.spec, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Base != f.base || c.Ref != "refs/heads/main" || c.Branch != "main" {
		t.Fatalf("base %s ref %s branch %s, want %s refs/heads/main main", c.Base, c.Ref, c.Branch, f.base)
	}
	if out := sh(t, ws, "git remote get-url origin; git rev-parse HEAD; git status --porcelain"); out != f.spec.Repository+"\n"+f.base+"\n" {
		t.Errorf("the workspace's repository: %q", out)
	}
	assertNoToken(t, ws)

	sh(t, ws, `echo "changed" >> README.md; git commit -qam "agent: edit the readme"; echo new > src/new.go; rm src/main.go; ln -s README.md link`)
	ch, err := c.Record(ctx, "test-run")
	if err != nil {
		t.Fatal(err)
	}
	if ch.Commits != 2 || ch.FilesChanged != 4 || ch.Insertions != 3 || ch.Deletions != 3 || len(ch.Notes) != 0 {
		t.Errorf("change %+v", ch)
	}
	if got := strings.Join(ch.Paths, ","); got != "README.md,link,src/main.go,src/new.go" {
		t.Errorf("paths %s", got)
	}
	if err := c.Push(ctx, ch, "agentrun/test-run"); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.srv.Git("app", "rev-parse", "refs/heads/agentrun/test-run"); got != ch.Head {
		t.Errorf("the server's branch is at %q, want %s", got, ch.Head)
	}
	if refs, _ := f.srv.Git("app", "for-each-ref", "--format=%(refname)"); refs != "refs/heads/agentrun/test-run\nrefs/heads/main" {
		t.Errorf("refs on the server: %q", refs)
	}
	if msg, _ := f.srv.Git("app", "log", "-1", "--format=%an%n%B", ch.Head); !strings.Contains(msg, "agentrun\n") || !strings.Contains(msg, "Agentrun-Run: test-run") {
		t.Errorf("agentrun's commit: %q", msg)
	}
	patch, err := c.Patch(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	// The patch applies with git am to a fresh clone of the base.
	other := t.TempDir()
	sh(t, other, "git clone -q "+f.srv.Dir("app")+" . && git checkout -q "+f.base)
	if err := os.WriteFile(filepath.Join(other, "change.patch"), patch, 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, other, "git am -q change.patch && rm change.patch")
	if tree := sh(t, other, "git rev-parse HEAD^{tree}"); strings.TrimSpace(tree) != strings.TrimSpace(sh(t, ws, "git add -A && git write-tree")) {
		t.Errorf("git am of the patch gives another tree than the workspace's")
	}
	// A second push of the same change is a no-op fast-forward; a branch
	// that moved elsewhere is refused, never forced.
	if err := c.Push(ctx, ch, "agentrun/test-run"); err != nil {
		t.Errorf("pushing again: %v", err)
	}
	orphan, err := f.srv.Git("app", "commit-tree", "main^{tree}", "-m", "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.srv.Git("app", "update-ref", "refs/heads/moved", orphan); err != nil {
		t.Fatal(err)
	}
	if err := c.Push(ctx, ch, "moved"); err == nil || !strings.Contains(err.Error(), "not a fast-forward") {
		t.Errorf("push over a branch that moved elsewhere: %v", err)
	}
	if got, _ := f.srv.Git("app", "rev-parse", "refs/heads/moved"); got != orphan {
		t.Errorf("the branch that moved elsewhere was overwritten: %s", got)
	}
}

// assertNoToken: no file under dir holds the token.
func assertNoToken(t *testing.T, dir string) {
	t.Helper()
	// The callback skips what it cannot read, so Walk returns nil.
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), testToken) {
			t.Errorf("%s holds the token", p)
		}
		return nil
	})
}

func TestCloneRefs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.srv.Git("app", "tag", "v1", f.base); err != nil {
		t.Fatal(err)
	}
	first, _ := f.srv.Git("app", "rev-parse", "main~1")
	for _, tt := range []struct{ ref, base, wantRef, branch, err string }{
		{ref: "main", base: f.base, wantRef: "refs/heads/main", branch: "main"},
		{ref: "v1", base: f.base, wantRef: "refs/tags/v1"},
		{ref: first, base: first, wantRef: first},
		{ref: "nope", err: "--ref nope does not exist"},
		{ref: "-x", err: "is not a branch, a tag or a full commit id"},
	} {
		t.Run(tt.ref, func(t *testing.T) {
			s := f.spec
			s.Ref, s.Depth = tt.ref, 0
			c, err := Clone(ctx, s, filepath.Join(t.TempDir(), "ws"))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Base != tt.base || c.Ref != tt.wantRef || c.Branch != tt.branch {
				t.Errorf("base %s ref %s branch %q", c.Base, c.Ref, c.Branch)
			}
		})
	}
}

// TestCloneErrors: bad input gets a clear error before the agent starts,
// and the token never shows in it.
func TestCloneErrors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	notEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(notEmpty, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		edit func(*Spec)
		ws   string
		err  string
	}{
		{name: "wrong token", edit: func(s *Spec) { s.Token = "ghp_wrong-token-000000000000" }, err: "the server refused the git credential"},
		{name: "no token", edit: func(s *Spec) { s.Token = "" }, err: "pass --git-credential"},
		{name: "unreachable", edit: func(s *Spec) { s.Repository = "https://127.0.0.1:1/app.git" }, err: "cannot reach 127.0.0.1:1"},
		{name: "plain http undeclared", edit: func(s *Spec) { s.Repository = "http://example.com/a.git" }, err: "declare it with --git-plain-http"},
		{name: "token in the URL", edit: func(s *Spec) { s.Repository = strings.Replace(f.spec.Repository, "https://", "https://u:p@", 1) }, err: "never in the URL"},
		{name: "ssh", edit: func(s *Spec) { s.Repository = "ssh://git@example.com/a.git" }, err: "only https://"},
		{name: "not empty", ws: notEmpty, err: "is not empty"},
		{name: "too large", edit: func(s *Spec) { s.Limits.RepoBytes = 100 }, err: "larger than the bound"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := f.spec
			if tt.edit != nil {
				tt.edit(&s)
			}
			ws := tt.ws
			if ws == "" {
				ws = filepath.Join(t.TempDir(), "ws")
			}
			_, err := Clone(ctx, s, ws)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %v, want %q", err, tt.err)
			}
			if strings.Contains(err.Error(), testToken) || strings.Contains(err.Error(), "wrong-token") {
				t.Errorf("the error holds the token: %v", err)
			}
		})
	}
}

// TestRecordBounds: a working tree or objects over the bounds are not
// recorded, with a note; what fits is, and Record ends in bounded time.
func TestRecordBounds(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		limits Limits
		script string
		note   string
		// commits are the agent's that are published.
		commits int
	}{
		{name: "too many files", limits: Limits{ChangeFiles: 50}, script: `git commit -q --allow-empty -m kept; for i in $(seq 1 80); do echo $i > f$i; done`,
			note: "more than 50 files", commits: 1},
		{name: "a file over the bound", limits: Limits{FileBytes: 1 << 20}, script: `truncate -s 3G big.bin`,
			note: "big.bin is larger than 1 MiB"},
		{name: "objects over the bound", limits: Limits{AgentObjectBytes: 64 << 10}, script: `head -c 200000 /dev/urandom > r.bin; git add r.bin; git commit -qm big`,
			note: "objects are larger than the bound", commits: 1}, // the working tree instead
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			s := f.spec
			s.Limits = tt.limits
			ws := filepath.Join(t.TempDir(), "ws")
			c, err := Clone(ctx, s, ws)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sh(t, ws, tt.script)
			ch, err := c.Record(ctx, "bounds")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(ch.Notes, "; "), tt.note) {
				t.Errorf("notes %q, want %q", ch.Notes, tt.note)
			}
			if ch.Commits != tt.commits {
				t.Errorf("%d commits recorded, want %d", ch.Commits, tt.commits)
			}
		})
	}
}

// TestAgentConfigOwnership: in a Pod the workspace's mount point belongs to
// root while the agent runs as another user, which makes git refuse the
// checkout as of dubious ownership; the agent's configuration names the
// checkout as safe, and gives its commits an identity. Without the config,
// the refusal (the test holds that it is a real one).
func TestAgentConfigOwnership(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the checkout must belong to another user than the agent")
	}
	f := newFixture(t)
	parent, err := os.MkdirTemp("", "agentrun-ownership-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(parent, "workspace")
	c, err := Clone(context.Background(), f.spec, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The agent's user may write the files but does not own the
	// directory, as in a Pod's emptyDir with fsGroup.
	if out, err := exec.Command("chmod", "-R", "a+rwX", ws).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	config := filepath.Join(parent, "agentrun-gitconfig")
	if err := os.WriteFile(config, []byte(c.AgentConfig(nil, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := func(config string) (string, error) {
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
			"echo x >> README.md && git add -A && git commit -qm 'agent: x' && git log -1 --format=%an")
		cmd.Dir = ws
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + config}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := agent("/dev/null"); err == nil || !strings.Contains(out, "dubious ownership") {
		t.Fatalf("without the config: %v %s; want git's dubious ownership refusal", err, out)
	}
	if out, err := agent(config); err != nil || strings.TrimSpace(out) != "agent" {
		t.Fatalf("with the agent's config: %v %s", err, out)
	}
}
