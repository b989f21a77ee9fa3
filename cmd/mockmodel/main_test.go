package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// TestHelp: --help and -h print the flags and every scenario on stdout
// and exit 0; a bad flag says what to do on stderr and exits 2.
func TestHelp(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "mockmodel")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, h := range []string{"--help", "-h"} {
		cmd := exec.Command(bin, h)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || stderr.Len() > 0 || !strings.HasPrefix(string(out), "Usage: mockmodel [flags]") || !strings.Contains(string(out), "  -slow-interval duration") {
			t.Fatalf("%s: %v, stderr %q, stdout:\n%s", h, err, stderr.String(), out)
		}
		for _, s := range mockmodel.Scenarios {
			if !strings.Contains(string(out), "  "+s.Name+" ") {
				t.Errorf("%s does not list the scenario %s", h, s.Name)
			}
		}
	}
	out, err := exec.Command(bin, "--nope").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "mockmodel: flag provided but not defined: -nope; mockmodel --help lists") {
		t.Errorf("--nope: %v %q", err, out)
	}
}
