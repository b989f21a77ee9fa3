package sibling

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOf(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "agentrun")
	write := func(name string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("agentrun", 0o755)
	write("runs", 0o755)
	write("plain", 0o644)
	if err := os.Mkdir(filepath.Join(dir, "folder"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("runs", filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"runs", true},
		{"linked", true}, // an installed program may be a link to the real one
		{"plain", false},
		{"folder", false},
		{"missing", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, ok := Of(self, tc.name)
			if ok != tc.ok || path != filepath.Join(dir, tc.name) {
				t.Errorf("Of(%q) = %q, %v; want %q, %v", tc.name, path, ok, filepath.Join(dir, tc.name), tc.ok)
			}
		})
	}
}
