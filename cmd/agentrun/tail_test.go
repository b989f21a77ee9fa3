package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/sidecar/patchlog"
)

// TestPatchContainer: `agentrun tail --patch` writes the patch to stdout,
// in the form the manager reads, only after the run's end event; a run
// stopped before its end leaves an empty log (no patch is kept).
func TestPatchContainer(t *testing.T) {
	const start = `{"schema":1,"type":"start","time":"2026-12-01T00:00:00Z"}` + "\n"
	const end = `{"schema":1,"type":"end","time":"2026-12-01T00:00:01Z","status":"finished"}` + "\n"
	patch := []byte("From 1234 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n\x00\xff binary\n")
	for _, tt := range []struct {
		name   string
		events string
		want   []byte // nil: an empty log
	}{
		{"after the end", start + end, patch},
		{"stopped before the end", start, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			eventsFile, patchFile := filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "change.patch")
			if err := os.WriteFile(eventsFile, []byte(tt.events), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(patchFile, patch, 0o600); err != nil {
				t.Fatal(err)
			}
			stdout, _ := os.Create(filepath.Join(dir, "stdout"))
			stderr, _ := os.Create(filepath.Join(dir, "stderr"))
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			f := podcontract.TailFlags{PatchFile: patchFile, File: eventsFile, Poll: 10 * time.Millisecond}
			if code := patchCmd(ctx, f, stdout, stderr); code != 0 {
				msg, _ := os.ReadFile(stderr.Name())
				t.Fatalf("exit %d: %s", code, msg)
			}
			log, _ := os.ReadFile(stdout.Name())
			if tt.want == nil {
				if len(log) != 0 {
					t.Fatalf("wrote %q without an end event", log)
				}
				return
			}
			p, err := patchlog.Read(log)
			if err != nil {
				t.Fatal(err)
			}
			zr, err := gzip.NewReader(bytes.NewReader(p.Gzip))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := io.ReadAll(zr); !bytes.Equal(got, tt.want) {
				t.Errorf("patch %q, want %q", got, tt.want)
			}
		})
	}
}
