package phases

import (
	"bytes"
	"strings"
	"testing"
)

// TestWriteToWritesOneTimelinePerStart: each WriteTo writes one line that
// starts with init and names each mark in order, as name=ms, and starts
// the next timeline empty; without the variable Mark records nothing.
func TestWriteToWritesOneTimelinePerStart(t *testing.T) {
	names := func(line string) string {
		var n []string
		for _, kv := range strings.Fields(line) {
			k, _, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("%q is not name=ms", kv)
			}
			n = append(n, k)
		}
		return strings.Join(n, " ")
	}
	path = "/the/file"
	defer func() { path = "" }()
	var out bytes.Buffer
	Mark("a")
	Mark("b")
	Mark("a")
	must(t, WriteTo(&out))
	Mark("c")
	must(t, WriteTo(&out))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || names(lines[0]) != "init a b a" || names(lines[1]) != "init c" {
		t.Errorf("timelines %q", lines)
	}
	path = ""
	Mark("d")
	out.Reset()
	must(t, WriteTo(&out))
	if got := names(out.String()); got != "init" {
		t.Errorf("marked without %s: %q", EnvVar, got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
