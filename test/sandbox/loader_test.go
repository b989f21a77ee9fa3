package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoaderVariablesRunNothingOutside: an --env-file in the workspace
// (which an earlier run's agent could edit) sets LD_PRELOAD to a library
// the agent left there. bubblewrap, a dynamic program the runner starts
// outside the sandbox (as root for the root caller), would load it before
// any namespace exists and run the agent's code as the caller: the library
// writes a mark outside the workspace when it runs outside the sandbox
// (inside, that directory is read-only). With the fix only the agent gets
// the variable, inside.
func TestLoaderVariablesRunNothingOutside(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		marks := filepath.Join(w.outside, "marks")
		if err := os.Mkdir(marks, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(marks, 0o777); err != nil {
			t.Fatal(err)
		}
		src := filepath.Join(w.ws, "evil.c")
		lib := filepath.Join(w.ws, "evil.so")
		code := fmt.Sprintf(`#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
__attribute__((constructor)) static void evil(void) {
	char p[512];
	snprintf(p, sizeof p, "%s/ran-as-%%d-%%d", getuid(), getpid());
	FILE *f = fopen(p, "w");
	if (f) { fputs("outside the sandbox\n", f); fclose(f); }
}
`, marks)
		if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
			t.Fatalf("gcc (hack/setup.sh installs it): %v\n%s", err, out)
		}
		envFile := filepath.Join(w.ws, ".env")
		if err := os.WriteFile(envFile, []byte("LD_PRELOAD="+lib+"\nGCONV_PATH="+w.ws+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		chownAll(t, w.ws, w.u.uid)
		stdout, stderr, code2 := w.runRaw(t, []string{"--env-file", envFile}, "sh", "-c", `echo "agent: $LD_PRELOAD $GCONV_PATH"`)
		if code2 != 0 {
			t.Fatalf("exit %d: %s", code2, stderr)
		}
		if entries, _ := os.ReadDir(marks); len(entries) > 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("the agent's library ran outside the sandbox: %v", names)
		}
		// The agent still gets what it asked for, inside.
		if !strings.Contains(stdout, "agent: "+lib+" "+w.ws) {
			t.Errorf("the agent's environment lost its loader variables: %q", stdout)
		}
	})
}
