package cli

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// TestMockCommandsOfTheDocs runs the copy-paste commands of docs/local.md
// ("Trying it with the mock model"), one per runtime, as a shell runs
// them, against a fresh mock on the port they name: each ends finished
// and the agent wrote hello.txt in its directory.
func TestMockCommandsOfTheDocs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "local.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "### Trying it with the mock model\n")
	if !ok {
		t.Fatal("docs/local.md has no section \"Trying it with the mock model\"")
	}
	_, block, _ := strings.Cut(sec, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	var cmds []string
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(line, "agentrun run ") {
			cmds = append(cmds, line)
		}
	}
	runtimes := map[string]bool{}
	path := []string{filepath.Dir(agentrun)}
	for _, c := range []struct{ runtime, env, bin string }{
		{"claude-code", "AGENTRUN_CLAUDE_BIN", "claude"}, {"codex", "AGENTRUN_CODEX_BIN", "codex"},
		{"pi", "AGENTRUN_PI_BIN", "pi"}, {"dsh", "AGENTRUN_DSH_BIN", "dsh"},
	} {
		path = append(path, filepath.Dir(cliBin(t, c.runtime, c.env, c.bin)))
	}
	path = append(path, os.Getenv("PATH"))
	for _, cmd := range cmds {
		rt := strings.Fields(cmd)[3]
		runtimes[rt] = true
		t.Run(rt, func(t *testing.T) {
			srv, err := mockmodel.Start(mockmodel.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			u, _ := url.Parse(srv.URL())
			ws := t.TempDir()
			line := strings.ReplaceAll(cmd, "8099", u.Port())
			line = strings.ReplaceAll(line, `"$(mktemp -d)"`, ws)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sh := exec.CommandContext(ctx, "sh", "-c", line)
			var env []string
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "AGENTRUN_") {
					env = append(env, kv)
				}
			}
			sh.Env = append(env, "PATH="+strings.Join(path, ":"), "HOME="+t.TempDir())
			var stdout, stderr bytes.Buffer
			sh.Stdout, sh.Stderr = &stdout, &stderr
			if err := sh.Run(); err != nil || !strings.Contains(stdout.String(), "[end] finished") {
				t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", line, err, stdout.String(), stderr.String())
			}
			if b, err := os.ReadFile(filepath.Join(ws, "hello.txt")); err != nil || string(b) != "hello\n" {
				t.Errorf("hello.txt: %q, %v", b, err)
			}
		})
	}
	for _, rt := range []string{"claude-code", "codex", "pi", "dsh"} {
		if !runtimes[rt] {
			t.Errorf("docs/local.md has no mock command for %s", rt)
		}
	}
}
