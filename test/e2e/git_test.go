//go:build e2e

package e2e

import (
	"encoding/json"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/internal/gitserver"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// gitHost is the git server's name on the node bridge (its certificate is
// for it; the runs map it with spec.network.addHosts).
const gitHost = "git.e2e.test"

const gitToken = "ghp_e2e-git-token-1a2b3c4d5e6f"

// TestGitWorkspace: two AgentRuns with spec.git against a real git server
// (git http-backend over TLS, a token required) on the node bridge; the
// real claude-code in the sandbox commits and leaves a change. One keeps
// its change as a patch in the run's ConfigMap, which `kubectl agentrun
// diff` prints for git am; the other's reaches exactly its own branch.
// status.git says both, and the token is in neither the stream nor the
// agent's reach.
func TestGitWorkspace(t *testing.T) {
	t.Parallel()
	srv, err := gitserver.Start(gitserver.Options{Token: gitToken, Names: []string{gitHost}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	base, err := srv.Create("app", map[string]string{"README.md": "# app\n", "src/lib.go": "package lib\n"})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.URL())
	port := forward(t, u.Host)
	secret := `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "e2e-git"}, "stringData": {"token": "` + gitToken + `"}}`
	if _, err := kubeIn(strings.NewReader(secret), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	ca, _ := kubeIn(strings.NewReader(string(srv.CAPEM())), "create", "configmap", "e2e-git-ca", "--from-file=ca.pem=/dev/stdin", "--dry-run=client", "-o", "yaml")
	if _, err := kubeIn(strings.NewReader(ca), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}

	_, mock := startMock(t, mockmodel.Options{})
	script := `echo changed >> README.md; printf 'new\nfile\n' > new.txt; git add -A 2>&1; git commit -qm "agent: change the readme" 2>&1; ` +
		`echo more > uncommitted.txt; env | grep -c ghp_ || true`
	repo := "https://" + gitHost + ":" + strconv.Itoa(port) + "/app.git"
	gitRun := func(name, push string) agentRun {
		r := claudeRun(name, "probe", mock)
		r.prompt = "scenario:probe probe<<<" + script + ">>>"
		r.addHosts = []string{gitHost + "=" + nodeIP}
		r.allowHosts = []string{nodeIP + ":" + strconv.Itoa(port)}
		r.spec = "  upstreamCA: {name: e2e-git-ca, key: ca.pem}\n  git:\n    repository: " + repo +
			"\n    credential:\n      secretKeyRef: {name: e2e-git, key: token}\n" + push
		return r
	}
	patched := gitRun("e2e-git-patch", "")
	branched := gitRun("e2e-git-branch", "    push: {mode: Branch}\n")
	patched.apply(t)
	branched.apply(t)

	for _, name := range []string{patched.name, branched.name} {
		run := waitEnded(t, name, 4*time.Minute)
		st := run.Status
		g := st.Git
		result := ""
		if st.Result != nil {
			result = *st.Result
		}
		t.Logf("%s: %s %s, the agent's probe said %q, status.git %+v", name, st.Phase, st.EndStatus, result, g)
		if st.Phase != v1alpha1.PhaseSucceeded || g == nil || g.BaseCommit != base || g.Commits != 2 || g.FilesChanged != 3 ||
			g.DiffStat == "" || g.Ref != "refs/heads/main" {
			t.Fatalf("%s: phase %s detail %q, status.git %+v", name, st.Phase, st.Detail, g)
		}
		if st.Result == nil || strings.TrimSpace(*st.Result) == "" || !strings.Contains(*st.Result, "0") {
			t.Errorf("%s: the agent's probe (how many ghp_ variables it sees) said %v", name, st.Result)
		}
		stream, _ := eventLog(t, st.PodName)
		for _, e := range stream {
			if b, _ := json.Marshal(e); strings.Contains(string(b), gitToken) {
				t.Errorf("%s: the token is in the event stream: %s", name, b)
			}
		}
	}

	// The patch: in the run's ConfigMap, printed by the plugin, applied
	// by git am onto the base.
	run := getRun(t, patched.name)
	if g := run.Status.Git; g.PatchConfigMap != patched.name+"-patch" || g.Pushed {
		t.Fatalf("status.git %+v, want the patch in %s-patch", g, patched.name)
	}
	owner, _ := kube("get", "configmap", patched.name+"-patch", "-o", "jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {.immutable}")
	if owner != "AgentRun/"+patched.name+" true" {
		t.Errorf("the patch ConfigMap's owner and immutability: %q", owner)
	}
	plugin := buildPlugin(t)
	diff := plugin(time.Minute, "diff", patched.name)
	if diff.code != 0 || !strings.Contains(diff.stdout, "agent: change the readme") || !strings.Contains(diff.stdout, "+more") {
		t.Fatalf("kubectl agentrun diff: exit %d\n%s\n%s", diff.code, diff.stdout, diff.stderr)
	}
	gitAm(t, srv.Dir("app"), base, diff.stdout)
	if get := plugin(time.Minute, "get", patched.name); !strings.Contains(get.stdout, run.Status.Git.DiffStat+" patch") {
		t.Errorf("kubectl agentrun get:\n%s", get.stdout)
	}

	// The branch: exactly the run's, main untouched.
	run = getRun(t, branched.name)
	g := run.Status.Git
	if !g.Pushed || !strings.HasPrefix(g.Branch, "agentrun/"+branched.name+"-") || g.PatchConfigMap != "" {
		t.Fatalf("status.git %+v, want a push to agentrun/%s-<uid>", g, branched.name)
	}
	if head, _ := srv.Git("app", "rev-parse", "refs/heads/"+g.Branch); head != g.HeadCommit {
		t.Errorf("the server's %s is at %q, status.git.headCommit %s", g.Branch, head, g.HeadCommit)
	}
	if main, _ := srv.Git("app", "rev-parse", "refs/heads/main"); main != base {
		t.Errorf("main moved to %s", main)
	}
	if wide, _ := kube("get", "agentrun", branched.name, "-o", "wide"); !strings.Contains(wide, g.Branch) || !strings.Contains(wide, g.DiffStat) {
		t.Errorf("kubectl get -o wide does not show the change:\n%s", wide)
	}
}

// gitAm applies a patch with git am onto base in a fresh clone of the
// bare repository, as a user applies `kubectl agentrun diff`.
func gitAm(t *testing.T, bare, base, patch string) {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{{"clone", "-q", bare, dir}, {"-C", dir, "checkout", "-q", base}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	am := exec.Command("git", "-C", dir, "-c", "user.name=e2e", "-c", "user.email=e2e@example.com", "am", "-q")
	am.Stdin = strings.NewReader(patch)
	if out, err := am.CombinedOutput(); err != nil {
		t.Fatalf("git am of kubectl agentrun diff: %v\n%s", err, out)
	}
	if out, _ := exec.Command("git", "-C", dir, "log", "--format=%s", base+"..HEAD").Output(); string(out) != "agentrun: what the agent left uncommitted\nagent: change the readme\n" {
		t.Errorf("the applied commits: %q", out)
	}
}
