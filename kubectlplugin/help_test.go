package kubectlplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/internal/version"
)

func mainOf(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	var stdout, stderr bytes.Buffer
	code := Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}.Main(context.Background(), args)
	return code, stdout.String(), stderr.String()
}

// TestHelpOfEveryVerb: -h and --help of every verb print its usage on
// stdout and exit 0, without a cluster.
func TestHelpOfEveryVerb(t *testing.T) {
	var names []string
	for name := range verbs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !strings.Contains(usageText, "  kubectl agentrun "+name+" ") {
			t.Errorf("the usage text does not list %s", name)
		}
		for _, h := range []string{"-h", "--help"} {
			code, stdout, stderr := mainOf(t, nil, name, h)
			if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage: kubectl agentrun "+name) || !strings.Contains(stdout, "\nFlags:\n") {
				t.Errorf("kubectl agentrun %s %s: exit %d, stderr %q, stdout:\n%s", name, h, code, stderr, stdout)
			}
		}
	}
	for _, h := range []string{"-h", "--help", "help"} {
		if code, stdout, _ := mainOf(t, nil, h); code != 0 || stdout != usageText {
			t.Errorf("kubectl agentrun %s: exit %d, stdout %q", h, code, stdout)
		}
	}
}

// TestVersion: version (and --version) prints the version, the commit and
// the pinned CLIs without a cluster; -o json as one object.
func TestVersion(t *testing.T) {
	noConfig := []string{"KUBECONFIG=" + filepath.Join(t.TempDir(), "none"), "HOME=" + t.TempDir()}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, stderr := mainOf(t, noConfig, args...)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "kubectl-agentrun "+version.Version+"\ncommit ") {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", args, code, stderr, stdout)
		}
		for _, c := range adapters.CLIs {
			if !strings.Contains(stdout, c.Package+" "+c.Version) {
				t.Errorf("%v does not name %s %s", args, c.Package, c.Version)
			}
		}
	}
	code, stdout, _ := mainOf(t, noConfig, "version", "-o", "json")
	var info version.Info
	if err := json.Unmarshal([]byte(stdout), &info); code != 0 || err != nil || info.Version != version.Version || len(info.CLIs) != len(adapters.CLIs) {
		t.Errorf("version -o json: exit %d, %v, %q", code, err, stdout)
	}
	if code, _, stderr := mainOf(t, noConfig, "version", "-o", "yaml"); code != exitUsage || !strings.Contains(stderr, `--output "yaml": use text or json`) {
		t.Errorf("version -o yaml: exit %d, %q", code, stderr)
	}
}

// TestNoCluster: without a kubeconfig every verb that needs the cluster
// says what to do and exits with exitNoCluster, which no run outcome uses.
func TestNoCluster(t *testing.T) {
	for _, c := range runExitCodes {
		if c == exitNoCluster {
			t.Fatalf("exitNoCluster %d is also a run's exit code", c)
		}
	}
	home := t.TempDir()
	missing := filepath.Join(t.TempDir(), "kubeconfig")
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("clusters: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no KUBECONFIG, no ~/.kube/config", []string{"KUBECONFIG=", "HOME=" + home}, []string{"get"},
			"kubectl agentrun get: no cluster to talk to: no kubeconfig was found (KUBECONFIG is unset and ~/.kube/config does not exist, and this is not a Pod). Pass --kubeconfig FILE or set KUBECONFIG"},
		{"KUBECONFIG names no file", []string{"KUBECONFIG=" + missing, "HOME=" + home}, []string{"usage"},
			"no cluster to talk to: no kubeconfig was found (KUBECONFIG=" + missing + " names no readable kubeconfig"},
		{"--kubeconfig names no file", []string{"HOME=" + home}, []string{"run", "--kubeconfig", missing, "--runtime", "codex", "hi"},
			"kubectl agentrun run: cannot load the kubeconfig: stat " + missing + ": no such file or directory. Fix the file, or pass another one"},
		{"a broken kubeconfig", []string{"KUBECONFIG=" + bad, "HOME=" + home}, []string{"logs", "x"}, "cannot load the kubeconfig: error loading config file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			code, stdout, stderr := mainOf(t, tt.env, tt.args...)
			if code != exitNoCluster || stdout != "" || !strings.Contains(stderr, tt.want) || strings.Contains(stderr, "KUBERNETES_MASTER") {
				t.Errorf("exit %d (want %d), stdout %q, stderr %q, want %q", code, exitNoCluster, stdout, stderr, tt.want)
			}
		})
	}
}
