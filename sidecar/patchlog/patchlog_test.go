package patchlog

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, patch []byte) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "change.patch")
	if patch != nil {
		if err := os.WriteFile(path, patch, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := Write(&b, path); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	patch := []byte("From 1 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] é\n\n\x00\xff\n" + strings.Repeat("+line\n", 5000))
	log := write(t, patch)
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		if len(line) > 76 && !strings.HasPrefix(line, header) {
			t.Fatalf("a line of %d characters", len(line))
		}
	}
	p, err := Read(log)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(p.Gzip))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(zr); !bytes.Equal(got, patch) {
		t.Error("the patch changed on the way")
	}
}

func TestNoneAndTooLarge(t *testing.T) {
	if p, err := Read(write(t, nil)); err != nil || p.Gzip != nil || p.TooLarge != 0 {
		t.Errorf("a missing file: %+v %v, want none", p, err)
	}
	noise := make([]byte, MaxGzip+1024) // incompressible
	rand.Read(noise)
	p, err := Read(write(t, noise))
	if err != nil || p.Gzip != nil || p.TooLarge <= MaxGzip {
		t.Errorf("a patch over MaxGzip: %+v %v", p, err)
	}
}

// TestReadRefuses: the manager never keeps part of a patch, or one whose
// log does not check out.
func TestReadRefuses(t *testing.T) {
	good := string(write(t, []byte("From 1\n"+strings.Repeat("x", 300))))
	lines := strings.Split(strings.TrimSpace(good), "\n")
	tests := map[string]string{
		"empty":          "",
		"garbage":        "hello\n",
		"cut":            strings.Join(lines[:len(lines)-1], "\n"),
		"bad size":       strings.Replace(good, header+" ", header+" 9", 1),
		"bad digest":     strings.Replace(good, lines[0], lines[0][:len(lines[0])-4]+"0000", 1),
		"bad base64":     strings.Replace(good, lines[1], "!!!!"+lines[1][4:], 1),
		"too-large junk": tooLarge + " x\n",
		"a header alone": header + "\n",
	}
	for name, log := range tests {
		if p, err := Read([]byte(log)); err == nil {
			t.Errorf("%s: accepted (%+v)", name, p)
		}
	}
	if _, err := Read([]byte(strings.Join(lines[:len(lines)-1], "\n"))); !errors.Is(err, ErrIncomplete) {
		t.Errorf("a log without its end line: %v, want ErrIncomplete", err)
	}
}
