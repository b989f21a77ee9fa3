package cli

import (
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// TestMistakesNameTheCause: with the real claude-code against the mock,
// an output file that cannot be written is reported as such (--raw on a
// full disk: the run goes on and exits 5, not failed blaming the CLI), a
// missing directory is named and not made, and --timeout takes a
// duration.
func TestMistakesNameTheCause(t *testing.T) {
	srv, err := mockmodel.Start(mockmodel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	u, _ := url.Parse(srv.URL())
	addr := "127.0.0.1:" + u.Port()
	c := &claudeCodeCLI
	env := []string{c.binEnv() + "=" + c.bin(t)}
	run := func(extra ...string) *textResult {
		return runText(t, c.loopbackArgs("http://"+addr, t.TempDir(), append([]string{"--allow-host", addr}, extra...)...), nil, env, time.Minute)
	}

	r := run("--raw", "/dev/full", "--", "say hi")
	if end := r.end(); r.exit != 5 || end == nil || end.Status != events.StatusFinished {
		t.Errorf("--raw /dev/full: exit %d, end %+v; want 5 and finished", r.exit, end)
	}
	if !strings.Contains(r.stderr, "[agentrun] --raw /dev/full: no space left on device after 0 bytes: the raw output is incomplete from there on; the run and its events go on") {
		t.Errorf("--raw /dev/full: stderr %q", r.stderr)
	}

	const missing = "/nonexistent-agentrun-test/dir"
	for _, flag := range []string{"--raw", "--summary"} {
		r = run(flag, missing+"/out.json", "--", "say hi")
		want := flag + " " + missing + "/out.json: the directory " + missing + " does not exist; create it, or pass a file in an existing directory"
		end := r.end()
		switch {
		case end == nil:
			t.Errorf("%s in a missing directory: no end", flag)
		case flag == "--raw" && (r.exit != 2 || end.Status != events.StatusRejected || !strings.Contains(end.Detail, want)):
			// Made before the run: refused before it.
			t.Errorf("--raw in a missing directory: exit %d, end %+v; want 2, rejected and %q", r.exit, end, want)
		case flag == "--summary" && (r.exit != 5 || end.Status != events.StatusFinished || !strings.Contains(r.stderr, "[agentrun] "+want)):
			// Written at the end: the run happened, its summary is lost.
			t.Errorf("--summary in a missing directory: exit %d, end %+v, stderr %q; want 5, finished and %q", r.exit, end, r.stderr, want)
		}
		if _, err := os.Stat("/nonexistent-agentrun-test"); !os.IsNotExist(err) {
			t.Errorf("%s made the missing directory: %v", flag, err)
			os.RemoveAll("/nonexistent-agentrun-test")
		}
	}

	r = run("--timeout", "5m", "--", "say hi")
	if end := r.end(); r.exit != 0 || end == nil || end.Status != events.StatusFinished {
		t.Errorf("--timeout 5m: exit %d, end %+v", r.exit, end)
	}
}
