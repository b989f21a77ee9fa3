package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

// TestClaudeCodeStreamEndsEarly: when a model stream ends mid-call without
// an error (a gateway that gives up on it), claude-code 2.1.328 fetches the
// same call again without streaming (its fallback; with
// CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK=1 it fails the run instead).
// The broken call shows as a usage event without output, the fetched one
// with its exact counts, and the run goes on.
func TestClaudeCodeStreamEndsEarly(t *testing.T) {
	r := runScenario(t, "tool", mockmodel.Options{EndStreamsEarly: 1})
	end := r.end()
	if end == nil || end.Status != "finished" || end.Result == nil || *end.Result != "Done: wrote hello.txt" {
		t.Fatalf("end %+v; stderr:\n%s", end, r.stderr)
	}
	l := r.srv.Ledger()
	if len(l) < 3 || !l[0].Aborted || l[1].Stream || l[1].Step != 0 {
		t.Fatalf("ledger %+v: want the call that ended early, then the same step without streaming", l)
	}
	if got, want := r.types(), "start network prompt usage tool_start usage tool text usage end"; got != want {
		t.Errorf("types:\n got %s\nwant %s", got, want)
	}
	checkStreamBreak(t, r)
}

// TestClaudeCodeStreamCut: when the connection of a model stream breaks
// mid-call (the proxy passes the break on, as the network would have),
// claude-code 2.1.328 streams the same call again; the broken call shows
// as a usage event without output when claude-code wrote its start before
// the break reached it, else not at all, and the run goes on.
func TestClaudeCodeStreamCut(t *testing.T) {
	r := runScenario(t, "tool", mockmodel.Options{CutStreams: 1})
	end := r.end()
	if end == nil || end.Status != "finished" || end.Result == nil || *end.Result != "Done: wrote hello.txt" {
		t.Fatalf("end %+v; stderr:\n%s", end, r.stderr)
	}
	l := r.srv.Ledger()
	if len(l) < 3 || !l[0].Aborted || !l[0].Stream || !l[1].Stream || l[1].Aborted || l[1].Step != 0 {
		t.Fatalf("ledger %+v: want the cut call, then the same step streamed again", l)
	}
	if got := r.types(); got != "start network prompt tool_start usage tool text usage end" &&
		got != "start network prompt usage tool_start usage tool text usage end" {
		t.Errorf("types: %s; want the broken call's usage event or none before tool_start", got)
	}
	checkStreamBreak(t, r)
}

// checkStreamBreak: the counts match the mock's, the tool ran once, and
// the raw output translates to the same stream.
func checkStreamBreak(t *testing.T, r *mockRun) {
	t.Helper()
	for _, err := range mockmodel.VerifyUsage(r.events, r.srv.Ledger(), false) {
		t.Error(err)
	}
	if b, err := os.ReadFile(filepath.Join(r.workdir, "hello.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("the tool did not run once: %q %v", b, err)
	}
	checkRawReplays(t, r.result, true)
}
