package text

import (
	"testing"

	"github.com/agentrun-dev/agentrun/events"
)

func TestGitLine(t *testing.T) {
	base, head := "38999e011d686deacbf3d2f1c7ea2bd44a55797c", "776c4cc1041d3accf36582b686176c401f680083"
	for _, tt := range []struct {
		name string
		g    events.Git
		want string
	}{
		{"pushed", events.Git{BaseCommit: base, HeadCommit: head, Branch: events.String("agentrun/x"), Pushed: true, Commits: 2, FilesChanged: 3, Insertions: 3},
			"3 files changed, +3 -0, 2 commits  pushed agentrun/x (776c4cc1041d)"},
		{"patch", events.Git{BaseCommit: base, HeadCommit: head, Patch: events.String("/tmp/x.patch"), Commits: 1, FilesChanged: 1, Insertions: 1, Deletions: 4},
			"1 file changed, +1 -4, 1 commit  patch /tmp/x.patch"},
		{"nothing", events.Git{BaseCommit: base, HeadCommit: base, Detail: "nothing changed: nothing published"}, "no change  nothing changed: nothing published"},
		{"hostile branch and detail", events.Git{BaseCommit: base, HeadCommit: head, Branch: events.String("a\x1b]52;c;x\x07b"), Pushed: true, Detail: "line\nbreak"},
			"0 files changed, +0 -0, 0 commits  pushed a]52;c;xb (776c4cc1041d)  line break"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := GitLine(&tt.g); got.Label != "git" || Printable(got.Text) != tt.want {
				t.Errorf("GitLine = %q %q (printed), want %q", got.Label, Printable(got.Text), tt.want)
			}
		})
	}
}
