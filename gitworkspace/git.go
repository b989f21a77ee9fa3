package gitworkspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// hostGit runs the host's git for agentrun: outside the sandbox, with the
// token at hand, on repositories whose every byte the agent may have
// written. So it never reads a configuration git would read by default
// (the system's, the user's, the repository's own where it can avoid it),
// runs no hook, no fsmonitor, no credential helper, no filter, diff or merge
// driver, follows no redirect, speaks only HTTPS (and plain HTTP where the
// user declared it), and checks every object it takes in.
type hostGit struct {
	// env are variables on top of the hardened base (GIT_DIR,
	// GIT_WORK_TREE, GIT_INDEX_FILE, the token's header).
	env []string
	// home is an empty private directory: git reads nothing from it.
	home string
	// secrets are scrubbed from every error and output message.
	secrets []string
	// timeout bounds one command; maxOutput its stdout.
	timeout   time.Duration
	maxOutput int64
	// allowFile lets this command speak the file protocol (agentrun's
	// own fetch between its private repositories).
	allowFile bool
	// caFile verifies the remote's TLS certificate instead of the
	// system's roots.
	caFile string
	// resolve are http.curloptResolve entries (HOST:PORT:ADDRESS).
	resolve []string
}

// Defaults of one git command.
const (
	// defaultTimeout bounds one host git command: a clone of a large
	// repository over a slow link is the longest of them.
	defaultTimeout = 10 * time.Minute
	// defaultMaxOutput bounds what agentrun reads of a command's stdout:
	// ls-remote of a repository with many refs, a patch.
	defaultMaxOutput = 256 << 20
)

// hardening are the configuration values every host git command runs
// with, given on its command line (git's most trusted place, above any
// configuration file).
var hardening = []string{
	"core.hooksPath=/dev/null",
	"core.fsmonitor=false",
	"core.untrackedCache=false",
	"core.attributesFile=/dev/null",
	"core.excludesFile=/dev/null",
	"core.askPass=",
	"core.sshCommand=false",
	"core.symlinks=true",
	"core.autocrlf=false",
	"core.safecrlf=false",
	"core.quotePath=false",
	"core.precomposeUnicode=false",
	"core.protectNTFS=true",
	"core.protectHFS=true",
	"credential.helper=",
	"http.followRedirects=false",
	"http.emptyAuth=false",
	"protocol.allow=never",
	"protocol.https.allow=always",
	"protocol.http.allow=always",
	"transfer.fsckObjects=true",
	"fetch.fsckObjects=true",
	"receive.fsckObjects=true",
	"submodule.recurse=false",
	"fetch.recurseSubmodules=false",
	"push.recurseSubmodules=no",
	"push.followTags=false",
	"gc.auto=0",
	"maintenance.auto=false",
	"commit.gpgSign=false",
	"tag.gpgSign=false",
	"diff.external=",
	"uploadpack.allowFilter=false",
	"safe.directory=*",
	"safe.bareRepository=all",
	"advice.detachedHead=false",
	"init.defaultBranch=main",
}

// run runs git with args and returns its stdout. A failure's error holds
// git's stderr (its last lines, the secrets taken out).
func (g *hostGit) run(ctx context.Context, args ...string) ([]byte, error) {
	return g.runInput(ctx, nil, args...)
}

func (g *hostGit) runInput(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	timeout := g.timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var argv []string
	for _, kv := range hardening {
		argv = append(argv, "-c", kv)
	}
	if g.allowFile {
		argv = append(argv, "-c", "protocol.file.allow=always")
	}
	if g.caFile != "" {
		argv = append(argv, "-c", "http.sslCAInfo="+g.caFile)
	}
	for _, r := range g.resolve {
		argv = append(argv, "-c", "http.curloptResolve="+r)
	}
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, "git", argv...)
	cmd.Env = g.environ()
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	max := g.maxOutput
	if max <= 0 {
		max = defaultMaxOutput
	}
	stdout := &boundedBuffer{max: max}
	stderr := &boundedBuffer{max: 64 << 10, keepTail: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return nil, fmt.Errorf("git %s took longer than %s and was stopped", args[0], timeout)
	case stdout.over:
		return nil, fmt.Errorf("git %s wrote more than %d MiB", args[0], max>>20)
	case err != nil:
		var exit *exec.ExitError
		msg := g.scrub(lastLines(stderr.String(), 6))
		if errors.As(err, &exit) && msg != "" {
			return nil, fmt.Errorf("git %s: %s", args[0], msg)
		}
		return nil, fmt.Errorf("git %s: %v", args[0], err)
	}
	return stdout.Bytes(), nil
}

// environ is the hardened environment: no variable of agentrun's own but
// PATH, and nothing that points git at a configuration or a helper.
func (g *hostGit) environ() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{
		"PATH=" + path,
		"HOME=" + g.home,
		"XDG_CONFIG_HOME=" + g.home,
		"LANG=C", "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=/bin/false",
		"SSH_ASKPASS=/bin/false",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_ALLOW_PROTOCOL=https:http" + map[bool]string{true: ":file", false: ""}[g.allowFile],
		"GIT_LFS_SKIP_SMUDGE=1",
	}
	return append(env, g.env...)
}

// scrub takes the secrets out of text git wrote.
func (g *hostGit) scrub(s string) string {
	for _, sec := range g.secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[token]")
		}
	}
	return s
}

// with is a copy of g with more variables.
func (g *hostGit) with(env ...string) *hostGit {
	c := *g
	c.env = append(append([]string{}, g.env...), env...)
	return &c
}

// boundedBuffer keeps at most max bytes: the first ones, or with keepTail
// the last ones.
type boundedBuffer struct {
	bytes.Buffer
	max      int64
	over     bool
	keepTail bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if b.keepTail {
		b.Buffer.Write(p)
		if int64(b.Len()) > b.max {
			tail := append([]byte{}, b.Bytes()[int64(b.Len())-b.max:]...)
			b.Reset()
			b.Buffer.Write(tail)
		}
		return len(p), nil
	}
	if int64(b.Len())+int64(len(p)) > b.max {
		b.over = true
		return 0, errors.New("output too large")
	}
	return b.Buffer.Write(p)
}

// lastLines is the last n non-empty lines of s, joined with "; ".
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}
