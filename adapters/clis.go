package adapters

import (
	_ "embed"
	"fmt"
	"strings"
)

// CLI is one pinned agent CLI (clis.txt).
type CLI struct {
	Runtime string // the runtime's name, as Register knows it
	Package string // the npm package
	Version string // the pinned version
	Binary  string // the executable the package installs
	// InImage is true when the runner image carries the CLI.
	InImage bool
}

//go:embed clis.txt
var clisTxt string

// CLIs is clis.txt, in its order.
var CLIs = mustParseCLIs(clisTxt)

// PinnedCLI is the pinned CLI of runtime.
func PinnedCLI(runtime string) (CLI, bool) {
	for _, c := range CLIs {
		if c.Runtime == runtime {
			return c, true
		}
	}
	return CLI{}, false
}

func mustParseCLIs(s string) []CLI {
	clis, err := ParseCLIs(s)
	if err != nil {
		panic("adapters/clis.txt: " + err.Error())
	}
	return clis
}

// ParseCLIs reads the format of clis.txt: "#" comments, blank lines, and
// lines of five fields.
func ParseCLIs(s string) ([]CLI, error) {
	var out []CLI
	seen := map[string]bool{}
	for i, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 5 || (f[4] != "yes" && f[4] != "no") {
			return nil, fmt.Errorf("line %d: want RUNTIME NPM-PACKAGE VERSION BINARY yes|no, got %q", i+1, line)
		}
		if seen[f[0]] {
			return nil, fmt.Errorf("line %d: runtime %s is listed twice", i+1, f[0])
		}
		seen[f[0]] = true
		out = append(out, CLI{Runtime: f[0], Package: f[1], Version: f[2], Binary: f[3], InImage: f[4] == "yes"})
	}
	return out, nil
}

// ImageRuntimes are the runtimes whose CLI the runner image carries (the
// ones that run on Kubernetes), in clis.txt's order.
func ImageRuntimes() []string {
	var out []string
	for _, c := range CLIs {
		if c.InImage {
			out = append(out, c.Runtime)
		}
	}
	return out
}
