package kubectlplugin

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// TestBuild: the AgentRun made from run's flags, field by field.
func TestBuild(t *testing.T) {
	base := runSpec{Runtime: "claude-code", Prompt: "fix the tests"}
	for _, c := range []struct {
		name  string
		edit  func(*runSpec)
		check func(*v1alpha1.AgentRun) string
	}{
		{"minimal: generated name, the prompt, nothing else", func(*runSpec) {}, func(r *v1alpha1.AgentRun) string {
			if r.GenerateName != "claude-code-" || r.Name != "" || r.Namespace != "team" || *r.Spec.Prompt.Text != "fix the tests" ||
				r.Spec.Runtime != "claude-code" || r.Spec.Model != "" || r.Spec.Timeout != "" || r.Spec.Network != nil ||
				r.Spec.Limits != nil || r.Spec.Subagents != nil || r.Spec.Retention != nil || r.Labels != nil {
				return "unexpected fields"
			}
			return ""
		}},
		{"name, model, timeout, ttl, limits, no subagents", func(s *runSpec) {
			s.Name, s.Model, s.Timeout, s.TTL, s.MaxTurns, s.MaxTokens, s.NoSubagents = "fix-1", "sonnet", "30m", "1h", 20, 100000, true
		}, func(r *v1alpha1.AgentRun) string {
			if r.Name != "fix-1" || r.GenerateName != "" || r.Spec.Model != "sonnet" || r.Spec.Timeout != "30m" ||
				r.Spec.Retention.JobTTLAfterEnd != "1h" || *r.Spec.Limits.MaxTurns != 20 || *r.Spec.Limits.MaxTokens != 100000 || *r.Spec.Subagents {
				return "fields not set"
			}
			return ""
		}},
		{"allow-host makes the network custom", func(s *runSpec) {
			s.AllowHosts, s.AddHosts = []string{"mock.test:8080", "10.0.0.5:8080"}, []string{"mock.test=10.0.0.5"}
		}, func(r *v1alpha1.AgentRun) string {
			n := r.Spec.Network
			if n.Mode != v1alpha1.NetworkCustom || strings.Join(n.AllowHosts, ",") != "mock.test:8080,10.0.0.5:8080" ||
				len(n.AddHosts) != 1 || n.AddHosts[0] != (v1alpha1.HostAddress{Name: "mock.test", IP: "10.0.0.5"}) {
				return "network not set"
			}
			return ""
		}},
		{"timeout in plain seconds, as agentrun run takes it", func(s *runSpec) { s.Timeout = "300" }, func(r *v1alpha1.AgentRun) string {
			if r.Spec.Timeout != "5m0s" {
				return "timeout " + r.Spec.Timeout + ", want 5m0s"
			}
			return ""
		}},
		{"network none", func(s *runSpec) { s.Network = "none" }, func(r *v1alpha1.AgentRun) string {
			if r.Spec.Network.Mode != v1alpha1.NetworkNone {
				return "mode not none"
			}
			return ""
		}},
		{"env, credentials and labels", func(s *runSpec) {
			s.Env = []string{"ANTHROPIC_BASE_URL=http://mock.test:8080", "EMPTY=", "EQ=a=b"}
			s.Credentials = []string{"ANTHROPIC_API_KEY=agent-keys/anthropic@api.anthropic.com:443,[fd00::5]:8443,http://mock.test:8080"}
			s.Labels = []string{"team=a", "agentrun.dev/batch=nightly"}
		}, func(r *v1alpha1.AgentRun) string {
			env := r.Spec.Env
			if len(env) != 3 || env[0].Name != "ANTHROPIC_BASE_URL" || env[0].Value != "http://mock.test:8080" ||
				env[1].Name != "EMPTY" || env[1].Value != "" || env[2].Name != "EQ" || env[2].Value != "a=b" {
				return "env not set"
			}
			cr := r.Spec.Credentials
			if len(cr) != 1 || cr[0].Name != "ANTHROPIC_API_KEY" || cr[0].ValueFrom.SecretKeyRef.Name != "agent-keys" ||
				cr[0].ValueFrom.SecretKeyRef.Key != "anthropic" || strings.Join(cr[0].Hosts, ",") != "api.anthropic.com:443,[fd00::5]:8443,http://mock.test:8080" {
				return "credential not set"
			}
			if len(r.Labels) != 2 || r.Labels["team"] != "a" || r.Labels["agentrun.dev/batch"] != "nightly" {
				return "labels not set"
			}
			return ""
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := base
			c.edit(&s)
			run, err := s.build("team")
			if err != nil {
				t.Fatal(err)
			}
			if run.APIVersion != "agentrun.dev/v1alpha1" || run.Kind != "AgentRun" {
				t.Errorf("type %s %s", run.APIVersion, run.Kind)
			}
			if msg := c.check(run); msg != "" {
				t.Errorf("%s: %+v", msg, run)
			}
		})
	}
}

// TestBuildRejects: each malformed flag is refused with how to write it.
func TestBuildRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*runSpec)
		want string
	}{
		{"no runtime", func(s *runSpec) { s.Runtime = "" }, "--runtime is required"},
		{"blank prompt", func(s *runSpec) { s.Prompt = " \n" }, "the prompt is empty"},
		{"timeout", func(s *runSpec) { s.Timeout = "half an hour" }, `--timeout "half an hour": seconds (300) or a duration (30m, 2h)`},
		{"zero timeout", func(s *runSpec) { s.Timeout = "0" }, `--timeout "0": seconds (300) or a duration (30m, 2h), more than 0`},
		{"negative timeout", func(s *runSpec) { s.Timeout = "-1m" }, `--timeout "-1m"`},
		{"ttl not a duration", func(s *runSpec) { s.TTL = "1 day" }, `--ttl "1 day": a duration such as 1h`},
		{"negative ttl", func(s *runSpec) { s.TTL = "-5m" }, `--ttl "-5m": a duration such as 1h`},
		{"network", func(s *runSpec) { s.Network = "open" }, `--network "open": use none, full or custom`},
		{"allow-host with network full", func(s *runSpec) { s.Network, s.AllowHosts = "full", []string{"a.test"} },
			"--allow-host makes the network custom; drop --network full"},
		{"add-host", func(s *runSpec) { s.AddHosts = []string{"mock.test=not-an-ip"} }, `--add-host "mock.test=not-an-ip": write NAME=IP`},
		{"env", func(s *runSpec) { s.Env = []string{"NOVALUE"} }, `--env "NOVALUE": write NAME=VALUE`},
		{"label", func(s *runSpec) { s.Labels = []string{"bad key=x"} }, `--label "bad key=x"`},
		{"credential without hosts", func(s *runSpec) { s.Credentials = []string{"K=s/k"} }, `--credential "K=s/k": no @HOST:PORT; write NAME=SECRET/KEY@HOST:PORT`},
		{"credential without key", func(s *runSpec) { s.Credentials = []string{"K=s@h:443"} }, "no SECRET/KEY"},
		{"credential without name", func(s *runSpec) { s.Credentials = []string{"=s/k@h:443"} }, "no NAME="},
		{"credential host without port", func(s *runSpec) { s.Credentials = []string{"K=s/k@api.anthropic.com"} }, `host "api.anthropic.com" has no port`},
		{"credential bad port", func(s *runSpec) { s.Credentials = []string{"K=s/k@h:443,h:99999"} }, `host "h:99999" has no port`},
		{"credential plain HTTP without port", func(s *runSpec) { s.Credentials = []string{"K=s/k@http://mock.test"} }, `host "http://mock.test" has no port`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := runSpec{Runtime: "claude-code", Prompt: "p"}
			c.edit(&s)
			_, err := s.build("ns")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestReadPrompt(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "task.md")
	if err := os.WriteFile(file, []byte("from the file\nline 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		file  string
		args  []string
		want  string
		error string
	}{
		{"argument", "", []string{"do it"}, "do it", ""},
		{"file", file, nil, "from the file\nline 2\n", ""},
		{"stdin", "-", nil, "from stdin", ""},
		{"both", file, []string{"do it"}, "", "not both"},
		{"none", "", nil, "", "expected one prompt argument, got 0"},
		{"two arguments", "", []string{"do", "it"}, "", "expected one prompt argument, got 2: quote the prompt"},
		{"missing file", filepath.Join(dir, "nope"), nil, "", "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := readPrompt(strings.NewReader("from stdin"), c.file, c.args)
			if c.error != "" {
				if err == nil || !strings.Contains(err.Error(), c.error) {
					t.Errorf("error %v, want %q", err, c.error)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// TestRunDryRunClient: `run --dry-run` prints a manifest that needs no
// cluster, reads back into the same AgentRun, and carries no status or
// creation time.
func TestRunDryRunClient(t *testing.T) {
	var out, errOut bytes.Buffer
	env := Env{Stdin: strings.NewReader("the prompt\nfrom stdin\n"), Stdout: &out, Stderr: &errOut}
	code := env.Main(context.Background(), []string{"run", "--runtime", "claude-code", "--model", "sonnet", "-f", "-",
		"--timeout", "5m", "--credential", "ANTHROPIC_API_KEY=agent-keys/anthropic@api.anthropic.com:443",
		"--allow-host", "github.com", "--dry-run"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := `apiVersion: agentrun.dev/v1alpha1
kind: AgentRun
metadata:
  generateName: claude-code-
spec:
  credentials:
  - hosts:
    - api.anthropic.com:443
    name: ANTHROPIC_API_KEY
    valueFrom:
      secretKeyRef:
        key: anthropic
        name: agent-keys
  model: sonnet
  network:
    allowHosts:
    - github.com
    mode: Custom
  prompt:
    text: |
      the prompt
      from stdin
  runtime: claude-code
  timeout: 5m
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	var back v1alpha1.AgentRun
	if err := yaml.UnmarshalStrict(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	built, err := runSpec{Runtime: "claude-code", Model: "sonnet", Prompt: "the prompt\nfrom stdin\n", Timeout: "5m",
		Credentials: []string{"ANTHROPIC_API_KEY=agent-keys/anthropic@api.anthropic.com:443"}, AllowHosts: []string{"github.com"}}.build("")
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(&back, built) {
		t.Errorf("the printed manifest reads back as\n%+v\nwant\n%+v", back, built)
	}
}

// TestCommandLine: usage errors and help, before any cluster is needed.
func TestCommandLine(t *testing.T) {
	for _, c := range []struct {
		name       string
		args       []string
		code       int
		out, error string
	}{
		{"no verb", nil, exitUsage, "", "Usage:\n  kubectl agentrun get"},
		{"help", []string{"-h"}, 0, "kubectl agentrun logs NAME [-f]", ""},
		{"help verb", []string{"help"}, 0, "kubectl agentrun usage", ""},
		{"unknown verb", []string{"describe"}, exitUsage, "", `unknown verb "describe"`},
		{"flag before the verb that is not a connection flag", []string{"-f", "logs"}, exitUsage, "", "unknown shorthand flag: 'f'"},
		{"verb help", []string{"logs", "-h"}, 0, "Usage: kubectl agentrun logs NAME", ""},
		{"verb help names the connection flags", []string{"get", "--help"}, 0, "-A, --all-namespaces", ""},
		{"verb help names the connection flags", []string{"get", "--help"}, 0, "kubectl's connection flags work too: --kubeconfig", ""},
		{"logs without a name", []string{"logs"}, exitUsage, "", "kubectl agentrun logs: expected one run name, got 0 arguments"},
		{"logs format", []string{"logs", "x", "--format", "html"}, exitUsage, "", `--format "html": use text, rich or jsonl`},
		{"get two names", []string{"get", "a", "b"}, exitUsage, "", "expected at most one run name, got 2"},
		{"get name with -A", []string{"get", "a", "-A"}, exitUsage, "", "drop -A and -l with NAME"},
		{"usage by", []string{"usage", "--by", "user"}, exitUsage, "", `--by "user": use namespace, runtime or model`},
		{"usage since", []string{"usage", "--since", "yesterday"}, exitUsage, "", `--since "yesterday": a duration such as 30m, 24h or 7d`},
		{"usage argument", []string{"usage", "team-a"}, exitUsage, "", `unexpected argument "team-a"`},
		{"run without runtime", []string{"run", "--dry-run", "do it"}, exitUsage, "", "--runtime is required"},
		{"run dry-run value", []string{"run", "--runtime", "pi", "--dry-run=maybe", "do it"}, exitUsage, "", `--dry-run "maybe"`},
		{"run without prompt", []string{"run", "--runtime", "pi"}, exitUsage, "", "expected one prompt argument, got 0"},
		{"unknown flag", []string{"get", "--watch"}, exitUsage, "", "unknown flag: --watch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut}.Main(context.Background(), c.args)
			if code != c.code || !strings.Contains(out.String(), c.out) || !strings.Contains(errOut.String(), c.error) {
				t.Errorf("exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", code, c.code, out.String(), c.out, errOut.String(), c.error)
			}
		})
	}
}
