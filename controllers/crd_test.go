package controllers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// The CRD's own validation, against the real API server: enums, defaults
// and CEL rules, with the messages a user sees.

func crdClient(t *testing.T) (client.Client, string) {
	t.Helper()
	c, err := client.New(apiServer(t), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "crd-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return c, ns.Name
}

func validSpec() v1alpha1.AgentRunSpec {
	return v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode, Prompt: v1alpha1.PromptSource{Text: ptr.To("hi")}}
}

func TestCRDDefaults(t *testing.T) {
	c, ns := crdClient(t)
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: ns}, Spec: validSpec()}
	if err := c.Create(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	s := run.Spec
	if s.Timeout != "1h" || s.Sandbox != v1alpha1.SandboxBubblewrap || s.Network.Mode != v1alpha1.NetworkFull ||
		s.Subagents == nil || !*s.Subagents {
		t.Errorf("defaults not applied: %+v", s)
	}
}

// specCase is one spec the CRD must accept (wantErr "") or refuse with a
// message that contains wantErr.
type specCase struct {
	name    string
	edit    func(*v1alpha1.AgentRunSpec)
	wantErr string // "" = accepted
}

// checkSpecs creates each case's spec, from validSpec, as a dry run.
func checkSpecs(t *testing.T, c client.Client, ns, prefix string, tests []specCase) {
	t.Helper()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := validSpec()
			tt.edit(&spec)
			run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%d", prefix, i), Namespace: ns}, Spec: spec}
			err := c.Create(context.Background(), run, client.DryRunAll)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("rejected a good spec: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("accepted a bad spec; want %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("error %q\nwant it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestCRDValidation(t *testing.T) {
	c, ns := crdClient(t)
	tests := []specCase{
		{"minimal", func(*v1alpha1.AgentRunSpec) {}, ""},
		{"every runtime: codex", func(s *v1alpha1.AgentRunSpec) { s.Runtime = v1alpha1.RuntimeCodex }, ""},
		{"every runtime: pi", func(s *v1alpha1.AgentRunSpec) { s.Runtime = v1alpha1.RuntimePi }, ""},
		{"every runtime: dsh", func(s *v1alpha1.AgentRunSpec) { s.Runtime = v1alpha1.RuntimeDsh }, ""},
		{"created cancelled", func(s *v1alpha1.AgentRunSpec) { s.Stop = v1alpha1.StopGraceful }, ""},
		{"unknown runtime", func(s *v1alpha1.AgentRunSpec) { s.Runtime = "gemini" },
			`spec.runtime: Unsupported value: "gemini": supported values: "claude-code", "codex", "pi", "dsh"`},
		{"custom network with hosts", func(s *v1alpha1.AgentRunSpec) {
			s.Network = &v1alpha1.Network{Mode: v1alpha1.NetworkCustom, AllowHosts: []string{"api.anthropic.com", "*.github.com:443"}}
		}, ""},
		{"allowHosts without custom", func(s *v1alpha1.AgentRunSpec) {
			s.Network = &v1alpha1.Network{Mode: v1alpha1.NetworkFull, AllowHosts: []string{"api.anthropic.com"}}
		}, "network.allowHosts is only allowed with network.mode Custom"},
		{"custom without hosts", func(s *v1alpha1.AgentRunSpec) { s.Network = &v1alpha1.Network{Mode: v1alpha1.NetworkCustom} },
			"network.mode Custom needs at least one network.allowHosts entry"},
		{"bad network mode", func(s *v1alpha1.AgentRunSpec) { s.Network = &v1alpha1.Network{Mode: "some"} }, `spec.network.mode: Unsupported value: "some"`},
		{"bad host", func(s *v1alpha1.AgentRunSpec) {
			s.Network = &v1alpha1.Network{Mode: v1alpha1.NetworkCustom, AllowHosts: []string{"http://x.com/"}}
		}, "spec.network.allowHosts[0]"},
		{"denyRead inside the workspace", func(s *v1alpha1.AgentRunSpec) { s.DenyRead = []string{"/workspace/.env"} },
			"denyRead paths must be outside the workspace"},
		{"credentials", func(s *v1alpha1.AgentRunSpec) {
			s.Credentials = []v1alpha1.Credential{credential("ANTHROPIC_API_KEY", "api.anthropic.com:443")}
		}, ""},
		{"credential host without a port", func(s *v1alpha1.AgentRunSpec) {
			s.Credentials = []v1alpha1.Credential{credential("K", "api.anthropic.com")}
		}, "spec.credentials[0].hosts[0]"},
		{"credential hosts with schemes", func(s *v1alpha1.AgentRunSpec) {
			s.Credentials = []v1alpha1.Credential{credential("K", "http://mock-model.test:8080", "https://api.anthropic.com:443", "[fd00::5]:8443")}
		}, ""},
		{"credential host with another scheme", func(s *v1alpha1.AgentRunSpec) {
			s.Credentials = []v1alpha1.Credential{credential("K", "ftp://files.test:21")}
		}, "spec.credentials[0].hosts[0]"},
		{"credential host with a path", func(s *v1alpha1.AgentRunSpec) {
			s.Credentials = []v1alpha1.Credential{credential("K", "http://mock-model.test:8080/v1")}
		}, "spec.credentials[0].hosts[0]"},
		{"credential host both plain and TLS", func(s *v1alpha1.AgentRunSpec) {
			s.Credentials = []v1alpha1.Credential{credential("K", "http://gw.test:8080", "gw.test:8080")}
		}, "listed both as http://HOST:PORT and without http://"},
		{"credential host both plain and https", func(s *v1alpha1.AgentRunSpec) {
			s.Credentials = []v1alpha1.Credential{credential("K", "http://gw.test:8080", "https://gw.test:8080")}
		}, "listed both as http://HOST:PORT and without http://"},
		{"credentials without the sandbox", func(s *v1alpha1.AgentRunSpec) {
			s.Credentials, s.Sandbox = []v1alpha1.Credential{credential("K", "api.test:443")}, v1alpha1.SandboxNone
		}, "spec.credentials needs the Bubblewrap sandbox"},
		{"credentials without a network", func(s *v1alpha1.AgentRunSpec) {
			s.Credentials, s.Network = []v1alpha1.Credential{credential("K", "api.test:443")}, &v1alpha1.Network{Mode: v1alpha1.NetworkNone}
		}, "spec.credentials needs network access"},
		{"telemetry variable in env", func(s *v1alpha1.AgentRunSpec) {
			s.Env = []corev1.EnvVar{{Name: "GITHUB_TOKEN", Value: "x"}, {Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://evil:4318"}}
		}, "spec.env cannot set OTEL_*, TRACEPARENT or TRACESTATE"},
		{"TRACEPARENT in env", func(s *v1alpha1.AgentRunSpec) { s.Env = []corev1.EnvVar{{Name: "TRACEPARENT", Value: "x"}} },
			"spec.env cannot set OTEL_*, TRACEPARENT or TRACESTATE"},
		{"a variable that only looks like one", func(s *v1alpha1.AgentRunSpec) { s.Env = []corev1.EnvVar{{Name: "HOTEL_OTEL_X", Value: "x"}} }, ""},
		{"credential also in env", func(s *v1alpha1.AgentRunSpec) {
			s.Credentials, s.Env = []v1alpha1.Credential{credential("K", "api.test:443")}, []corev1.EnvVar{{Name: "K", Value: "x"}}
		}, "a credential's name is also in spec.env"},
		{"upstreamCA without credentials", func(s *v1alpha1.AgentRunSpec) {
			s.UpstreamCA = &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}, Key: "ca.crt"}
		}, "spec.upstreamCA verifies the credentials' hosts"},
		{"IP allow entry without a port", func(s *v1alpha1.AgentRunSpec) {
			s.Network = &v1alpha1.Network{Mode: v1alpha1.NetworkCustom, AllowHosts: []string{"10.0.0.5"}}
		}, "an IP address needs a port"},
		{"IP allow entry with a port", func(s *v1alpha1.AgentRunSpec) {
			s.Network = &v1alpha1.Network{Mode: v1alpha1.NetworkCustom, AllowHosts: []string{"10.0.0.5:8080"}}
		}, ""},
		{"bad addHosts ip", func(s *v1alpha1.AgentRunSpec) {
			s.Network = &v1alpha1.Network{AddHosts: []v1alpha1.HostAddress{{Name: "gw.test", IP: "not-an-ip"}}}
		}, "addHosts[].ip must be an IPv4 or IPv6 address"},
		{"two prompt sources", func(s *v1alpha1.AgentRunSpec) {
			s.Prompt.SecretKeyRef = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "p"}, Key: "k"}
		}, "prompt: set exactly one of text, configMapKeyRef and secretKeyRef"},
		{"no prompt source", func(s *v1alpha1.AgentRunSpec) { s.Prompt = v1alpha1.PromptSource{} },
			"prompt: set exactly one of text, configMapKeyRef and secretKeyRef"},
		{"prompt from a Secret", func(s *v1alpha1.AgentRunSpec) {
			s.Prompt = v1alpha1.PromptSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "p"}, Key: "k"}}
		}, ""},
		{"empty prompt text", func(s *v1alpha1.AgentRunSpec) { s.Prompt.Text = ptr.To("") }, "spec.prompt.text"},
		{"prompt longer than one argument (150 KB)", func(s *v1alpha1.AgentRunSpec) { s.Prompt.Text = ptr.To(strings.Repeat("测", 50000)) }, ""},
		{"prompt longer than a Pod annotation carries", func(s *v1alpha1.AgentRunSpec) { s.Prompt.Text = ptr.To(strings.Repeat("测", 70000)) },
			"prompt.text is longer than 196608 bytes (192 KiB, what a Pod annotation can carry): put a longer prompt in a ConfigMap"},
		{"timeout", func(s *v1alpha1.AgentRunSpec) { s.Timeout = "45m" }, ""},
		{"timeout zero", func(s *v1alpha1.AgentRunSpec) { s.Timeout = "0s" }, "timeout must be between 1s and 168h"},
		{"timeout too long", func(s *v1alpha1.AgentRunSpec) { s.Timeout = "200h" }, "timeout must be between 1s and 168h"},
		{"timeout not a duration", func(s *v1alpha1.AgentRunSpec) { s.Timeout = "soon" }, "spec.timeout"},
		{"maxTurns zero", func(s *v1alpha1.AgentRunSpec) { s.Limits = &v1alpha1.Limits{MaxTurns: ptr.To[int32](0)} },
			"spec.limits.maxTurns: Invalid value: 0: spec.limits.maxTurns in body should be greater than or equal to 1"},
		{"maxTokens negative", func(s *v1alpha1.AgentRunSpec) { s.Limits = &v1alpha1.Limits{MaxTokens: ptr.To[int64](-5)} },
			"spec.limits.maxTokens"},
		{"bad sandbox", func(s *v1alpha1.AgentRunSpec) { s.Sandbox = "gvisor" }, `spec.sandbox: Unsupported value: "gvisor"`},
		{"relative denyRead", func(s *v1alpha1.AgentRunSpec) { s.DenyRead = []string{"home/.ssh"} }, "denyRead paths must be absolute"},
		{"resume without a claim", func(s *v1alpha1.AgentRunSpec) { s.Session = &v1alpha1.Session{Resume: "abc"} },
			"session.resume needs session.claimName"},
		{"resume with a claim", func(s *v1alpha1.AgentRunSpec) { s.Session = &v1alpha1.Session{ClaimName: "c", Resume: "abc-1"} }, ""},
		{"image with two sources", func(s *v1alpha1.AgentRunSpec) {
			s.Images = []v1alpha1.ImageSource{{Path: ptr.To("a.png"), SecretKeyRef: &v1alpha1.KeyRef{Name: "s", Key: "a.png"}}}
		}, "images: set exactly one of path, configMapKeyRef and secretKeyRef"},
		{"image path escaping the workspace", func(s *v1alpha1.AgentRunSpec) { s.Images = []v1alpha1.ImageSource{{Path: ptr.To("../etc/x.png")}} },
			"images[].path must be relative to the workspace"},
		{"workspace subPath escaping", func(s *v1alpha1.AgentRunSpec) { s.Workspace = &v1alpha1.Workspace{ClaimName: "c", SubPath: "/abs"} },
			"workspace.subPath must be relative"},
		{"negative job TTL", func(s *v1alpha1.AgentRunSpec) { s.Retention = &v1alpha1.Retention{JobTTLAfterEnd: "-1s"} }, "spec.retention.jobTTLAfterEnd"},
		{"job TTL not a duration", func(s *v1alpha1.AgentRunSpec) { s.Retention = &v1alpha1.Retention{JobTTLAfterEnd: "1 day"} }, "spec.retention.jobTTLAfterEnd"},
		{"pod overrides", func(s *v1alpha1.AgentRunSpec) {
			s.PodOverrides = &v1alpha1.PodOverrides{Image: "runner:2", Labels: map[string]string{KueueQueueLabel: "q"},
				Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}, NodeSelector: map[string]string{"a": "b"}}
		}, ""},
	}
	checkSpecs(t, c, ns, "v", tests)
}

// TestCRDSpecImmutableFromCreation: an AgentRun is one run, so its spec
// cannot change from the moment it is created (before the controller has
// even seen it), except for setting spec.stop, which cannot be undone.
// Metadata stays editable.
func TestCRDSpecImmutableFromCreation(t *testing.T) {
	c, ns := crdClient(t)
	ctx := context.Background()
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "immutable", Namespace: ns}, Spec: validSpec()}
	run.Spec.Model = "claude-haiku-4-5"
	if err := c.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	created := run.DeepCopy()
	edits := []struct {
		name string
		edit func(*v1alpha1.AgentRunSpec)
	}{
		{"a changed field", func(s *v1alpha1.AgentRunSpec) { s.Model = "claude-opus-4-5" }},
		{"a removed field", func(s *v1alpha1.AgentRunSpec) { s.Model = "" }},
		{"an added field", func(s *v1alpha1.AgentRunSpec) { s.Limits = &v1alpha1.Limits{MaxTurns: ptr.To[int32](3)} }},
		{"a changed default", func(s *v1alpha1.AgentRunSpec) { s.Timeout = "2h" }},
		{"a changed prompt with stop", func(s *v1alpha1.AgentRunSpec) { s.Prompt.Text = ptr.To("other"); s.Stop = v1alpha1.StopGraceful }},
		{"a new retention", func(s *v1alpha1.AgentRunSpec) { s.Retention = &v1alpha1.Retention{JobTTLAfterEnd: "1m"} }},
		{"a pod override", func(s *v1alpha1.AgentRunSpec) { s.PodOverrides = &v1alpha1.PodOverrides{Image: "runner:2"} }},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			cur := created.DeepCopy()
			e.edit(&cur.Spec)
			err := c.Update(ctx, cur)
			if err == nil || !strings.Contains(err.Error(), "spec is immutable: only spec.stop may be set after creation") {
				t.Fatalf("a spec change before the controller saw the run: %v", err)
			}
		})
	}
	// Metadata stays editable, and a Go client's read-modify-write of an
	// unchanged spec passes.
	if err := c.Get(ctx, client.ObjectKeyFromObject(run), run); err != nil {
		t.Fatal(err)
	}
	run.Labels = map[string]string{"team": "a"}
	if err := c.Update(ctx, run); err != nil {
		t.Fatalf("a label change was rejected: %v", err)
	}
	// Stop is the one change, and it sticks.
	run.Spec.Stop = v1alpha1.StopGraceful
	if err := c.Update(ctx, run); err != nil {
		t.Fatalf("setting spec.stop was rejected: %v", err)
	}
	if run.Generation != 2 {
		t.Errorf("generation %d after the cancel, want 2 (the controller reports it as observed)", run.Generation)
	}
	run.Spec.Stop = ""
	err := c.Update(ctx, run)
	if err == nil || !strings.Contains(err.Error(), "spec.stop cannot be unset") {
		t.Fatalf("unsetting spec.stop: %v", err)
	}
	// A server-side apply of the same manifest (what GitOps tools do)
	// passes unchanged.
	if err := c.Get(ctx, client.ObjectKeyFromObject(run), run); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, run); err != nil {
		t.Fatalf("an unchanged update was rejected: %v", err)
	}
}

// TestImmutabilityRuleCoversEverySpecField: the immutability rule names
// every spec field but cancel, so a field added to the API later cannot
// escape it unnoticed.
func TestImmutabilityRuleCoversEverySpecField(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", "agentrun.dev_agentruns.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]struct {
							Required    []string       `json:"required"`
							Properties  map[string]any `json:"properties"`
							Validations []struct {
								Rule string `json:"rule"`
							} `json:"x-kubernetes-validations"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	var rule string
	for _, v := range spec.Validations {
		if strings.Contains(v.Rule, "oldSelf.runtime") {
			rule = v.Rule
		}
	}
	if rule == "" {
		t.Fatal("no immutability rule on spec")
	}
	required := spec.Required
	for field := range spec.Properties {
		if field == "stop" {
			if strings.Contains(rule, "stop") {
				t.Error("the immutability rule must leave spec.stop out")
			}
			continue
		}
		if !strings.Contains(rule, "self."+field+" == oldSelf."+field) {
			t.Errorf("the immutability rule does not compare spec.%s", field)
		}
		optional := !slices.Contains(required, field)
		if optional && !strings.Contains(rule, "has(self."+field+") == has(oldSelf."+field+")") {
			t.Errorf("the immutability rule does not compare the presence of spec.%s", field)
		}
	}
}

// TestNewRunReadsInProgress: a new AgentRun reads back with
// status.observedGeneration 0 (the status default) before the controller
// wrote anything, so kstatus does not call a run nobody looked at yet
// Current.
func TestNewRunReadsInProgress(t *testing.T) {
	c, ns := crdClient(t)
	ctx := context.Background()
	run := &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: ns}, Spec: validSpec()}
	if err := c.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("AgentRun"))
	if err := c.Get(ctx, client.ObjectKeyFromObject(run), u); err != nil {
		t.Fatal(err)
	}
	og, found, err := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if err != nil || !found || og != 0 {
		t.Fatalf("status.observedGeneration of a new AgentRun: %d found %v (%v); status %v", og, found, err, u.Object["status"])
	}
	res, err := kstatus.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != kstatus.InProgressStatus {
		t.Errorf("kstatus of a new AgentRun: %s (%s), want InProgress", res.Status, res.Message)
	}
}

func TestSamplesAreValid(t *testing.T) {
	c, ns := crdClient(t)
	files, err := filepath.Glob(filepath.Join("..", "config", "samples", "agentrun_*.yaml"))
	onKubernetes := adapters.ImageRuntimes()
	if err != nil || len(files) != len(onKubernetes) {
		t.Fatalf("want one sample per runtime on Kubernetes (%v), found %v (%v)", onKubernetes, files, err)
	}
	runtimes := map[v1alpha1.Runtime]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		run := &v1alpha1.AgentRun{}
		if err := yaml.UnmarshalStrict(b, run); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		run.Namespace = ns
		if err := c.Create(context.Background(), run, client.DryRunAll); err != nil {
			t.Errorf("%s rejected: %v", f, err)
		}
		runtimes[run.Spec.Runtime] = true
	}
	for _, name := range onKubernetes {
		if !runtimes[v1alpha1.Runtime(name)] {
			t.Errorf("samples cover %v, not %s", runtimes, name)
		}
	}
}

// TestDemoManifestsAreValid: the AgentRuns `make demo` applies, against
// the mock and against the real API (ANTHROPIC_API_KEY set), are accepted
// as written.
func TestDemoManifestsAreValid(t *testing.T) {
	c, ns := crdClient(t)
	for _, env := range []string{"ANTHROPIC_API_KEY=", "ANTHROPIC_API_KEY=sk-test"} {
		cmd := exec.Command(filepath.Join("..", "hack", "cluster-demo.sh"), "manifest")
		cmd.Env = append(os.Environ(), env)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s hack/cluster-demo.sh manifest: %v", env, err)
		}
		run := &v1alpha1.AgentRun{}
		if err := yaml.UnmarshalStrict(b, run); err != nil {
			t.Fatalf("%s: %v\n%s", env, err, b)
		}
		run.Namespace = ns
		if err := c.Create(context.Background(), run, client.DryRunAll); err != nil {
			t.Errorf("%s: the demo's AgentRun is rejected: %v", env, err)
		}
	}
}

func credential(name string, hosts ...string) v1alpha1.Credential {
	return v1alpha1.Credential{Name: name, Hosts: hosts, ValueFrom: v1alpha1.CredentialSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "keys"}, Key: "k"}}}
}
