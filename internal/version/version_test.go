package version

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
)

// TestVersionIsTheChartsAppVersion: one version for the binaries and the
// chart that installs them.
func TestVersionIsTheChartsAppVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "charts", "agentrun", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^appVersion: "?([^"\s]+)"?`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no appVersion in Chart.yaml")
	}
	if string(m[1]) != Version {
		t.Errorf("version.Version %q, the chart's appVersion %q: keep them equal", Version, m[1])
	}
}

func TestTextListsEveryPinnedCLI(t *testing.T) {
	info := Get()
	text := info.Text("agentrun")
	if !strings.HasPrefix(text, "agentrun "+Version+"\ncommit ") {
		t.Errorf("text starts %q", text)
	}
	if len(adapters.CLIs) == 0 {
		t.Fatal("no pinned CLIs")
	}
	for _, c := range adapters.CLIs {
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(c.Runtime) + ` +` + regexp.QuoteMeta(c.Package+" "+c.Version) + `$`).MatchString(text) {
			t.Errorf("no line for %s %s %s in\n%s", c.Runtime, c.Package, c.Version, text)
		}
	}
	var back Info
	if err := json.Unmarshal([]byte(info.JSON()), &back); err != nil || len(back.CLIs) != len(adapters.CLIs) || back.Version != Version {
		t.Errorf("JSON %q: %v", info.JSON(), err)
	}
}

func TestCommit(t *testing.T) {
	for _, tt := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{nil, "unknown"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}, "abc"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}, "abc-dirty"},
	} {
		if got := commit(tt.settings); got != tt.want {
			t.Errorf("commit(%v) = %q, want %q", tt.settings, got, tt.want)
		}
	}
}
