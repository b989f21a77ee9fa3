package charts

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// The admin policy against a real kube-apiserver (envtest, whose API
// server has the ValidatingAdmissionPolicy plugin on, as every 1.30+ one
// does): the chart installed with policy.enabled in one `helm install`,
// then AgentRuns created as a namespace user would.

// warnings collects the API server's warnings to a client.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}

func policyClient(t *testing.T, cfg *rest.Config) (client.Client, *warnings) {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	cfg = rest.CopyConfig(cfg)
	w := &warnings{}
	cfg.WarningHandlerWithContext = w
	k, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return k, w
}

// agentRun is a run the strict policy below allows: claude-code, with
// limits and the hosts it reaches, everything else defaulted. (The typed
// client always sends spec.network, a struct, so the network is given
// here; runsWithoutNetwork leaves it out as a YAML manifest does.)
func agentRun(ns string, change func(*v1alpha1.AgentRunSpec)) *v1alpha1.AgentRun {
	run := &v1alpha1.AgentRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "run-"},
		Spec: v1alpha1.AgentRunSpec{
			Runtime: v1alpha1.RuntimeClaudeCode,
			Prompt:  v1alpha1.PromptSource{Text: ptr.To("Say hello")},
			Limits:  &v1alpha1.Limits{MaxTurns: ptr.To[int32](10), MaxTokens: ptr.To[int64](100000)},
			Network: &v1alpha1.Network{Mode: v1alpha1.NetworkCustom, AllowHosts: []string{"api.anthropic.com:443"}},
		},
	}
	if change != nil {
		change(&run.Spec)
	}
	return run
}

// runWithoutNetwork is agentRun(ns, nil) without spec.network, as a
// manifest that leaves it out reaches the API server.
func runWithoutNetwork(ns string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agentrun.dev/v1alpha1", "kind": "AgentRun",
		"metadata": map[string]any{"namespace": ns, "generateName": "run-"},
		"spec": map[string]any{
			"runtime": "claude-code", "prompt": map[string]any{"text": "Say hello"},
			"limits": map[string]any{"maxTurns": int64(10), "maxTokens": int64(100000)},
		},
	}}
}

// tryCreate creates the run as a dry run (nothing is stored): the API
// server defaults, validates and admits it as it would a real one.
func tryCreate(ctx context.Context, k client.Client, run client.Object) error {
	return k.Create(ctx, run.DeepCopyObject().(client.Object), client.DryRunAll)
}

// isolateHelm gives the test's helm its own cache, config and data
// folders, so that no repository or plugin of the machine's is used.
func isolateHelm(t *testing.T) {
	t.Helper()
	for _, v := range []string{"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, t.TempDir())
	}
}

// impersonating is a client of cfg's API server acting as user, an
// authenticated member of groups.
func impersonating(t *testing.T, cfg *rest.Config, user string, groups ...string) client.Client {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	k, _ := policyClient(t, cfg)
	return k
}

// waitFor polls until check returns "", for things the API server picks up
// asynchronously (a new policy, binding, param kind or CRD default).
func waitFor(t *testing.T, what string, timeout time.Duration, check func() string) {
	t.Helper()
	start := time.Now()
	last := ""
	for time.Since(start) < timeout {
		if last = check(); last == "" {
			t.Logf("%s after %s", what, time.Since(start).Round(100*time.Millisecond))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not after %s: %s", what, timeout, last)
}

// refusedWith is "" when err is the policy's refusal with want in it.
func refusedWith(err error, want string) string {
	switch {
	case err == nil:
		return "created"
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want):
		return err.Error()
	}
	return ""
}

// TestAdmissionPolicy installs the chart with the strict preset (tightened
// and widened through policy.spec) for the namespaces labelled
// agentrun.dev/policy=strict, and a network default of custom with the
// model's host: each forbidden spec is refused with the message that says
// what to change, the allowed ones pass, other namespaces are not checked;
// then the same release without the network default, in Warn mode, and
// without its AgentRunPolicy.
func TestAdmissionPolicy(t *testing.T) {
	isolateHelm(t)
	ctx := context.Background()
	c := startCluster(t)
	k, warned := policyClient(t, c.cfg)
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "policed", Labels: map[string]string{"agentrun.dev/policy": "strict"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "free"}},
	} {
		if err := k.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	runner := "agentrun-runner:" + appVersion(t)
	values := []string{
		"--set", "policy.preset=strict",
		"--set", `policy.namespaceSelector.matchLabels.agentrun\.dev/policy=strict`,
		"--set-json", `policy.spec={"allowedRuntimes":["claude-code","pi"],"allowedImages":["` + runner + `","registry.example.com/agentrun/*"],` +
			`"maxTurns":50,"maxTokens":2000000,"allowedRuntimeClasses":["gvisor"],` +
			`"allowedGitRepositories":["https://git.example.com/team/*","https://github.com/org/app","http://git.example.com/plain/app"],"allowedGitBranchPrefixes":["agentrun/","bots/"]}`,
	}
	modelDefault := []string{"--set-json", `defaults.network={"mode":"Custom","allowHosts":["api.anthropic.com:443"]}`}
	// One install: the AgentRunPolicy CRD (crds/) first, then the
	// AgentRun CRD, the policy, its binding and the AgentRunPolicy.
	notes := c.helm(append([]string{"install", "agentrun", "charts/agentrun", "--namespace", "agentrun-system", "--create-namespace"},
		append(values, modelDefault...)...)...)
	for _, want := range []string{"Admin policy: the ValidatingAdmissionPolicy agentrun-policy checks new AgentRuns in the namespaces its namespaceSelector picks",
		"A run that asks for more is refused",
		// The first run keeps the key from the agent.
		"    credentials:\n      - name: ANTHROPIC_API_KEY\n        valueFrom: {secretKeyRef: {name: agent-keys, key: anthropic}}\n        hosts: [api.anthropic.com:443]"} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "forbids network mode Full") {
		t.Errorf("NOTES warn about the network default although it is custom:\n%s", notes)
	}

	// Until the API server has loaded the policy and can read its
	// AgentRunPolicy kind, runs in policed namespaces are refused too
	// (failurePolicy Fail), never let through.
	sandboxNone := agentRun("policed", func(s *v1alpha1.AgentRunSpec) { s.Sandbox = v1alpha1.SandboxNone })
	waitFor(t, "the policy refuses sandbox none", 90*time.Second, func() string {
		return refusedWith(tryCreate(ctx, k, sandboxNone), "spec.sandbox None is not allowed")
	})

	by := "AgentRunPolicy agentrun-policy (namespace policed)"
	for _, tc := range []struct {
		name   string
		change func(*v1alpha1.AgentRunSpec)
		want   string // "" allowed
	}{
		{"defaults and limits", nil, ""},
		{"everything allowed named", func(s *v1alpha1.AgentRunSpec) {
			s.Runtime = v1alpha1.RuntimePi
			s.Timeout = "2h"
			s.Network = &v1alpha1.Network{Mode: v1alpha1.NetworkNone}
			s.Limits = &v1alpha1.Limits{MaxTurns: ptr.To[int32](50), MaxTokens: ptr.To[int64](2000000)}
			s.PodOverrides = &v1alpha1.PodOverrides{Image: runner, ServiceAccountName: "default", RuntimeClassName: ptr.To("gvisor")}
		}, ""},
		{"image under an allowed prefix", func(s *v1alpha1.AgentRunSpec) {
			s.PodOverrides = &v1alpha1.PodOverrides{Image: "registry.example.com/agentrun/runner@sha256:" + strings.Repeat("a", 64)}
		}, ""},
		{"runtime", func(s *v1alpha1.AgentRunSpec) { s.Runtime = v1alpha1.RuntimeCodex },
			"spec.runtime codex is not allowed by " + by + ": use one of claude-code, pi"},
		{"image", func(s *v1alpha1.AgentRunSpec) {
			s.PodOverrides = &v1alpha1.PodOverrides{Image: "evil.example.com/runner:latest"}
		},
			"spec.podOverrides.image evil.example.com/runner:latest is not allowed by " + by + ": use one of " + runner +
				", registry.example.com/agentrun/*, or leave it out (the default runner image)"},
		{"image beside the prefix", func(s *v1alpha1.AgentRunSpec) {
			s.PodOverrides = &v1alpha1.PodOverrides{Image: "registry.example.com/agentrun-evil/runner:1"}
		}, "spec.podOverrides.image registry.example.com/agentrun-evil/runner:1 is not allowed"},
		{"sandbox none", func(s *v1alpha1.AgentRunSpec) { s.Sandbox = v1alpha1.SandboxNone },
			"spec.sandbox None is not allowed by " + by + ": leave spec.sandbox out (Bubblewrap)"},
		{"network full", func(s *v1alpha1.AgentRunSpec) { s.Network = &v1alpha1.Network{Mode: v1alpha1.NetworkFull} },
			"spec.network.mode Full (set, or the default) is not allowed by " + by +
				": set spec.network.mode to Custom and list the hosts the agent needs in spec.network.allowHosts, or set it to None"},
		{"timeout", func(s *v1alpha1.AgentRunSpec) { s.Timeout = "3h" },
			"spec.timeout 3h is longer than " + by + " allows: set spec.timeout to 2h or less"},
		{"no limits", func(s *v1alpha1.AgentRunSpec) { s.Limits = nil },
			"spec.limits.maxTurns is required by " + by + ": set spec.limits.maxTurns to 50 or less"},
		{"turns", func(s *v1alpha1.AgentRunSpec) { s.Limits.MaxTurns = ptr.To[int32](51) },
			"spec.limits.maxTurns 51 is more than " + by + " allows: set spec.limits.maxTurns to 50 or less"},
		{"tokens", func(s *v1alpha1.AgentRunSpec) { s.Limits.MaxTokens = ptr.To[int64](5000000) },
			"spec.limits.maxTokens 5000000 is more than " + by + " allows: set spec.limits.maxTokens to 2000000 or less"},
		{"service account", func(s *v1alpha1.AgentRunSpec) {
			s.PodOverrides = &v1alpha1.PodOverrides{ServiceAccountName: "deployer"}
		},
			"spec.podOverrides.serviceAccountName deployer is not allowed by " + by + ": use one of default, or leave it out (the namespace's default account)"},
		{"runtime class", func(s *v1alpha1.AgentRunSpec) {
			s.PodOverrides = &v1alpha1.PodOverrides{RuntimeClassName: ptr.To("runc")}
		},
			"spec.podOverrides.runtimeClassName runc is not allowed by " + by + ": use one of gvisor, or leave it out (the cluster's default runtime)"},
		{"a repository under an allowed prefix, a patch", gitRun("https://git.example.com/team/app.git", nil), ""},
		{"an allowed repository, the run's own branch", gitRun("https://github.com/org/app", &v1alpha1.GitPush{Mode: v1alpha1.PushBranch}), ""},
		{"an allowed branch prefix", gitRun("https://github.com/org/app", &v1alpha1.GitPush{Mode: v1alpha1.PushBranch, Branch: "bots/fix-1"}), ""},
		{"another repository", gitRun("https://github.com/org/app-evil", nil),
			"spec.git.repository https://github.com/org/app-evil is not allowed by " + by + ": allowed: https://git.example.com/team/*, https://github.com/org/app, http://git.example.com/plain/app"},
		{"beside the prefix", gitRun("https://git.example.com/team-evil/app", nil), "spec.git.repository https://git.example.com/team-evil/app is not allowed"},
		{"a push to main", gitRun("https://github.com/org/app", &v1alpha1.GitPush{Mode: v1alpha1.PushBranch, Branch: "main"}),
			"spec.git.push to the branch main is not allowed by " + by + ": push to a branch starting with agentrun/ or bots/, or use push mode Patch"},
		{"plain http", func(s *v1alpha1.AgentRunSpec) {
			gitRun("https://git.example.com/team/app", nil)(s)
			s.Git.Repository, s.Git.PlainHTTP = "http://git.example.com/plain/app", true
		}, "spec.git.plainHTTP is not allowed by " + by + ": clone over https://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tryCreate(ctx, k, agentRun("policed", tc.change))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if msg := refusedWith(err, tc.want); msg != "" {
				t.Fatalf("got %s\nwant a refusal with %q", msg, tc.want)
			}
			if !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'agentrun-policy' with binding 'agentrun-policy' denied request") {
				t.Errorf("the refusal does not name the policy and binding: %v", err)
			}
		})
	}

	t.Run("the network default is applied, allowed and recorded", func(t *testing.T) {
		run := runWithoutNetwork("policed")
		if err := k.Create(ctx, run); err != nil {
			t.Fatal(err)
		}
		n, _, _ := unstructured.NestedMap(run.Object, "spec", "network")
		if want := map[string]any{"mode": "Custom", "allowHosts": []any{"api.anthropic.com:443"}}; !reflect.DeepEqual(n, want) {
			t.Errorf("spec.network %v, want the chart's default %v", n, want)
		}
	})
	t.Run("namespaces outside the selector are not checked", func(t *testing.T) {
		if err := tryCreate(ctx, k, agentRun("free", func(s *v1alpha1.AgentRunSpec) { s.Sandbox = v1alpha1.SandboxNone; s.Limits = nil })); err != nil {
			t.Errorf("refused outside the policy's namespaces: %v", err)
		}
	})

	// Without the network default, a run that says nothing about the
	// network gets full, which the policy refuses.
	if notes := c.helm(append([]string{"upgrade", "agentrun", "charts/agentrun", "--namespace", "agentrun-system"}, values...)...); !strings.Contains(notes,
		"The policy forbids network mode Full, which is the AgentRun default here") {
		t.Errorf("NOTES do not warn that every run must set spec.network:\n%s", notes)
	}
	waitFor(t, "the generated network default is back", 30*time.Second, func() string {
		return refusedWith(tryCreate(ctx, k, runWithoutNetwork("policed")),
			"spec.network.mode Full (set, or the default) is not allowed by "+by)
	})

	// Warn and Audit: the run is created, and the client is told why it
	// would have been refused.
	c.helm(append([]string{"upgrade", "agentrun", "charts/agentrun", "--namespace", "agentrun-system",
		"--set", "policy.validationActions={Warn,Audit}"}, values...)...)
	waitFor(t, "Warn instead of Deny", 30*time.Second, func() string {
		warned.take()
		if err := tryCreate(ctx, k, sandboxNone); err != nil {
			return err.Error()
		}
		for _, w := range warned.take() {
			if strings.Contains(w, "spec.sandbox None is not allowed by "+by) {
				return ""
			}
		}
		return "no warning"
	})

	// A binding whose AgentRunPolicy is gone refuses instead of lifting
	// the rules.
	c.helm(append([]string{"upgrade", "agentrun", "charts/agentrun", "--namespace", "agentrun-system"}, values...)...)
	c.must(c.kubectl, "delete", "agentrunpolicy", "agentrun-policy")
	// (The API server reports a configuration error as Invalid.)
	waitFor(t, "a missing AgentRunPolicy refuses", 30*time.Second, func() string {
		err := tryCreate(ctx, k, agentRun("policed", nil))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "no params found for policy binding with `Deny` parameterNotFoundAction") {
			return fmt.Sprint(err)
		}
		return ""
	})
}

// gitRun gives a run spec.git with a token.
func gitRun(repo string, push *v1alpha1.GitPush) func(*v1alpha1.AgentRunSpec) {
	return func(s *v1alpha1.AgentRunSpec) {
		s.Git = &v1alpha1.GitWorkspace{Repository: repo, Push: push, Credential: &v1alpha1.GitCredential{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "git"}, Key: "token"}}}
	}
}
