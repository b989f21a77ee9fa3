package all_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
)

// module is the import path of the repository's top.
const module = "github.com/agentrun-dev/agentrun/"

// TestEveryRuntimeReplaysItsCaptures: every registered runtime's folder
// holds real captures of the common mock scenarios (testdata/real) and a
// test that replays them through adapterstest.Captures, which fails for a
// capture without a case. A new runtime that lacks either fails here,
// naming its folder.
func TestEveryRuntimeReplaysItsCaptures(t *testing.T) {
	for _, name := range adapters.Names() {
		rt, err := adapters.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		pkg := reflect.TypeOf(rt.New())
		for pkg.Kind() == reflect.Pointer {
			pkg = pkg.Elem()
		}
		rel, ok := strings.CutPrefix(pkg.PkgPath(), module)
		if !ok {
			t.Errorf("runtime %s: its adapter %s is outside the module", name, pkg)
			continue
		}
		dir := filepath.Join(root, filepath.FromSlash(rel))
		if missing := adapterstest.MissingCommonCaptures(dir); len(missing) > 0 {
			t.Errorf("runtime %s: %s/testdata/real has no capture of %v: record them against the mock (see another runtime's testdata/real/README.md)", name, rel, missing)
		}
		tests, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		replays := false
		for _, f := range tests {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			replays = replays || strings.Contains(string(b), "adapterstest.Captures{Runtime: Name")
		}
		if !replays {
			t.Errorf("runtime %s: no test in %s replays its captures: add a TestRealCaptures with one adapterstest.Captures{Runtime: Name, ...}", name, rel)
		}
	}
}
