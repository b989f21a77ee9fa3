package docs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A flag is documented when a synopsis of its verb names it (a line of a
// fenced code block that starts with the command and verb, with its
// indented continuation lines) and the prose of some page says what it
// does (its long form appears outside code blocks). The flags come from the
// binaries' own -h output, so a new flag fails here until both are written.

// TestAgentrunFlagsAreDocumented: every flag of every verb of agentrun.
func TestAgentrunFlagsAreDocumented(t *testing.T) {
	bin := buildTool(t, "./cmd/agentrun", "agentrun")
	// agentrun validate is agentrun-validate, beside agentrun.
	if err := os.Rename(buildTool(t, "./cmd/agentrun-validate", "agentrun-validate"), filepath.Join(filepath.Dir(bin), "agentrun-validate")); err != nil {
		t.Fatal(err)
	}
	verbs := verbsOf(t, usage(t, bin), "agentrun")
	for _, verb := range verbs {
		checkFlags(t, "agentrun", verb, goFlags(usage(t, bin, verb, "-h")))
	}
}

// TestKubectlPluginFlagsAreDocumented: every flag of every verb of
// kubectl agentrun (kubectl's own connection flags aside).
func TestKubectlPluginFlagsAreDocumented(t *testing.T) {
	bin := buildTool(t, "./cmd/kubectl-agentrun", "kubectl-agentrun")
	verbs := verbsOf(t, usage(t, bin), "kubectl agentrun")
	for _, verb := range verbs {
		checkFlags(t, "kubectl agentrun", verb, pflags(usage(t, bin, verb, "-h")))
	}
}

// buildTool builds the command package pkg into a scratch directory.
func buildTool(t *testing.T, pkg, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = repoRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// usage is what the binary prints for these arguments, stdout and stderr
// together. The exit code is not looked at: some verbs exit 2 after -h.
func usage(t *testing.T, bin string, args ...string) string {
	t.Helper()
	b, err := exec.Command(bin, args...).CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("%s %s: %v", bin, strings.Join(args, " "), err)
	}
	return string(b)
}

// verbsOf reads the verbs from a top-level usage text: its lines
// "  COMMAND VERB ...".
func verbsOf(t *testing.T, text, command string) []string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^[ \t]+` + regexp.QuoteMeta(command) + ` ([a-z][-a-z]*)`)
	var verbs []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(verbs, m[1]) {
			verbs = append(verbs, m[1])
		}
	}
	if len(verbs) == 0 {
		t.Fatalf("no verbs of %s in its usage:\n%s", command, text)
	}
	return verbs
}

// flag is one flag of a verb: its long name, and a one-letter shorthand
// where it has one.
type flag struct{ long, short string }

// goFlags reads the flags of a usage text printed by Go's flag package:
// "  -name type" lines.
func goFlags(text string) []flag {
	var out []flag
	for _, m := range regexp.MustCompile(`(?m)^  -([A-Za-z0-9][-A-Za-z0-9_]*)`).FindAllStringSubmatch(text, -1) {
		if m[1] != "h" && m[1] != "help" {
			out = append(out, flag{long: m[1]})
		}
	}
	return out
}

// pflags reads the flags of a usage text printed by spf13/pflag:
// "  -A, --all-namespaces" and "      --by string" lines.
func pflags(text string) []flag {
	var out []flag
	for _, m := range regexp.MustCompile(`(?m)^[ \t]+(?:-([A-Za-z]), )?--([a-z0-9][-a-z0-9]*)`).FindAllStringSubmatch(text, -1) {
		if m[2] != "help" {
			out = append(out, flag{long: m[2], short: m[1]})
		}
	}
	return out
}

// checkFlags fails for each flag of command verb that no synopsis names or
// no prose explains.
func checkFlags(t *testing.T, command, verb string, flags []flag) {
	t.Helper()
	if len(flags) == 0 {
		t.Errorf("%s %s: no flags read from its -h output", command, verb)
	}
	pages := readPages(t, false)
	synopsis := synopses(pages, command+" "+verb)
	if synopsis == "" {
		t.Errorf("%s %s has no synopsis under docs/ or in README.md: a fenced code block line that starts with %q", command, verb, command+" "+verb)
	}
	var prose strings.Builder
	for _, p := range pages {
		prose.WriteString(p.prose)
	}
	for _, f := range flags {
		named := mentions(synopsis, "--"+f.long) || f.short != "" && mentions(synopsis, "-"+f.short)
		if !named {
			t.Errorf("%s %s --%s is documented nowhere: no synopsis of %q under docs/ or in README.md names it (docs/local.md and docs/kubernetes/plugin.md hold them)", command, verb, f.long, command+" "+verb)
		}
		if !mentions(prose.String(), "--"+f.long) {
			t.Errorf("%s %s --%s is documented nowhere: no page under docs/ nor README.md says in its prose what --%s does", command, verb, f.long, f.long)
		}
	}
}

// synopses joins the synopsis lines of cmd in the pages' code blocks: each
// line that starts with cmd, and the indented lines that continue it.
func synopses(pages []page, cmd string) string {
	var out []string
	for _, p := range pages {
		for _, block := range p.code {
			lines := strings.Split(block, "\n")
			for i := 0; i < len(lines); i++ {
				if !strings.HasPrefix(strings.TrimSpace(lines[i])+" ", cmd+" ") {
					continue
				}
				out = append(out, lines[i])
				for i+1 < len(lines) && strings.HasPrefix(lines[i+1], " ") && !strings.HasPrefix(strings.TrimSpace(lines[i+1]), cmd) {
					i++
					out = append(out, lines[i])
				}
			}
		}
	}
	return strings.Join(out, "\n")
}

// mentions reports whether text holds the flag f as a whole word: not
// followed by another letter, digit or hyphen, nor preceded by one (so
// --max-turns does not count for --max).
func mentions(text, f string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], f)
		if j < 0 {
			return false
		}
		at := i + j
		end := at + len(f)
		before := at == 0 || !isWordByte(text[at-1])
		after := end == len(text) || !isWordByte(text[end])
		if before && after {
			return true
		}
		i = at + 1
	}
}

func isWordByte(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
