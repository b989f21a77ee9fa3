// Package version is what `agentrun --version` and `kubectl agentrun
// version` print: agentrun's version, the commit it was built from and the
// agent CLIs it was tested with (adapters/clis.txt).
package version

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/agentrun-dev/agentrun/adapters"
)

// Version is agentrun's version: the chart's appVersion (a test keeps them
// equal), or what a release build sets with
// -ldflags "-X github.com/agentrun-dev/agentrun/internal/version.Version=V".
var Version = "0.1.0"

// Commit, when a build sets it (-X ...version.Commit=HASH: the Makefile
// does, as the go command records no commit in a git worktree), is the
// commit; else the go command's vcs.revision is.
var Commit = ""

// Info is one binary's version.
type Info struct {
	Version string `json:"version"`
	// Commit is the git commit the binary was built from, with "-dirty"
	// when the tree had changes; "unknown" for a build without git
	// information (-buildvcs=false, or a source tree without .git).
	Commit string `json:"commit"`
	Go     string `json:"go"`
	// CLIs are the pinned agent CLIs, in clis.txt's order.
	CLIs []CLI `json:"clis"`
}

// CLI is one pinned agent CLI.
type CLI struct {
	Runtime string `json:"runtime"`
	Package string `json:"package"`
	Version string `json:"version"`
}

// Get is this binary's Info.
func Get() Info {
	info := Info{Version: Version, Commit: "unknown", Go: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.Go = bi.GoVersion
		info.Commit = commit(bi.Settings)
	}
	if Commit != "" {
		info.Commit = Commit
	}
	for _, c := range adapters.CLIs {
		info.CLIs = append(info.CLIs, CLI{Runtime: c.Runtime, Package: c.Package, Version: c.Version})
	}
	return info
}

// commit reads vcs.revision and vcs.modified from the build settings.
func commit(settings []debug.BuildSetting) string {
	rev, dirty := "", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// Text is the version as people read it, program naming the binary.
func (i Info) Text(program string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\ncommit %s\nbuilt with %s\npinned agent CLIs (adapters/clis.txt):\n", program, i.Version, i.Commit, i.Go)
	width := 0
	for _, c := range i.CLIs {
		width = max(width, len(c.Runtime))
	}
	for _, c := range i.CLIs {
		fmt.Fprintf(&b, "  %-*s  %s %s\n", width, c.Runtime, c.Package, c.Version)
	}
	return b.String()
}

// JSON is the version as one JSON object and a newline.
func (i Info) JSON() string {
	b, _ := json.Marshal(i)
	return string(b) + "\n"
}
