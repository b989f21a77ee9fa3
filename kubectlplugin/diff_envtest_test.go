package kubectlplugin

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// TestDiff: diff prints the patch the manager kept byte for byte (for git
// am), says where a pushed branch is with a command that quotes what the
// agent could name, and fails with the reason when there is nothing to
// print; get shows CHANGE for runs with spec.git.
func TestDiff(t *testing.T) {
	cl := newCluster(t)
	git := func(push v1alpha1.PushMode) v1alpha1.AgentRunSpec {
		return v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode,
			Git: &v1alpha1.GitWorkspace{Repository: "https://git.example.com/team/app.git", Push: &v1alpha1.GitPush{Mode: push}}}
	}
	base, head := strings.Repeat("a", 40), strings.Repeat("b", 40)
	ended := func(g *v1alpha1.GitStatus) v1alpha1.AgentRunStatus {
		st := finishedStatus("p")
		st.Git = g
		return st
	}
	patch := []byte("From " + head + " Mon Sep 17 00:00:00 2001\nSubject: [PATCH] fix\n\n\x1b]0;pwned\a\n+\tx\n")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(patch)
	zw.Close()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cl.ns, Name: "patched-patch"}, BinaryData: map[string][]byte{patchKey: gz.Bytes()}}
	if err := cl.c.Create(cl.ctx, cm); err != nil {
		t.Fatal(err)
	}
	changed := v1alpha1.GitStatus{Repository: "https://git.example.com/team/app.git", Ref: "refs/heads/main", BaseCommit: base, HeadCommit: head,
		Commits: 1, FilesChanged: 1, Insertions: 1, Deletions: 0, DiffStat: "+1 -0", Paths: []string{"main.go"}}
	withPatch := changed
	withPatch.PatchConfigMap = cm.Name
	pushed := changed
	pushed.Branch, pushed.Pushed = "agentrun/x';rm -rf ~'", true
	unpublished := changed
	unpublished.Detail = "not published: the run ended failed (--push-when succeeded)"
	cl.run("patched", nil, git(v1alpha1.PushPatch), ended(&withPatch))
	cl.run("pushed", nil, git(v1alpha1.PushBranch), ended(&pushed))
	cl.run("kept", nil, git(v1alpha1.PushPatch), ended(&unpublished))
	cl.run("plain", nil, v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeCodex}, finishedStatus("q"))

	r := cl.plugin("diff", "patched", "-n", cl.ns)
	if r.code != 0 || r.stdout != string(patch) {
		t.Errorf("diff patched: exit %d, stdout %q, want the patch byte for byte; stderr %s", r.code, r.stdout, r.stderr)
	}
	r = cl.plugin("diff", "pushed", "-n", cl.ns)
	if want := `git fetch 'https://git.example.com/team/app.git' 'agentrun/x'\'';rm -rf ~'\''' && git log -p '` + base + `'..FETCH_HEAD`; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("diff pushed: exit %d\n%s\nwant %s", r.code, r.stdout, want)
	}
	r = cl.plugin("diff", "kept", "-n", cl.ns)
	if r.code != exitError || !strings.Contains(r.stderr, "was not published: not published: the run ended failed") {
		t.Errorf("diff kept: exit %d, stderr %q", r.code, r.stderr)
	}
	r = cl.plugin("diff", "plain", "-n", cl.ns)
	if r.code != exitError || !strings.Contains(r.stderr, "has no spec.git") {
		t.Errorf("diff plain: exit %d, stderr %q", r.code, r.stderr)
	}
	r = cl.plugin("diff", "patched", "--stat", "-n", cl.ns)
	for _, want := range []string{"change:     1 commits, 1 files changed, 1 insertions(+), 0 deletions(-)", "patch:      ConfigMap patched-patch", "  main.go"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("diff --stat lacks %q:\n%s", want, r.stdout)
		}
	}
	r = cl.plugin("get", "-n", cl.ns)
	for _, want := range []string{"CHANGE", "+1 -0 patch", "+1 -0 agentrun/x';rm -rf ~'"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get lacks %q:\n%s", want, r.stdout)
		}
	}
}
