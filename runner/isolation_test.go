package runner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/sandbox"
)

func TestSandboxEnvIsMinimal(t *testing.T) {
	t.Setenv("AGENTRUN_SECRET_OF_THE_RUNNER", "x")
	iso, err := newIsolation(podcontract.SandboxFlags{Sandbox: "bubblewrap"}, openWS(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	env := envMap(iso.env("/state/home", []string{"CLAUDE_CONFIG_DIR=/state/claude"}, [][2]string{{"GH_TOKEN", "t"}, {"HOME", "/custom"}}))
	if _, leaked := env["AGENTRUN_SECRET_OF_THE_RUNNER"]; leaked {
		t.Errorf("the runner's environment leaked into the sandbox")
	}
	for k, want := range map[string]string{"HOME": "/custom", "TMPDIR": "/tmp", "GH_TOKEN": "t", "CLAUDE_CONFIG_DIR": "/state/claude",
		"HTTPS_PROXY": "http://127.0.0.1:3128", "http_proxy": "http://127.0.0.1:3128", "ALL_PROXY": "http://127.0.0.1:3128"} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	none, _ := newIsolation(podcontract.SandboxFlags{Sandbox: "none"}, fakeWS("/work"))
	if env := envMap(none.env("/h", nil, nil)); env["AGENTRUN_SECRET_OF_THE_RUNNER"] != "x" || env["HTTPS_PROXY"] != os.Getenv("HTTPS_PROXY") {
		t.Errorf("--sandbox none keeps agentrun's own environment and sets no proxy")
	}
	off, _ := newIsolation(podcontract.SandboxFlags{Sandbox: "bubblewrap", Network: "none"}, openWS(t, t.TempDir()))
	if env := envMap(off.env("/h", nil, nil)); env["HTTPS_PROXY"] != "" || env["NO_PROXY"] != "" {
		t.Errorf("--network none sets no proxy variables: %v", env)
	}
}

func TestNoProxyNeverListsAnAllowedHost(t *testing.T) {
	tests := []struct {
		name  string
		allow []string
		add   []string
		user  string
		want  string
	}{
		{"defaults", nil, nil, "", "localhost,127.0.0.1,::1"},
		{"user entries kept", []string{"api.example.com"}, nil, "internal.corp,.svc", "localhost,127.0.0.1,::1,internal.corp,.svc"},
		{"allowed name dropped", []string{"api.example.com"}, nil, "api.example.com,other", "localhost,127.0.0.1,::1,other"},
		{"wildcard drops its subdomains", []string{"*.example.com"}, nil, "a.example.com,.example.com,b.org", "localhost,127.0.0.1,::1,b.org"},
		{"allowed loopback address dropped", []string{"mock-model.test:8080", "127.0.0.1:8080"}, []string{"mock-model.test=127.0.0.1"}, "", "localhost,::1"},
		{"allowed localhost name dropped", []string{"localhost:3000"}, nil, "", "127.0.0.1,::1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iso, err := newIsolation(podcontract.SandboxFlags{Sandbox: "bubblewrap", AllowHosts: tt.allow, AddHosts: tt.add}, openWS(t, t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			var user [][2]string
			if tt.user != "" {
				user = [][2]string{{"no_proxy", tt.user}}
			}
			env := envMap(iso.env("/h", nil, user))
			if env["NO_PROXY"] != tt.want || env["no_proxy"] != tt.want {
				t.Errorf("NO_PROXY %q no_proxy %q, want both %q", env["NO_PROXY"], env["no_proxy"], tt.want)
			}
		})
	}
}

func TestIsolationRejections(t *testing.T) {
	tests := []struct {
		name string
		o    podcontract.SandboxFlags
		cwd  string
		want string
	}{
		{"bad sandbox", podcontract.SandboxFlags{Sandbox: "docker"}, "/w", `--sandbox "docker": use bubblewrap or none`},
		{"bad network", podcontract.SandboxFlags{Network: "some"}, "/w", `--network "some"`},
		{"none with allow", podcontract.SandboxFlags{Network: "none", AllowHosts: []string{"a.com"}}, "/w", "--allow-host needs network access"},
		{"bad rule", podcontract.SandboxFlags{AllowHosts: []string{"a.*.com"}}, "/w", "not a host name"},
		{"bad add-host", podcontract.SandboxFlags{AddHosts: []string{"x"}}, "/w", "--add-host"},
		{"relative deny", podcontract.SandboxFlags{DenyRead: []string{"secrets"}}, "/w", "absolute path"},
		{"deny contains workspace", podcontract.SandboxFlags{Sandbox: "bubblewrap", DenyRead: []string{"/srv"}}, "/srv/repo", "contains the working directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newIsolation(tt.o, fakeWS(tt.cwd))
			if _, ok := err.(rejection); !ok || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want a rejection containing %q", err, tt.want)
			}
		})
	}
}

func TestFailureDetail(t *testing.T) {
	tests := []struct {
		msg, tail string
		exit      exitInfo
		want      string
	}{
		{"API Error: 500", "stderr", exitInfo{}, "API Error: 500"},
		{"", "panic: boom", exitInfo{}, "panic: boom"},
		{"", "", exitInfo{Exit: adapters.Exit{Signaled: true}, Signal: syscall.SIGKILL}, "claude-code was killed by signal 9 (killed)"},
		{"", "", exitInfo{Exit: adapters.Exit{Code: 3}}, "claude-code failed with exit code 3 and no error message"},
	}
	for _, tt := range tests {
		if got := failureDetail(tt.msg, tt.tail, "claude-code", tt.exit); got != tt.want {
			t.Errorf("failureDetail(%q, %q, %+v) = %q, want %q", tt.msg, tt.tail, tt.exit, got, tt.want)
		}
	}
}

func TestVisibleUnderTmp(t *testing.T) {
	tests := []struct {
		bin  string
		want []string
	}{
		{"/usr/local/bin/claude", nil},
		{"/tmp/fake/claude", []string{"/tmp/fake"}},
		{"/tmp/build-7/.cache/clis/codex/node_modules/.bin/codex", []string{"/tmp/build-7/.cache/clis/codex"}},
		{"/opt/ci/.cache/clis/pi/node_modules/.bin/pi", nil},
	}
	for _, tt := range tests {
		if got := visibleUnderTmp(tt.bin); strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("visibleUnderTmp(%s) = %v, want %v", tt.bin, got, tt.want)
		}
	}
}

// A workspace in a checkout without a .git of its own gets a read-only
// placeholder for the run, removed afterwards; where the caller cannot make
// it (nor, then, the agent) the run goes on without it.
func TestGitPlaceholder(t *testing.T) {
	base := t.TempDir()
	if err := os.Mkdir(filepath.Join(base, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "svc")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	iso, err := newIsolation(podcontract.SandboxFlags{Sandbox: "bubblewrap"}, openWS(t, ws))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(iso.git.Placeholders, ",") != ".git" || strings.Join(iso.git.Paths, ",") != ".git" {
		t.Fatalf("git %+v", iso.git)
	}
	var warnings []string
	undo, err := iso.prepareWorkspace(openWS(t, ws), func(w string) { warnings = append(warnings, w) })
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(filepath.Join(ws, ".git")); err != nil || !st.IsDir() {
		t.Errorf("no placeholder during the run: %v", err)
	}
	// What the agent leaves: the workspace made a bare repository (git
	// looks there before the checkout's .git above), and a repository
	// below it.
	if err := os.MkdirAll(filepath.Join(ws, "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "tools", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	undo()
	if _, err := os.Lstat(filepath.Join(ws, ".git")); err == nil {
		t.Errorf("the placeholder stayed")
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], "left a git repository at "+ws+":") ||
		!strings.Contains(warnings[1], "left a git repository at "+filepath.Join(ws, "tools", ".git")+":") {
		t.Errorf("warnings %q: want one for the bare repository at the top, one for tools/.git", warnings)
	}
	os.Remove(filepath.Join(ws, "HEAD"))
	warnings = nil
	iso, _ = newIsolation(podcontract.SandboxFlags{Sandbox: "bubblewrap"}, openWS(t, ws))
	undo, _ = iso.prepareWorkspace(openWS(t, ws), func(w string) { warnings = append(warnings, w) })
	if err := os.MkdirAll(filepath.Join(ws, "lib", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	undo()
	if len(warnings) != 1 || !strings.Contains(warnings[0], filepath.Join(ws, "lib")) {
		t.Errorf("warnings %q: want one for lib/.git only (tools/.git was there at the start)", warnings)
	}
	os.RemoveAll(filepath.Join(ws, "lib"))
	os.RemoveAll(filepath.Join(ws, "tools"))
	os.RemoveAll(filepath.Join(ws, "objects"))
	os.RemoveAll(filepath.Join(ws, "refs"))
	if os.Geteuid() == 0 {
		return // root makes it anywhere
	}
	if err := os.Chmod(ws, 0o555); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := os.Chmod(ws, 0o755); err != nil {
			t.Error(err)
		}
	}()
	iso, _ = newIsolation(podcontract.SandboxFlags{Sandbox: "bubblewrap"}, openWS(t, ws))
	if _, err := iso.prepareWorkspace(openWS(t, ws), func(string) {}); err != nil || len(iso.git.Paths) != 0 {
		t.Errorf("a workspace the caller cannot write: %v, paths %v", err, iso.git.Paths)
	}
}

// TestLeftRepositoryWarningsNameTheRealPath: the agent names the
// directories it leaves, newlines included. A repository left under such a
// name is warned of in one line that names it exactly (quoted), not cut
// at the newline into a warning about another directory followed by a
// line of the agent's own.
func TestLeftRepositoryWarningsNameTheRealPath(t *testing.T) {
	ws := t.TempDir()
	iso, err := newIsolation(podcontract.SandboxFlags{Sandbox: "bubblewrap"}, openWS(t, ws))
	if err != nil {
		t.Fatal(err)
	}
	var warnings []string
	undo, err := iso.prepareWorkspace(openWS(t, ws), func(w string) { warnings = append(warnings, w) })
	if err != nil {
		t.Fatal(err)
	}
	// The agent's: an innocent directory, and the repository under a name
	// that starts like it.
	name := "docs\n[agentrun] the run ended: nothing to review"
	if err := os.MkdirAll(filepath.Join(ws, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(ws, name, ".git")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	undo()
	if len(warnings) != 1 {
		t.Fatalf("warnings %q, want one", warnings)
	}
	w := warnings[0]
	if strings.ContainsAny(w, "\n\r") {
		t.Errorf("the warning spans lines: %q", w)
	}
	quoted := strconv.Quote(left)
	if !strings.Contains(w, "left a git repository at "+quoted+":") {
		t.Errorf("the warning does not name %s exactly: %q", quoted, w)
	}
	if got := agentNamed(filepath.Join(ws, "docs")); got != filepath.Join(ws, "docs") {
		t.Errorf("a plain path is shown as it is: %q", got)
	}
}

// openWS opens the directory dir as a run's workspace, closed after the test.
func openWS(t *testing.T, dir string) *sandbox.Workspace {
	t.Helper()
	ws, err := sandbox.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// fakeWS is a workspace that is only a name (for checks that look no
// further), owned by a user.
func fakeWS(path string) *sandbox.Workspace {
	return &sandbox.Workspace{Path: path, UID: 1000, GID: 1000}
}

// --session-dir reads as nothing in the sandbox, after the other deny
// entries; one that holds the workspace is refused, and one inside it is
// left visible with a note (the agent could move it out of the way).
func TestSessionDirIsHidden(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "sessions"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(base, "sessions"), 0o755); err != nil {
		t.Fatal(err)
	}
	newIso := func() *isolation {
		iso, err := newIsolation(podcontract.SandboxFlags{Sandbox: "bubblewrap", DenyRead: []string{"/srv/keys"}}, openWS(t, ws))
		if err != nil {
			t.Fatal(err)
		}
		return iso
	}
	iso := newIso()
	if err := iso.hideSessions(filepath.Join(base, "sessions"), ws); err != nil {
		t.Fatal(err)
	}
	if deny := iso.startDenyRead(); deny[len(deny)-2] != "/srv/keys" || deny[len(deny)-1] != filepath.Join(base, "sessions") {
		t.Errorf("deny_read ends with %v", deny[len(deny)-2:])
	}
	iso = newIso()
	if err := iso.hideSessions(base, ws); err == nil || !strings.Contains(err.Error(), "contains the working directory") {
		t.Errorf("a session directory that holds the workspace: %v", err)
	}
	iso = newIso()
	inside := filepath.Join(ws, "sessions")
	if err := iso.hideSessions(inside, ws); err != nil || iso.startDenyRead()[len(iso.startDenyRead())-1] != "/srv/keys" {
		t.Errorf("a session directory inside the workspace: %v %v", err, iso.startDenyRead())
	}
	if notes := iso.notes(inside, ws); len(notes) != 1 || !strings.Contains(notes[0], "can read and change the saved sessions") {
		t.Errorf("notes %q", notes)
	}
}
