package controllers

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/sidecar/patchlog"
)

func gitSpec(push *v1alpha1.GitPush) func(*v1alpha1.AgentRunSpec) {
	return func(s *v1alpha1.AgentRunSpec) {
		s.Git = &v1alpha1.GitWorkspace{Repository: "https://git.example.com/team/app.git", Ref: "main", Depth: ptr.To[int32](1),
			Credential: &v1alpha1.GitCredential{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "git"}, Key: "token"}, Auth: v1alpha1.GitAuthBasic, Username: "oauth2"},
			Push: push}
	}
}

// TestGitJob: spec.git becomes the runner's --repo flags, the token a
// Secret reference in the runner's environment only (never an argument,
// never --pass-env), and, for a patch, the patch container.
func TestGitJob(t *testing.T) {
	tests := []struct {
		name      string
		push      *v1alpha1.GitPush
		wantFlags []string
		wantPatch bool
	}{
		{"a patch by default", nil,
			[]string{"--repo", "https://git.example.com/team/app.git", "--ref", "main", "--git-credential", "AGENTRUN_GIT_TOKEN",
				"--git-auth", "basic:oauth2", "--patch", "/agentrun/change.patch"}, true},
		{"the run's own branch", &v1alpha1.GitPush{Mode: v1alpha1.PushBranch, When: v1alpha1.PushWhenAlways},
			[]string{"--repo", "https://git.example.com/team/app.git", "--ref", "main", "--git-credential", "AGENTRUN_GIT_TOKEN",
				"--git-auth", "basic:oauth2", "--push", "branch", "--push-when", "always", "--branch", "agentrun/fix-0b9ad7a1"}, false},
		{"a named branch", &v1alpha1.GitPush{Mode: v1alpha1.PushBranch, Branch: "bots/fix"},
			[]string{"--repo", "https://git.example.com/team/app.git", "--ref", "main", "--git-credential", "AGENTRUN_GIT_TOKEN",
				"--git-auth", "basic:oauth2", "--push", "branch", "--branch", "bots/fix"}, false},
		{"report only", &v1alpha1.GitPush{Mode: v1alpha1.PushNone},
			[]string{"--repo", "https://git.example.com/team/app.git", "--ref", "main", "--git-credential", "AGENTRUN_GIT_TOKEN",
				"--git-auth", "basic:oauth2", "--push", "none"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := BuildJob(newRun("fix", gitSpec(tt.push)), JobConfig{RunnerImage: "runner:1"})
			pod := job.Spec.Template.Spec
			args := pod.Containers[0].Args
			i := slices.Index(args, "--repo")
			if i < 0 || !slices.Equal(args[i:i+len(tt.wantFlags)], tt.wantFlags) {
				t.Errorf("args %q\nwant the run's flags %q in order", args, tt.wantFlags)
			}
			var token *corev1.EnvVar
			for j, e := range pod.Containers[0].Env {
				if e.Name == podcontract.GitTokenEnv {
					token = &pod.Containers[0].Env[j]
				}
			}
			if token == nil || token.Value != "" || token.ValueFrom == nil || token.ValueFrom.SecretKeyRef.Name != "git" || token.ValueFrom.SecretKeyRef.Key != "token" {
				t.Errorf("the token variable %+v, want a reference to Secret git key token", token)
			}
			for j := 0; j+1 < len(args); j++ {
				if args[j] == "--pass-env" && args[j+1] == podcontract.GitTokenEnv {
					t.Errorf("the token variable is passed to the agent: %q", args)
				}
			}
			var patch *corev1.Container
			for j, c := range pod.InitContainers {
				if c.Name == podcontract.PatchContainer {
					patch = &pod.InitContainers[j]
				}
			}
			if (patch != nil) != tt.wantPatch {
				t.Fatalf("patch container %v, want %v", patch != nil, tt.wantPatch)
			}
			if patch != nil {
				want := []string{"tail", "--linger", "60s", "--patch", podcontract.PatchFile, podcontract.EventsFile}
				if !reflect.DeepEqual(patch.Args, want) || len(patch.Env) != 0 || len(patch.Ports) != 0 ||
					patch.RestartPolicy == nil || *patch.RestartPolicy != corev1.ContainerRestartPolicyAlways ||
					len(patch.VolumeMounts) != 1 || !patch.VolumeMounts[0].ReadOnly {
					t.Errorf("patch container %+v", patch)
				}
			}
		})
	}
}

// TestStatusGit: end.git in status, with the diff stat of the printer
// column, paths bounded as the CRD requires, and what became of the patch.
func TestStatusGit(t *testing.T) {
	branch := "agentrun/fix-0b9ad7a1"
	base := events.Git{Repository: "https://git.example.com/team/app.git", Ref: "refs/heads/main", BaseCommit: "aaa", HeadCommit: "bbb",
		Commits: 2, FilesChanged: 3, Insertions: 40, Deletions: 7, Paths: []string{"a.go", "b.go"}}
	many := base
	many.Paths = nil
	for i := range 30 {
		many.Paths = append(many.Paths, fmt.Sprintf("%03d-%s", i, strings.Repeat("é", 200)))
	}
	pushed := base
	pushed.Branch, pushed.Pushed = &branch, true
	unchanged := base
	unchanged.HeadCommit, unchanged.Commits, unchanged.FilesChanged, unchanged.Insertions, unchanged.Deletions, unchanged.Paths = "aaa", 0, 0, 0, 0, nil
	unchanged.Detail = "nothing changed: nothing published"
	tests := []struct {
		name  string
		git   *events.Git
		kept  *patchKept
		check func(*v1alpha1.GitStatus) string
	}{
		{"no end.git", nil, nil, func(g *v1alpha1.GitStatus) string {
			if g != nil {
				return "want nil"
			}
			return ""
		}},
		{"a patch kept", &base, &patchKept{ConfigMap: "fix-patch"}, func(g *v1alpha1.GitStatus) string {
			if g.DiffStat != "+40 -7" || g.PatchConfigMap != "fix-patch" || g.Commits != 2 || g.FilesChanged != 3 || g.Pushed || g.Branch != "" ||
				!slices.Equal(g.Paths, []string{"a.go", "b.go"}) || g.Detail != "" {
				return fmt.Sprintf("%+v", g)
			}
			return ""
		}},
		{"pushed to its branch", &pushed, nil, func(g *v1alpha1.GitStatus) string {
			if g.Branch != branch || !g.Pushed || g.PatchConfigMap != "" {
				return fmt.Sprintf("%+v", g)
			}
			return ""
		}},
		{"nothing changed", &unchanged, nil, func(g *v1alpha1.GitStatus) string {
			if g.DiffStat != "" || g.Detail != unchanged.Detail {
				return fmt.Sprintf("%+v", g)
			}
			return ""
		}},
		{"too large", &base, &patchKept{TooLarge: 2 << 20}, func(g *v1alpha1.GitStatus) string {
			if !g.PatchTruncated || g.PatchConfigMap != "" || !strings.Contains(g.Detail, "too large for a ConfigMap") {
				return fmt.Sprintf("%+v", g)
			}
			return ""
		}},
		{"lost", &base, &patchKept{Problem: "the patch is not kept: the patch log is incomplete"}, func(g *v1alpha1.GitStatus) string {
			if g.Detail != "the patch is not kept: the patch log is incomplete" {
				return fmt.Sprintf("%+v", g)
			}
			return ""
		}},
		{"many long paths", &many, nil, func(g *v1alpha1.GitStatus) string {
			if len(g.Paths) != maxStatusGitPaths {
				return fmt.Sprintf("%d paths", len(g.Paths))
			}
			for _, p := range g.Paths {
				if len(p) > maxStatusGitPath || !strings.HasSuffix(p, "…") {
					return fmt.Sprintf("path of %d bytes: %q", len(p), p)
				}
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if msg := tt.check(statusGit(tt.git, tt.kept)); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// gitEnd is the end event of a run whose change was kept as a patch.
func gitEnd() *events.End {
	end := anEnd("done")
	end.Git = &events.Git{Repository: "https://git.example.com/team/app.git", Ref: "refs/heads/main", BaseCommit: strings.Repeat("a", 40),
		HeadCommit: strings.Repeat("b", 40), Patch: events.String(podcontract.PatchFile), Commits: 1, FilesChanged: 1, Insertions: 3, Deletions: 1,
		Paths: []string{"main.go"}}
	return end
}

// patchLog is the patch container's log of patch, as `agentrun tail
// --patch` writes it.
func patchLog(t *testing.T, patch []byte) []byte {
	t.Helper()
	file := filepath.Join(t.TempDir(), "change.patch")
	if err := os.WriteFile(file, patch, 0o600); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := patchlog.Write(&b, file); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// patchDone also ends the patch container.
func patchDone(at time.Time) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		agentExited(at, 0, "Completed", message(gitEnd()), true)(s)
		s.InitContainerStatuses = append(s.InitContainerStatuses, corev1.ContainerStatus{Name: podcontract.PatchContainer, Image: "agentrun-runner:test",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
				StartedAt: metav1.NewTime(at.Add(-time.Minute)), FinishedAt: metav1.NewTime(at.Add(time.Second))}}})
	}
}

// TestHarvestKeepsPatch: a run's patch goes from the patch container's log
// into an immutable ConfigMap the AgentRun owns, read only once that
// container has terminated; status.git names it.
func TestHarvestKeepsPatch(t *testing.T) {
	h := newHarness(t)
	run := h.createRun("fix", gitSpec(nil))
	pod := h.startPod(h.job("fix"))
	patch := []byte("From bbbb Mon Sep 17 00:00:00 2001\nSubject: [PATCH] fix\n\n--- a/main.go\n+++ b/main.go\n@@ -1 +1 @@\n-a\n+b\n\x00binary\n")
	h.logs.setContainer(h.ns, pod.Name, podcontract.PatchContainer, patchLog(t, patch), nil)

	// The agent ended, the patch container not yet: nothing is harvested.
	h.setStatus(pod, agentExited(h.clock.Now(), 0, "Completed", message(gitEnd()), true))
	h.consistently("no harvest before the patch container terminated", 500*time.Millisecond, func() string {
		if isTerminal(h.get("fix").Status) {
			return "harvested early"
		}
		return ""
	})
	h.setStatus(pod, patchDone(h.clock.Now()))
	got := h.phaseIs("fix", v1alpha1.PhaseSucceeded)
	g := got.Status.Git
	if g == nil || g.PatchConfigMap != PatchConfigMapName("fix") || g.DiffStat != "+3 -1" || g.HeadCommit != strings.Repeat("b", 40) {
		t.Fatalf("status.git %+v", g)
	}
	cm := &corev1.ConfigMap{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: g.PatchConfigMap}, cm); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(cm, run) || cm.Immutable == nil || !*cm.Immutable || cm.Annotations["agentrun.dev/head-commit"] != g.HeadCommit {
		t.Errorf("ConfigMap %+v", cm.ObjectMeta)
	}
	zr, err := gzip.NewReader(bytes.NewReader(cm.BinaryData[PatchKey]))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(zr); !bytes.Equal(b, patch) {
		t.Errorf("the ConfigMap holds %q, want %q", b, patch)
	}
	h.waitEvent("fix", "Normal/PatchKept: the agent's change is in ConfigMap fix-patch")
}

// TestHarvestPatchNotKept: a patch that cannot be kept never holds the run
// back or fails it: status.git says why.
func TestHarvestPatchNotKept(t *testing.T) {
	h := newHarness(t)
	var tooLarge bytes.Buffer
	fmt.Fprintln(&tooLarge, "agentrun-patch too-large 2000000")
	full := patchLog(t, []byte("From x\n"))
	tests := []struct {
		name       string
		log        []byte
		err        error
		wantDetail string
		truncated  bool
	}{
		{"too-large", tooLarge.Bytes(), nil, "too large for a ConfigMap", true},
		{"cut", full[:len(full)/2], nil, "the patch is not kept: the patch log is incomplete", false},
		{"forged", bytes.Replace(full, []byte("agentrun-patch v1 gzip "), []byte("agentrun-patch v1 gzip 1"), 1), nil, "the patch is not kept: the patch log's", false},
		{"forbidden", nil, fmt.Errorf("pods/log is forbidden"), "reading the patch container's log: pods/log is forbidden", false},
	}
	for _, tt := range tests {
		h.createRun(tt.name, gitSpec(nil))
		pod := h.startPod(h.job(tt.name))
		h.logs.setContainer(h.ns, pod.Name, podcontract.PatchContainer, tt.log, tt.err)
		h.setStatus(pod, patchDone(h.clock.Now()))
		if tt.err != nil {
			// A log that cannot be read is tried again for a while.
			h.clock.Step(2*h.graces.EventLog + time.Second)
			h.poke(tt.name)
		}
		got := h.phaseIs(tt.name, v1alpha1.PhaseSucceeded)
		if g := got.Status.Git; g == nil || g.PatchConfigMap != "" || g.PatchTruncated != tt.truncated || !strings.Contains(g.Detail, tt.wantDetail) {
			t.Errorf("%s: status.git %+v, want detail %q", tt.name, g, tt.wantDetail)
		}
		cm := &corev1.ConfigMap{}
		if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: PatchConfigMapName(tt.name)}, cm); !isNotFound(err) {
			t.Errorf("%s: a ConfigMap exists (%v)", tt.name, err)
		}
	}
}

// TestPatchConfigMapNotOurs: a ConfigMap of the same name that is not the
// run's is never overwritten or adopted, and the run still ends.
func TestPatchConfigMapNotOurs(t *testing.T) {
	h := newHarness(t)
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: PatchConfigMapName("taken"), Namespace: h.ns}, Data: map[string]string{"k": "v"}}
	if err := h.c.Create(h.ctx, other); err != nil {
		t.Fatal(err)
	}
	h.createRun("taken", gitSpec(nil))
	pod := h.startPod(h.job("taken"))
	h.logs.setContainer(h.ns, pod.Name, podcontract.PatchContainer, patchLog(t, []byte("From x\n")), nil)
	h.setStatus(pod, patchDone(h.clock.Now()))
	got := h.phaseIs("taken", v1alpha1.PhaseSucceeded)
	if g := got.Status.Git; g == nil || g.PatchConfigMap != "" || !strings.Contains(g.Detail, "a ConfigMap named taken-patch exists and is not this AgentRun's") {
		t.Errorf("status.git %+v", g)
	}
	h.waitEvent("taken", "Warning/PatchNotKept")
	cm := &corev1.ConfigMap{}
	if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(other), cm); err != nil || cm.Data["k"] != "v" || len(cm.OwnerReferences) != 0 {
		t.Errorf("the foreign ConfigMap changed: %+v %v", cm, err)
	}
}

// TestCRDGitValidation: spec.git's rules, with the messages a user sees.
func TestCRDGitValidation(t *testing.T) {
	c, ns := crdClient(t)
	checkSpecs(t, c, ns, "g", []specCase{
		{"a patch", gitSpec(nil), ""},
		{"a branch", gitSpec(&v1alpha1.GitPush{Mode: v1alpha1.PushBranch, Branch: "bots/fix-1"}), ""},
		{"public, no credential", func(s *v1alpha1.AgentRunSpec) { s.Git = &v1alpha1.GitWorkspace{Repository: "https://github.com/a/b"} }, ""},
		{"http without plainHTTP", func(s *v1alpha1.AgentRunSpec) { s.Git = &v1alpha1.GitWorkspace{Repository: "http://git.local/a/b"} },
			"spec.git.repository must be an https:// URL"},
		{"http with plainHTTP", func(s *v1alpha1.AgentRunSpec) {
			s.Git = &v1alpha1.GitWorkspace{Repository: "http://git.local/a/b", PlainHTTP: true}
		}, ""},
		{"a user in the URL", func(s *v1alpha1.AgentRunSpec) {
			s.Git = &v1alpha1.GitWorkspace{Repository: "https://me:tok@github.com/a/b"}
		},
			"spec.git.repository"},
		{"ssh", func(s *v1alpha1.AgentRunSpec) { s.Git = &v1alpha1.GitWorkspace{Repository: "git@github.com:a/b.git"} }, "spec.git.repository"},
		{"an option as ref", func(s *v1alpha1.AgentRunSpec) {
			s.Git = &v1alpha1.GitWorkspace{Repository: "https://github.com/a/b", Ref: "main --upload-pack=x"}
		}, "spec.git.ref"},
		{"a branch for a patch", gitSpec(&v1alpha1.GitPush{Mode: v1alpha1.PushPatch, Branch: "x"}), "spec.git.push.branch is for push.mode Branch"},
		{"an option as branch", gitSpec(&v1alpha1.GitPush{Mode: v1alpha1.PushBranch, Branch: "-f"}), "spec.git.push.branch"},
		{"a token without the sandbox", func(s *v1alpha1.AgentRunSpec) { gitSpec(nil)(s); s.Sandbox = v1alpha1.SandboxNone },
			"spec.git.credential needs the Bubblewrap sandbox"},
		{"a volume", func(s *v1alpha1.AgentRunSpec) {
			gitSpec(nil)(s)
			s.Workspace = &v1alpha1.Workspace{ClaimName: "src"}
		}, "spec.git clones into an empty emptyDir"},
		{"upstreamCA for the forge", func(s *v1alpha1.AgentRunSpec) {
			gitSpec(nil)(s)
			s.UpstreamCA = &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}, Key: "ca.pem"}
		}, ""},
		{"bad auth", func(s *v1alpha1.AgentRunSpec) { gitSpec(nil)(s); s.Git.Credential.Auth = "Digest" }, `spec.git.credential.auth: Unsupported value: "Digest"`},
		{"bad push mode", gitSpec(&v1alpha1.GitPush{Mode: "Force"}), `spec.git.push.mode: Unsupported value: "Force"`},
		{"a branch up and out", gitSpec(&v1alpha1.GitPush{Mode: v1alpha1.PushBranch, Branch: "agentrun/../main"}), "spec.git.push.branch is not a branch name git takes"},
		{"a lock file as branch", gitSpec(&v1alpha1.GitPush{Mode: v1alpha1.PushBranch, Branch: "agentrun/x.lock"}), "spec.git.push.branch is not a branch name git takes"},
		{"HEAD as branch", gitSpec(&v1alpha1.GitPush{Mode: v1alpha1.PushBranch, Branch: "HEAD"}), "spec.git.push.branch is not a branch name git takes"},
		{"a ref up and out", func(s *v1alpha1.AgentRunSpec) { gitSpec(nil)(s); s.Git.Ref = "main..x" }, "spec.git.ref is not a git ref name"},
		{"a ref like an option", func(s *v1alpha1.AgentRunSpec) { gitSpec(nil)(s); s.Git.Ref = "-main" }, "spec.git.ref"},
	})
	// spec.git is immutable like the rest of the spec.
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "immutable", Namespace: ns}, Spec: validSpec()}
	gitSpec(nil)(&run.Spec)
	if err := c.Create(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	run.Spec.Git.Repository = "https://git.example.com/other/repo"
	if err := c.Update(context.Background(), run); err == nil || !strings.Contains(err.Error(), "spec is immutable") {
		t.Errorf("changing spec.git: %v", err)
	}
}

// TestPolicyGitPrefixes: an AgentRunPolicy's repository prefix names the
// host and the slash after it, so it cannot match another host.
func TestPolicyGitPrefixes(t *testing.T) {
	c, _ := crdClient(t)
	for prefix, ok := range map[string]bool{
		"*": true, "https://*": true, "https://github.com/org/*": true, "https://github.com/org/app": true, "https://git.example.com:8443/*": true,
		"https://git.example.com*": false, "https://git.example.com": true, "github.com/org/*": false, "https://github.com/*/app": false,
	} {
		p := &v1alpha1.AgentRunPolicy{ObjectMeta: metav1.ObjectMeta{Name: "prefix"}, Spec: v1alpha1.AgentRunPolicySpec{AllowedGitRepositories: []string{prefix}}}
		err := c.Create(context.Background(), p, client.DryRunAll)
		if (err == nil) != ok {
			t.Errorf("allowedGitRepositories %q: %v, want accepted %v", prefix, err, ok)
		}
	}
}
