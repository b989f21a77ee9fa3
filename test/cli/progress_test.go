package cli

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/mockmodel"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/sidecar/progress"
)

// TestTailServesProgress: the events sidecar (`agentrun tail
// --progress-addr`) copies the event file to stdout as it grows and serves
// the run's live progress meanwhile: a long poll wakes at a new event, the
// runner's meter file comes along, the end is in the document, and it goes
// on serving until its SIGTERM.
func TestTailServesProgress(t *testing.T) {
	dir := t.TempDir()
	eventsPath, meterPath := filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "meter.json")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(agentrun, "tail", "--linger", "1m", "--poll", "20ms", "--progress-addr", addr, "--meter-file", meterPath, eventsPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }() // it has usually exited by then: os.ErrProcessDone
	base := "http://" + addr + podcontract.ProgressPath
	hc := progress.NewHTTPClient(1)
	ctx := context.Background()

	var doc *progress.Doc
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if doc, err = progress.Fetch(ctx, hc, base, nil, 0); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the sidecar does not serve: %v\n%s", err, stderr.Bytes())
		}
	}
	f, err := os.Create(eventsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := []string{
		`{"schema":1,"type":"start","time":"2026-10-04T13:00:00.000Z","runtime":"claude-code","sandbox":"bubblewrap","network":{"mode":"full","allow":[],"enforced":true},"deny_read":[],"model":null,"cwd":"/w","argv":["claude"],"env":[]}`,
		`{"schema":1,"type":"tool_start","time":"2026-10-04T13:00:01.000Z","id":"t1","parent":null,"name":"Bash","summary":"Bash: sleep 40"}`,
		`{"schema":1,"type":"usage","time":"2026-10-04T13:00:01.100Z","parent":null,"model":"claude-sonnet-5-5","input_tokens":10,"output_tokens":20,"cache_read_tokens":300,"cache_write_tokens":40,"cost_usd":null,"context_tokens":350}`,
	}
	for _, l := range lines {
		f.WriteString(l + "\n")
	}
	// A long poll from the empty document wakes with the new events.
	for doc.ModelCalls == 0 {
		if doc, err = progress.Fetch(ctx, hc, base, ptr(doc.Cursor()), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if doc.Activity != "[main] tool Bash: sleep 40" || *doc.Usage.InputTokens != 10 || doc.ToolCalls != 1 || doc.Meter != nil {
		t.Errorf("document %+v", doc)
	}
	if err := progress.WriteMeterFile(meterPath, progress.Meter{Calls: 1, InputTokens: 10, OutputTokens: 20, CacheReadTokens: 300, CacheWriteTokens: 40}); err != nil {
		t.Fatal(err)
	}
	for doc.Meter == nil {
		if doc, err = progress.Fetch(ctx, hc, base, ptr(doc.Cursor()), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if doc.Meter.Total() != 370 {
		t.Errorf("meter %+v", doc.Meter)
	}
	end := `{"schema":1,"type":"end","time":"2026-10-04T13:00:41.000Z","status":"finished","exit_code":0,"detail":"","duration_ms":41000,"usage":{"input_tokens":12,"output_tokens":20,"cache_read_tokens":300,"cache_write_tokens":40,"cost_usd":0.01,"by_model":{"claude-sonnet-5-5":{"input_tokens":12,"output_tokens":20,"cache_read_tokens":300,"cache_write_tokens":40,"cost_usd":0.01}}},"result":"ok","session_id":null}`
	f.WriteString(end + "\n")
	for !doc.Ended {
		if doc, err = progress.Fetch(ctx, hc, base, ptr(doc.Cursor()), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if *doc.Usage.InputTokens != 12 || !strings.HasPrefix(doc.Activity, "[end] finished 41.0s") {
		t.Errorf("ended document %+v", doc)
	}
	// Lingering after the end, it still serves; SIGTERM ends it.
	if _, err := progress.Fetch(ctx, hc, base, nil, 0); err != nil {
		t.Errorf("not serving while it lingers: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("agentrun tail: %v\n%s", err, stderr.Bytes())
	}
	want := strings.Join(append(lines, end), "\n") + "\n"
	if stdout.String() != want {
		t.Errorf("stdout is not the event file:\n%s", stdout.String())
	}
}

// TestMeterFile: with credentials, `agentrun run --meter-file` keeps the
// proxy's count while the run goes on; at the end the file holds end.meter.
func TestMeterFile(t *testing.T) {
	srv, err := mockmodel.Start(mockmodel.Options{APIKey: "sk-real-meter"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	u, _ := url.Parse(srv.URL())
	meterPath := filepath.Join(t.TempDir(), "meter.json")
	r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--model", "sonnet", "--cwd", t.TempDir(),
		"--credential", "ANTHROPIC_API_KEY=http://" + mockHost + ":" + u.Port(), "--meter-file", meterPath,
		"--env", "ANTHROPIC_BASE_URL=http://" + mockHost + ":" + u.Port(), "--env", "CLAUDE_CODE_MAX_RETRIES=1",
		"--add-host", mockHost + "=127.0.0.1", "--allow-host", "127.0.0.1:" + u.Port()},
		prompt: "scenario:tool please", env: []string{"AGENTRUN_CLAUDE_BIN=" + claudeBin(t), "ANTHROPIC_API_KEY=sk-real-meter"}})
	end := r.end()
	if end == nil || end.Status != events.StatusFinished || end.Meter == nil {
		t.Fatalf("end %+v\nstderr %s", end, r.stderr)
	}
	m, ok := progress.ReadMeterFile(meterPath)
	if !ok {
		t.Fatal("no meter file")
	}
	em := end.Meter
	if m.Calls != int64(em.Calls) || m.InputTokens != em.InputTokens || m.OutputTokens != em.OutputTokens ||
		m.CacheReadTokens != em.CacheReadTokens || m.CacheWriteTokens != em.CacheWriteTokens || m.Calls < 2 {
		t.Errorf("meter file %+v, end.meter %+v", m, em)
	}
}

func ptr[T any](v T) *T { return &v }
