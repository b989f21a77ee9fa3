package sandbox

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentrun-dev/agentrun/sandbox/initproc"
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

// TestAgentHostIDDrawsAgainForARunningProcess: the agent's host id is drawn
// from those the files leave free; the namespaces are made for it before
// the running processes' ids are known, and when a process turns out to
// use it, what was made is undone and an id is drawn that neither the
// files nor the processes use. The id returned is always the one the last
// namespaces were made for, each undo follows a build of its own, and the
// processes are read once.
func TestAgentHostIDDrawsAgainForARunningProcess(t *testing.T) {
	const a, b, c, d = hostIDBase + 1, hostIDBase + 2, hostIDBase + 3, hostIDBase + 4
	tests := []struct {
		name      string
		draws     []int
		files     []int
		running   []int
		buildErr  map[int]error
		want      int
		wantErr   string
		wantBuilt []int // the ids namespaces were made for, in order
		wantUndos int
	}{
		{name: "the first draw is free", draws: []int{a}, want: a, wantBuilt: []int{a}},
		{name: "an id a file uses is passed over before anything is made", draws: []int{a, b}, files: []int{a}, want: b, wantBuilt: []int{b}},
		{name: "an id a process uses is undone and drawn again", draws: []int{a, b}, running: []int{a}, want: b, wantBuilt: []int{a, b}, wantUndos: 1},
		{name: "the redraw passes over the processes' and the files' ids without making anything for them",
			draws: []int{a, a, b, c, d}, files: []int{c}, running: []int{a, b}, want: d, wantBuilt: []int{a, d}, wantUndos: 1},
		{name: "a process's id drawn after the files' ones", draws: []int{c, a, b}, files: []int{c}, running: []int{a}, want: b, wantBuilt: []int{a, b}, wantUndos: 1},
		{name: "a failed build ends it, undoing nothing it did not make", draws: []int{a}, buildErr: map[int]error{a: fmt.Errorf("no user namespaces")},
			wantErr: "no user namespaces", wantBuilt: []int{a}},
		{name: "a failed build after a redraw ends it", draws: []int{a, b}, running: []int{a}, buildErr: map[int]error{b: fmt.Errorf("boom")},
			wantErr: "boom", wantBuilt: []int{a, b}, wantUndos: 1},
		{name: "no free id among the draws", draws: []int{a}, files: []int{a}, wantErr: "found no unused uid"},
		{name: "no free id left after a process took the only one drawn", draws: []int{a}, running: []int{a}, wantErr: "found no unused uid",
			wantBuilt: []int{a}, wantUndos: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := 0
			draw := func() int {
				id := tt.draws[i%len(tt.draws)]
				i++
				return id
			}
			set := func(ids []int) map[int]bool {
				m := map[int]bool{}
				for _, id := range ids {
					m[id] = true
				}
				return m
			}
			files, procs := set(tt.files), set(tt.running)
			reads := 0
			running := func() map[int]bool { reads++; return procs }
			var built []int
			live := 0 // namespaces made and not undone
			undos := 0
			build := func(id int) error {
				built = append(built, id)
				if err := tt.buildErr[id]; err != nil {
					return err
				}
				live++
				return nil
			}
			undo := func() {
				if live != 1 {
					t.Errorf("undo with %d namespaces made", live)
				}
				live--
				undos++
			}
			got, err := agentHostID(draw, func(id int) bool { return files[id] }, running, build, undo)
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("err %v, want %q", err, tt.wantErr)
			case tt.wantErr == "" && err != nil:
				t.Errorf("err %v", err)
			case tt.wantErr == "" && got != tt.want:
				t.Errorf("id %d, want %d", got, tt.want)
			}
			if fmt.Sprint(built) != fmt.Sprint(tt.wantBuilt) || undos != tt.wantUndos {
				t.Errorf("built %v and undid %d, want %v and %d", built, undos, tt.wantBuilt, tt.wantUndos)
			}
			if err == nil && (live != 1 || built[len(built)-1] != got) {
				t.Errorf("the id %d is not the one the live namespaces were made for (%v, %d live)", got, built, live)
			}
			if err != nil && live != 0 {
				t.Errorf("%d namespaces left made after the error", live)
			}
			if reads > 1 {
				t.Errorf("the processes were read %d times", reads)
			}
		})
	}
}

// TestUserNamespacesHelperFails: a namespace helper that fails (or sends
// fewer handles than asked for) is an error that carries its own words,
// not a sandbox started without its namespaces.
func TestUserNamespacesHelperFails(t *testing.T) {
	for _, script := range []string{
		"echo 'clone(CLONE_NEWUSER): operation not permitted' >&2; exit 1",
		"exit 0", // nothing sent
	} {
		files, err := userNamespacesByHelper([]string{"/bin/sh", "-c", script, "sh"}, "0 0 1/0 0 1", "1 1 1/1 1 1")
		if err == nil || files != nil {
			t.Fatalf("%q: %v, %v; want an error", script, files, err)
		}
		if strings.Contains(script, "clone(") && !strings.Contains(err.Error(), "operation not permitted") {
			t.Errorf("%q: the helper's words are lost: %v", script, err)
		}
	}
}

// TestUserNamespacesEitherWay: the namespaces come the same from the
// runner's own vfork (where it has one) and from the init started as the
// helper, which forks (elsewhere, and on kernels without pidfds): one
// handle per map, in order, each a user namespace with the maps asked for.
func TestUserNamespacesEitherWay(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the drop's namespaces are root's: run as root (CI does)")
	}
	helper := initHelper(t)
	maps := []string{
		initproc.FormatIDMaps([]initproc.IDMap{{Inside: 0, Outside: 0, Count: 1}, {Inside: AgentUID, Outside: hostIDBase + 7, Count: 1}},
			[]initproc.IDMap{{Inside: 0, Outside: 0, Count: 1}, {Inside: AgentUID, Outside: hostIDBase + 7, Count: 1}}),
		initproc.FormatIDMaps([]initproc.IDMap{{Inside: 1001, Outside: hostIDBase + 7, Count: 1}}, []initproc.IDMap{{Inside: 1002, Outside: hostIDBase + 7, Count: 1}}),
	}
	want := []string{"0 0 1 1000 1073741831 1 0 0 1 1000 1073741831 1", "1001 1073741831 1 1002 1073741831 1"}
	for _, way := range []struct {
		name string
		make func() ([]*os.File, error)
	}{
		{"userNamespaces", func() ([]*os.File, error) { return userNamespaces([]string{"/nonexistent/helper"}, maps...) }},
		{"helper", func() ([]*os.File, error) { return userNamespacesByHelper(helper, maps...) }},
	} {
		t.Run(way.name, func(t *testing.T) {
			if way.name == "userNamespaces" && runtime.GOARCH != "amd64" {
				t.Skip("the runner's own namespaces are linux/amd64's; elsewhere userNamespaces is the helper")
			}
			files, err := way.make()
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != len(maps) {
				t.Fatalf("%d handles for %d maps", len(files), len(maps))
			}
			for i, f := range files {
				// nsenter joins it by the handle, passed as its descriptor 3.
				cmd := exec.Command("nsenter", "--preserve-credentials", "--user=/proc/self/fd/3", "--", "cat", "/proc/self/uid_map", "/proc/self/gid_map")
				cmd.ExtraFiles = []*os.File{f}
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("nsenter: %v %s", err, out)
				}
				if got := strings.Join(strings.Fields(string(out)), " "); got != want[i] {
					t.Errorf("namespace %d: maps %q, want %q", i, got, want[i])
				}
				f.Close()
			}
		})
	}
}

// TestStatusIDs: the ids of a status file are its Uid and Gid lines' four
// each; text inside a line is not a line, and a file cut short gives what
// it holds.
func TestStatusIDs(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         []int
	}{
		{"whole", "Name:\tagent\nUmask:\t0022\nState:\tS\nUid:\t1\t2\t3\t4\nGid:\t5\t6\t7\t8\nFDSize:\t64\n", []int{1, 2, 3, 4, 5, 6, 7, 8}},
		{"a line's name inside another line", "Name:\tx Uid:\t99\nUid:\t1\t1\t1\t1\nGid:\t2\t2\t2\t2\n", []int{1, 2}},
		{"cut after Uid", "Name:\tx\nUid:\t1\t2\t3\t4", []int{1, 2, 3, 4}},
		{"every Uid line counts", "Uid:\t1\t1\t1\t1\nGid:\t2\t2\t2\t2\nUid:\t3\t3\t3\t3\n", []int{1, 2, 3}},
		{"no ids", "Name:\tx\n", nil},
		{"empty", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids := map[int]bool{}
			statusIDs([]byte(tc.status), ids)
			var got []int
			for id := range ids {
				got = append(got, id)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("ids %v, want %v", got, tc.want)
			}
		})
	}
}

// TestProcIDsFindsAProcess: a process running as an id of its own is found
// in /proc, whatever it names itself: a name that spells a Uid line after
// a newline (the kernel escapes it) adds no id and hides none.
func TestProcIDsFindsAProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting a process as another user needs root")
	}
	const uid, gid, fake = 4242, 4343, 97654321 // fake: 8 digits, what the 15 bytes of a name leave
	before := map[int]bool{}
	procIDs("/proc", before)
	if before[uid] || before[gid] || before[fake] {
		t.Skipf("a process here already uses %d, %d or %d", uid, gid, fake)
	}
	// Only a process names itself (comm): the shell does, says so, and waits.
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`printf 'x\nUid:\t%d' > /proc/$$/comm && echo named && read _`, fake))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "named\n" {
		t.Fatalf("the process did not name itself: %q %v", line, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(string(status), "\n"); first != fmt.Sprintf(`Name:	x\nUid:	%d`, fake) {
		t.Fatalf("status begins %q: the name is not the one set", first)
	}
	ids := map[int]bool{}
	procIDs("/proc", ids)
	if !ids[uid] || !ids[gid] {
		t.Errorf("the process's uid %d or gid %d is missing from /proc's ids", uid, gid)
	}
	if ids[fake] {
		t.Errorf("the id %d its name spells was taken for one of its ids", fake)
	}
}

// TestPrefetchedIDsAreTakenOnce: the process ids read from a run's start
// serve the next sandbox prepared, once; the one after reads /proc again
// (a run's second start must not check its agent's id against a list that
// old).
func TestPrefetchedIDsAreTakenOnce(t *testing.T) {
	proc := t.TempDir()
	writeStatus := func(pid, uid int) {
		dir := filepath.Join(proc, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		status := fmt.Sprintf("Name:\tagent\nPid:\t%d\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\n", pid, uid, uid, uid, uid, uid, uid, uid, uid)
		if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	defer func(h hostSources) { hostFiles = h }(hostFiles)
	hostFiles.proc = proc
	const early, late = hostIDBase + 11, hostIDBase + 12
	writeStatus(100, early)
	prefetchedIDs.Lock()
	prefetchedIDs.ids = readRunningIDs() // what PrefetchHostIDs does for a root caller
	prefetchedIDs.Unlock()
	first := <-takeRunningIDs() // the read may not have finished: the take waits for it
	writeStatus(200, late)
	second := <-takeRunningIDs()
	if !first[early] {
		t.Errorf("the prefetched read lacks uid %d: %v", early, first)
	}
	if !second[early] || !second[late] {
		t.Errorf("the second take is not a fresh read of /proc: %v", second)
	}
}
