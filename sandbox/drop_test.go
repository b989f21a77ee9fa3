package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestUnsearchableAncestors(t *testing.T) {
	const agent = hostIDBase + 1
	dirs := map[string]struct {
		uid  int
		mode fs.FileMode
	}{
		"/root":       {0, 0o700},
		"/root/src":   {0, 0o755},
		"/home":       {0, 0o755},
		"/home/alice": {1000, 0o750},
		"/srv":        {0, 0o755},
		"/srv/mine":   {agent, 0o700},
		"/opt":        {0, 0o711},
	}
	stat := func(p string) (int, int, fs.FileMode, error) {
		d, ok := dirs[p]
		if !ok {
			return 0, 0, 0, fs.ErrNotExist
		}
		return d.uid, d.uid, fs.ModeDir | d.mode, nil
	}
	tests := []struct {
		name  string
		paths []string
		want  []string
	}{
		{"searchable all the way", []string{"/srv/ws", "/opt/cli/bin"}, nil},
		{"root's home", []string{"/root/src/ws"}, []string{"/root"}},
		{"another user's home", []string{"/home/alice/proj"}, []string{"/home/alice"}},
		{"owned by the agent", []string{"/srv/mine/ws"}, nil},
		{"under /tmp the sandbox makes its own", []string{"/tmp/x/y"}, nil},
		{"one mask for two paths", []string{"/root/src/ws", "/root/.local/cli"}, []string{"/root"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unsearchableAncestors(tt.paths, agent, stat)
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if got := outermost([]string{"/a/b", "/c"}, "/a"); strings.Join(got, " ") != "/c /a" {
		t.Errorf("outermost replaces inner directories: %v", got)
	}
}

func TestWithAgentEntry(t *testing.T) {
	p := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(p, []byte("root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/bash\nagent:x:5:5::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := withAgentEntry(p, "agent:x:1000:1000:agentrun agent:/h:/bin/sh", 2)
	if err != nil {
		t.Fatal(err)
	}
	want := "root:x:0:0:root:/root:/bin/bash\nagent:x:1000:1000:agentrun agent:/h:/bin/sh\n"
	if string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, _ := withAgentEntry(filepath.Join(t.TempDir(), "missing"), "agent:x:1000:", 2); string(got) != "agent:x:1000:\n" {
		t.Errorf("a missing file gives only the entry: %q", got)
	}
}

func TestParseStatus(t *testing.T) {
	tests := []struct {
		msg  string
		want ExitStatus
		ok   bool
	}{
		{"exit 0", ExitStatus{}, true},
		{"exit 3", ExitStatus{Code: 3}, true},
		{"signal 9", ExitStatus{Signaled: true, Signal: syscall.SIGKILL}, true},
		{"exit -1", ExitStatus{}, false},
		{"exit 300", ExitStatus{}, false},
		{"signal", ExitStatus{}, false},
		{"ready", ExitStatus{}, false},
		{"boom 1", ExitStatus{}, false},
	}
	for _, tt := range tests {
		got, ok := parseStatus(tt.msg)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseStatus(%q) = %+v %v", tt.msg, got, ok)
		}
	}
}

func TestInitArgs(t *testing.T) {
	o := InitOptions{Proxy: true, UID: AgentUID, GID: AgentUID, Dir: "/ws", MaxProcs: 64}
	if got := strings.Join(o.Args(), " "); got != "--proxy --uid 1000 --gid 1000 --chdir /ws --max-procs 64" {
		t.Errorf("args = %q", got)
	}
	if got := (InitOptions{UID: -1, GID: -1}).Args(); len(got) != 0 {
		t.Errorf("no drop, no flags: %v", got)
	}
}

// TestReleaseNeverRemovesTheWorkspace: the idmapped workspace is attached
// at hostDir/ws. When the unmount fails, or the directory is somehow still
// full, release must leave it: a recursive removal there would delete the
// user's workspace.
func TestReleaseNeverRemovesTheWorkspace(t *testing.T) {
	defer func(u func(string, int) error) { unmount = u }(unmount)
	for _, tt := range []struct {
		name string
		err  error
	}{{"unmount fails", syscall.EINVAL}, {"unmount succeeds, yet files are there", nil}} {
		t.Run(tt.name, func(t *testing.T) {
			host := t.TempDir()
			ws := filepath.Join(host, "ws")
			// What the mounted workspace shows: the user's files.
			if err := os.MkdirAll(filepath.Join(ws, "src"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "src", "main.go"), []byte("package main"), 0o644); err != nil {
				t.Fatal(err)
			}
			unmount = func(string, int) error { return tt.err }
			d := &dropped{hostDir: host, ws: ws, mounted: true}
			d.release()
			if _, err := os.Stat(filepath.Join(ws, "src", "main.go")); err != nil {
				t.Errorf("the workspace's file is gone: %v", err)
			}
		})
	}
	// The normal case: both empty directories go.
	host := t.TempDir()
	ws := filepath.Join(host, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	unmount = func(string, int) error { return nil }
	(&dropped{hostDir: host, ws: ws, mounted: true}).release()
	if _, err := os.Stat(host); err == nil {
		t.Errorf("the empty host directory stays")
	}
}

// TestPickHostIDAvoidsUsedIDs: the agent's host uid must not be one the
// host uses: a user's (its files, its processes), a subordinate range of
// rootless containers, or a running process's (another run's agent).
func TestPickHostIDAvoidsUsedIDs(t *testing.T) {
	dir := t.TempDir()
	const user, group, sub, proc, free = hostIDBase + 1, hostIDBase + 2, hostIDBase + 100, hostIDBase + 5000, hostIDBase + 9
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	src := hostSources{
		passwd: write("passwd", fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nbig:x:%d:0::/home/big:/bin/sh\n", user)),
		group:  write("group", fmt.Sprintf("root:x:0:\nbig:x:%d:\n", group)),
		subuid: write("subuid", fmt.Sprintf("alice:%d:65536\n", hostIDBase+50)),
		subgid: write("subgid", "# none\n"),
		proc:   filepath.Join(dir, "proc"),
	}
	write("proc/4242/status", fmt.Sprintf("Name:\tsleep\nUid:\t%d\t%d\t%d\t%d\nGid:\t0\t0\t0\t0\n", proc, proc, proc, proc))
	inUse := hostIDsInUse(src)
	for _, id := range []int{user, group, sub, proc} {
		if !inUse(id) {
			t.Errorf("%d is in use", id)
		}
	}
	draws := []int{user, group, sub, proc, free}
	got, err := pickHostID(func() int { id := draws[0]; draws = draws[1:]; return id }, inUse)
	if err != nil || got != free {
		t.Errorf("pickHostID = %d, %v; want %d", got, err, free)
	}
	if _, err := pickHostID(func() int { return user }, inUse); err == nil {
		t.Errorf("an id space without a free id must fail")
	}
	// The real host: whatever is drawn is free there.
	id, err := pickHostID(randomHostID, hostIDsInUse(hostFiles))
	if err != nil || hostIDsInUse(hostFiles)(id) {
		t.Errorf("pickHostID on this host = %d, %v", id, err)
	}
}
