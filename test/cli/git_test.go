package cli

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/gitserver"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// gitToken is the forge token of the git tests: agentrun's environment
// holds it, the agent must never see it.
const gitToken = "ghp_cli-test-token-9f8e7d6c5b4a"

// gitHost is the name the git server is reached by, mapped with
// --add-host (its certificate is for it).
const gitHost = "git.test"

// gitRepo is a real git server (git http-backend behind TLS, the token
// required) with the repository "app", and a second one, "other", that
// the same token can read.
type gitRepo struct {
	srv  *gitserver.Server
	base string
	url  string
	ca   string
	port string
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	srv, err := gitserver.Start(gitserver.Options{Token: gitToken, Names: []string{gitHost}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	base, err := srv.Create("app", map[string]string{"README.md": "# app\n", "src/lib.go": "package lib\n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Create("other", map[string]string{"secret.txt": "another team's code\n"}); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "git-ca.pem")
	if err := os.WriteFile(ca, srv.CAPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.URL())
	return &gitRepo{srv: srv, base: base, ca: ca, port: u.Port(), url: "https://" + gitHost + ":" + u.Port() + "/app.git"}
}

// args point agentrun at the repository: the name mapped to the server,
// which listens on loopback (a private address: allowed explicitly).
func (g *gitRepo) args(push string) []string {
	return []string{"--repo", g.url, "--git-credential", "GIT_TOKEN", "--upstream-ca", g.ca, "--push", push,
		"--add-host", gitHost + "=127.0.0.1", "--allow-host", "127.0.0.1:" + g.port}
}

// agentScript is the agent's work: it edits and creates files, commits
// once, leaves a change uncommitted, and tries what the proxy must refuse
// (a push, the other repository), then fetches its own.
const agentScript = `echo changed >> README.md; echo new > new.txt; git add -A; git commit -qm "agent: change the readme"; ` +
	`echo more > uncommitted.txt; ` +
	`git push origin HEAD:main >/dev/null 2>&1 && echo PUSHED || echo PUSH-REFUSED; ` +
	`git ls-remote https://` + gitHost + `:PORT/other.git >/dev/null 2>&1 && echo OTHER-READ || echo OTHER-REFUSED; ` +
	`git fetch -q origin && echo FETCHED; env | grep -c ghp_ || true`

// TestGitBranch: the real claude-code works on a clone; its commit and
// what it left uncommitted reach exactly the run's branch, pushed by
// agentrun; the agent's own push and its reach for another repository are
// refused with network events; the token appears nowhere the agent or the
// stream could see.
func TestGitBranch(t *testing.T) {
	g := newGitRepo(t)
	srv, err := mockmodel.Start(mockmodel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	script := strings.ReplaceAll(agentScript, "PORT", g.port)
	args := append(claudeArgs(t, srv, true), g.args("branch")...)
	args = append(args, "--branch", "agentrun/cli-test")
	r := runAgentrun(t, invocation{args: args, prompt: "scenario:probe probe<<<" + script + ">>>",
		env: []string{"AGENTRUN_CLAUDE_BIN=" + claudeBin(t), "GIT_TOKEN=" + gitToken}})
	end := r.end()
	if end == nil || end.Status != events.StatusFinished {
		t.Fatalf("end %+v\nstderr %s", end, r.stderr)
	}
	out := *end.Result
	t.Logf("probe output: %s\nend.git: %s", out, show(end.Git))
	for _, want := range []string{"PUSH-REFUSED", "OTHER-REFUSED", "FETCHED"} {
		if !strings.Contains(out, want) {
			t.Errorf("the agent's probe says %q, want %s", out, want)
		}
	}
	if strings.Contains(out, "PUSHED") || strings.Contains(out, "OTHER-READ") {
		t.Errorf("the agent pushed or read the other repository: %q", out)
	}
	gi := end.Git
	if gi == nil || !gi.Pushed || gi.Branch == nil || *gi.Branch != "agentrun/cli-test" || gi.BaseCommit != g.base || gi.Commits != 2 ||
		gi.FilesChanged != 3 || gi.Ref != "refs/heads/main" || gi.Detail != "" {
		t.Fatalf("end.git %s", show(gi))
	}
	if head, _ := g.srv.Git("app", "rev-parse", "refs/heads/agentrun/cli-test"); head != gi.HeadCommit {
		t.Errorf("the server's branch is at %s, end.git.head_commit %s", head, gi.HeadCommit)
	}
	if main, _ := g.srv.Git("app", "rev-parse", "refs/heads/main"); main != g.base {
		t.Errorf("main moved to %s", main)
	}
	if log, _ := g.srv.Git("app", "log", "--format=%an %s", g.base+".."+gi.HeadCommit); log != "agentrun agentrun: what the agent left uncommitted\nagent agent: change the readme" {
		t.Errorf("the branch's commits: %q", log)
	}
	// The proxy's refusals are network events with their reasons.
	reasons := map[string]bool{}
	for _, e := range r.events {
		if n, ok := e.(*events.NetworkAccess); ok && n.Reason != nil {
			reasons[*n.Reason] = true
		}
	}
	if !reasons[events.ReasonGitPush] || !reasons[events.ReasonGitScope] {
		t.Errorf("network refusals %v, want git_push and git_scope", reasons)
	}
	// The real token reached the server, never the agent: the server saw
	// it on the fetch, and nothing the agent or the stream holds has it.
	var fetchedWithToken bool
	for _, q := range g.srv.Requests() {
		if q.Authorized && strings.HasSuffix(q.Path, "/git-upload-pack") {
			fetchedWithToken = true
		}
		if strings.Contains(q.Path, "other") && q.Status == 200 {
			t.Errorf("the server answered the other repository: %+v", q)
		}
	}
	if !fetchedWithToken {
		t.Error("no fetch reached the server with the token")
	}
	for what, b := range map[string][]byte{"stdout": r.stdout, "stderr": r.stderr, "raw": r.raw} {
		if strings.Contains(string(b), gitToken) {
			t.Errorf("%s holds the token", what)
		}
	}
	if !strings.Contains(out, "\n0") && !strings.HasSuffix(strings.TrimSpace(out), "0") {
		t.Errorf("the agent's environment has a ghp_ token: %q", out)
	}
}

// TestGitPatch: push patch writes a patch that git am applies to the base
// commit, and end.git names it; the server is untouched.
func TestGitPatch(t *testing.T) {
	g := newGitRepo(t)
	srv, err := mockmodel.Start(mockmodel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	patch := filepath.Join(t.TempDir(), "change.patch")
	args := append(append(claudeArgs(t, srv, true), g.args("patch")...), "--patch", patch)
	r := runAgentrun(t, invocation{args: args, prompt: "scenario:probe probe<<<printf 'bin\\000ary' > blob.bin; echo x >> README.md; git add -A; git commit -qm one; echo y > two.txt>>>",
		env: []string{"AGENTRUN_CLAUDE_BIN=" + claudeBin(t), "GIT_TOKEN=" + gitToken}})
	end := r.end()
	if end == nil || end.Status != events.StatusFinished || end.Git == nil || end.Git.Patch == nil || *end.Git.Patch != patch || end.Git.Pushed {
		t.Fatalf("end %+v git %s", end, show(end.Git))
	}
	clone := t.TempDir()
	for _, c := range [][]string{{"clone", "-q", g.srv.Dir("app"), "."}, {"checkout", "-q", g.base}, {"am", "-q", patch}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, c...)...)
		cmd.Dir = clone
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", c, err, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(clone, "blob.bin")); string(b) != "bin\x00ary" {
		t.Errorf("the binary file after git am: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(clone, "two.txt")); string(b) != "y\n" {
		t.Errorf("the uncommitted file after git am: %q", b)
	}
	if refs, _ := g.srv.Git("app", "for-each-ref", "--format=%(refname)"); refs != "refs/heads/main" {
		t.Errorf("the server's refs changed: %q", refs)
	}
}
