package phases

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteAppendsOneTimelinePerStart: each Write appends one line that
// starts with init and names each mark in order, and starts the next
// timeline empty; without the variable nothing is written.
func TestWriteAppendsOneTimelinePerStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "phases")
	path = file
	defer func() { path = "" }()
	Mark("a")
	Mark("b")
	Mark("a")
	Write()
	Mark("c")
	Write()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var names [][]string
	for _, l := range lines {
		var n []string
		for _, kv := range strings.Fields(l) {
			k, _, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("%q is not name=ms", kv)
			}
			n = append(n, k)
		}
		names = append(names, n)
	}
	want := [][]string{{"init", "a", "b", "a"}, {"init", "c"}}
	if strings.Join(names[0], " ") != "init a b a" || len(names) != 2 || strings.Join(names[1], " ") != "init c" {
		t.Errorf("timelines %v, want %v", names, want)
	}
	path = ""
	Mark("d")
	Write()
	if again, _ := os.ReadFile(file); string(again) != string(data) {
		t.Errorf("written without %s: %q", EnvVar, again)
	}
}
