package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestArgs(t *testing.T) {
	cfg := Config{Workspace: "/tmp/ws", Writable: []string{"/tmp/state"}, ReadOnly: []string{"/tmp/cli", "/tmp/ws/inside"},
		Protect: GitProtection{Paths: []string{".git"}}, Init: "/usr/bin/agentrun", Proc: HostProc}
	deny := []Deny{{Path: "/home/u/.ssh", IsDir: true}, {Path: "/home/u/.netrc"}}
	ws := []fdMount{{fd: 5, dest: "/tmp/ws"}, {fd: 6, dest: "/tmp/ws/.git", ro: true}}
	got := strings.Join(Args("bwrap", cfg, deny, nil, ws), " ")
	for _, want := range []string{
		"--unshare-user --unshare-ipc --unshare-pid --unshare-uts --unshare-net",
		"--cap-drop ALL --ro-bind / / --dev /dev --ro-bind /proc /proc --perms 1777 --tmpfs /tmp",
		"--bind /tmp/state /tmp/state --bind-fd 5 /tmp/ws --ro-bind /tmp/cli /tmp/cli --ro-bind-fd 6 /tmp/ws/.git --ro-bind /usr/bin/agentrun " + InitPath,
		"--perms 0000 --tmpfs /home/u/.ssh --remount-ro /home/u/.ssh --ro-bind /dev/null /home/u/.netrc",
		"--chdir / --seccomp 4 --",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"/tmp/ws/inside", "--userns", "--cap-add", "/etc/passwd", "--bind /tmp/ws", "--ro-bind /tmp/ws"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("args hold %q: %s", unwanted, got)
		}
	}
	if !strings.HasSuffix(got, "--") {
		t.Errorf("args must end with --: %s", got)
	}
	cfg.Proc = FreshProc
	nested := cfg
	nested.Workspace, nested.ReadOnly = "/tmp/t/ws", []string{"/tmp/t/cli/bin"}
	if got := strings.Join(Args("bwrap", nested, nil, nil, ws), " "); !strings.Contains(got, "--tmpfs /tmp --perms 0755 --dir /tmp/t --perms 0755 --dir /tmp/t/cli --bind") {
		t.Errorf("the directories above binds under /tmp are made searchable, once: %s", got)
	}
	got = strings.Join(Args("bwrap", cfg, nil, nil, ws), " ")
	if !strings.Contains(got, "--proc /proc --ro-bind-try /proc/sys /proc/sys --ro-bind-try /proc/sysrq-trigger /proc/sysrq-trigger") {
		t.Errorf("a fresh /proc keeps the kernel's knobs read-only: %s", got)
	}

	// A root caller: bubblewrap joins the agent's user namespace and keeps
	// only what the init needs to drop; the workspace's mounts come from
	// the idmapped copy (by descriptor, as ever).
	d := &dropped{hostUID: hostIDBase + 7, ws: "/tmp/agentrun-host-1/ws", masks: []string{"/root"}}
	rootWS := []fdMount{{fd: 8, dest: "/tmp/ws"}, {fd: 9, dest: "/tmp/ws/.git", ro: true}}
	got = strings.Join(Args("bwrap", cfg, nil, d, rootWS), " ")
	for _, want := range []string{
		"bwrap --die-with-parent --userns 5 --unshare-ipc",
		"--cap-drop ALL --cap-add CAP_SETUID --cap-add CAP_SETGID --ro-bind / /",
		"--perms 1777 --tmpfs /tmp --tmpfs /root --perms 0644 --ro-bind-data 6 /etc/passwd --perms 0644 --ro-bind-data 7 /etc/group",
		"--bind-fd 8 /tmp/ws",
		"--ro-bind-fd 9 /tmp/ws/.git",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("root caller's args lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "--unshare-user") || strings.Contains(got, "agentrun-host-1") {
		t.Errorf("a root caller's sandbox joins its own user namespace and mounts the workspace by descriptor: %s", got)
	}
}

func TestDefaultDenyRead(t *testing.T) {
	got := DefaultDenyRead("/home/u", "relative", "/home/u", "/root")
	for _, want := range []string{"/home/u/.ssh", "/home/u/.claude", "/home/u/.codex", "/home/u/.config/gh", "/home/u/.cargo/credentials.toml",
		"/home/u/.pgpass", "/home/u/.vault-token", "/home/u/.terraform.d", "/home/u/.bash_history", "/root/.ssh", "/var/run/secrets", "/run/secrets"} {
		if !slices.Contains(got, want) {
			t.Errorf("DefaultDenyRead lacks %s: %v", want, got)
		}
	}
	if got[0] != "/home/u/.ssh" || got[len(got)-1] != "/run/secrets" {
		t.Errorf("homes first, in order, then the absolute entries: %v", got)
	}
	seen := map[string]bool{}
	for _, p := range got {
		if seen[p] || !filepath.IsAbs(p) || strings.HasSuffix(p, "/") {
			t.Errorf("entry %q repeated, relative or not clean", p)
		}
		seen[p] = true
	}
	for p, want := range map[string]placeholder{"/home/u/.bash_history": placeholderNone, "/root/.cargo/credentials.toml": placeholderFile,
		"/home/u/.ssh": placeholderDir, "/srv/keys": placeholderDir, "/home/u/.config/gh": placeholderDir, "/home/u/.netrc": placeholderFile} {
		if got := placeholderFor(p); got != want {
			t.Errorf("placeholderFor(%s) = %v, want %v", p, got, want)
		}
	}
}

// TestProtectGit: what of the workspace's repositories is read-only. A
// .git file is no safer than a .git directory: rewritten to point at a
// directory of the agent's, it runs the agent's config on the host's next
// git command.
func TestProtectGit(t *testing.T) {
	type tree map[string]string // path → "dir", "link:TARGET" or file content
	tests := []struct {
		name        string
		parent      tree // around the workspace, which is "ws"
		ws          tree
		paths       []string
		placeholder bool
		err         string
	}{
		{name: "no repository", ws: tree{"src/main.go": "x"}},
		{name: "repository", ws: tree{".git/HEAD": "ref", "src/a": "x"}, paths: []string{".git"}},
		{name: "worktree pointing outside", parent: tree{"main/.git/worktrees/wt/HEAD": "ref"},
			ws: tree{".git": "gitdir: ../main/.git/worktrees/wt\n"}, paths: []string{".git"}},
		{name: "gitfile pointing inside", ws: tree{".git": "gitdir: store/gd\n", "store/gd/config": "x"}, paths: []string{".git", "store/gd"}},
		{name: "gitfile pointing inside, absolute", ws: tree{".git": "gitdir: WS/store/gd\n", "store/gd/config": "x"}, paths: []string{".git", "store/gd"}},
		{name: "gitfile pointing to a missing directory inside", ws: tree{".git": "gitdir: store/gd\n"}, err: "which does not exist"},
		{name: "gitfile pointing through a link inside", ws: tree{".git": "gitdir: l/gd\n", "l": "link:store", "store/gd/HEAD": "x"}, err: "through a symbolic link"},
		{name: "gitfile pointing to a file inside", ws: tree{".git": "gitdir: notes\n", "notes": "x"}, paths: []string{".git", "notes"}},
		{name: "submodule", ws: tree{".git/modules/sub/HEAD": "x", ".gitmodules": "x", "sub/.git": "gitdir: ../.git/modules/sub\n"},
			paths: []string{".git", "sub/.git"}},
		{name: "nested repository", ws: tree{"a/b/c/.git/HEAD": "x", "a/b/other/.git": "gitdir: ../c/.git\n"},
			paths: []string{"a/b/c/.git", "a/b/other/.git"}},
		{name: "commondir inside", ws: tree{".git/commondir": "../common\n", ".git/HEAD": "x", "common/config": "x"},
			paths: []string{".git", "common"}},
		{name: "node_modules not searched", ws: tree{"node_modules/pkg/.git/HEAD": "x"}},
		{name: ".git a link", ws: tree{".git": "link:/srv/repo/.git"}, err: "is a symbolic link"},
		{name: "deeper .git a link inside", ws: tree{"sub/.git": "link:../store", "store/HEAD": "x"}, paths: []string{"store"}},
		{name: "subdirectory of a repository", parent: tree{".git/HEAD": "x"}, placeholder: true, paths: []string{".git"}},
		{name: "subdirectory of a worktree", parent: tree{".git": "gitdir: /elsewhere\n"}, ws: tree{"a": "x"}, placeholder: true, paths: []string{".git"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			ws := filepath.Join(base, "ws")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			for root, tr := range map[string]tree{base: tt.parent, ws: tt.ws} {
				for rel, content := range tr {
					p := filepath.Join(root, rel)
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					content = strings.ReplaceAll(content, "WS", ws)
					switch {
					case content == "dir":
						if err := os.MkdirAll(p, 0o755); err != nil {
							t.Fatal(err)
						}
					case strings.HasPrefix(content, "link:"):
						if err := os.Symlink(strings.TrimPrefix(content, "link:"), p); err != nil {
							t.Fatal(err)
						}
					default:
						if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			got, ok := protect(t, ws, tt.err)
			if !ok {
				return
			}
			if strings.Join(got.Paths, ",") != strings.Join(tt.paths, ",") || (len(got.Placeholders) > 0) != tt.placeholder || len(got.Notes) > 0 {
				t.Errorf("ProtectGit = %+v, want paths %v placeholder %v", got, tt.paths, tt.placeholder)
			}
		})
	}
}

func TestProtectGitSearchIsBounded(t *testing.T) {
	ws := t.TempDir()
	for i := 0; i < 30; i++ {
		if err := os.MkdirAll(filepath.Join(ws, fmt.Sprintf("d%02d", i), "deeper"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(ws, "d00", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "d29", "deeper", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := openWS(t, ws)
	got, err := findGit(dir, 10, MaxGitMounts)
	if err != nil || !slices.Contains(got.Notes, GitSearchNote) || strings.Join(got.Paths, ",") != "d00/.git" {
		t.Errorf("findGit with a bound of 10 = %+v, %v; want the shallow one found and a note", got, err)
	}
}

func TestGitPlaceholderIsRemovedOnlyWhenEmpty(t *testing.T) {
	ws := t.TempDir()
	dir := openWS(t, ws)
	g := &GitProtection{Paths: []string{".git", "a/b/.git"}, Placeholders: []string{".git", "a/b/.git"}}
	undo, err := MakeGitPlaceholders(dir, g)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".git", "a/b/.git"} {
		if st, err := os.Lstat(filepath.Join(ws, p)); err != nil || !st.IsDir() {
			t.Errorf("no placeholder %s: %v", p, err)
		}
	}
	undo()
	for _, p := range []string{".git", "a"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("the empty placeholder %s was left", p)
		}
	}
	g = &GitProtection{Paths: []string{".git", "a/b/.git"}, Placeholders: []string{".git", "a/b/.git"}}
	undo, _ = MakeGitPlaceholders(dir, g)
	if err := os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a", "kept"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	undo()
	for _, p := range []string{".git/HEAD", "a/kept"} {
		if _, err := os.Stat(filepath.Join(ws, p)); err != nil {
			t.Errorf("a placeholder that is no longer empty must stay: %v", err)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "a", "b")); err == nil {
		t.Errorf("the empty placeholders below a kept directory were left")
	}
	g = &GitProtection{Paths: []string{".git"}, Placeholders: []string{".git"}}
	if _, err := MakeGitPlaceholders(dir, g); err == nil {
		t.Errorf("an existing .git is never taken for a placeholder")
	}
}

func TestPrepareDenyPlaceholders(t *testing.T) {
	base := denyTestDir(t)
	existingFile := filepath.Join(base, "file")
	if err := os.WriteFile(existingFile, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missingDir := filepath.Join(base, "keys")
	missingFile := filepath.Join(base, ".netrc")
	missingHistory := filepath.Join(base, ".bash_history")
	noParent := filepath.Join(base, "a", "b", "keys")
	link := filepath.Join(base, "link")
	if err := os.Symlink(base, link); err != nil {
		t.Fatal(err)
	}
	deny, ps, err := prepareDeny([]string{existingFile, missingDir, missingFile, missingHistory, noParent, "/tmp/not-there",
		filepath.Join(link, "file")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(deny) != 3 || deny[0].IsDir || !deny[1].IsDir || deny[2].IsDir {
		t.Errorf("deny = %+v (the linked path is the same file and comes once)", deny)
	}
	if st, err := os.Stat(missingDir); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("no private placeholder directory: %v %v", st, err)
	}
	if st, err := os.Stat(missingFile); err != nil || st.IsDir() || st.Size() != 0 {
		t.Errorf("no empty placeholder file for .netrc: %v %v", st, err)
	}
	for _, p := range []string{missingHistory, filepath.Join(base, "a")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was made: histories get no placeholder, and missing directories are not made", p)
		}
	}
	// A concurrent run finds them and mounts over them; the first run's
	// end leaves them to it, and the last one's removes them.
	again, ps2, err := prepareDeny([]string{missingDir, missingFile}, nil)
	if err != nil || len(again) != 2 {
		t.Errorf("second prepareDeny: %+v %v", again, err)
	}
	ps.close()
	for _, p := range []string{missingDir, missingFile} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s went while another run still mounts over it: %v", p, err)
		}
	}
	ps2.close()
	for _, p := range []string{missingDir, missingFile} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was left after the last run", p)
		}
	}
	if _, err := os.Stat(existingFile); err != nil {
		t.Errorf("a deny path that was there before is never removed: %v", err)
	}
	// What the agent cannot reach is neither mounted nor made.
	far := filepath.Join(base, "far")
	got, ps3, err := prepareDeny([]string{existingFile, far}, func(p string) bool { return p == existingFile })
	if err != nil || len(got) != 1 {
		t.Errorf("unreachable entries: %+v %v", got, err)
	}
	ps3.close()
	if _, err := os.Stat(far); err == nil {
		t.Errorf("a placeholder was made for a path the agent cannot reach")
	}
}

// TestPlaceholderRemovalLeavesWhatChanged: a placeholder that was filled
// or replaced during the run is the user's now, and stays.
func TestPlaceholderRemovalLeavesWhatChanged(t *testing.T) {
	base := denyTestDir(t)
	dir, file, swapped := filepath.Join(base, ".ssh"), filepath.Join(base, ".netrc"), filepath.Join(base, ".pgpass")
	_, ps, err := prepareDeny([]string{dir, file, swapped}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "id_ed25519"), []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("machine x"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(swapped)
	if err := os.WriteFile(swapped, nil, 0o600); err != nil {
		t.Fatal(err)
	} // another file at the name, empty too
	ps.close()
	for _, p := range []string{filepath.Join(dir, "id_ed25519"), file, swapped} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}

// TestAdvice: each way bubblewrap fails to start, as bwrap 0.8 words it,
// gets its cause and the fix that applies.
func TestAdvice(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		want   []string
	}{
		{"bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.",
			[]string{"seccomp profile", "agentrun/bwrap.json", "sandboxProfiles"}},
		{"bwrap: Creating new namespace failed: No space left on device", []string{"user.max_user_namespaces"}},
		{"bwrap: setting up uid map: Permission denied", []string{"AppArmor", "agentrun-bwrap", "apparmor_restrict_unprivileged_userns"}},
		{"bwrap: Failed to make / slave: Permission denied", []string{"sandboxProfiles.appArmor.enabled"}},
		{"bwrap: Can't mount proc on /newroot/proc: Operation not permitted", []string{"cannot mount /proc"}},
		{"bwrap: Can't mkdir /tmp/x: File exists", []string{"mount point"}},
		{`bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: remount "/newroot/tmp/agentrun-host-4227856086/ws": No such file or directory`,
			[]string{"mount table kept changing"}},
		{`bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: remount "/newroot/srv/to": Invalid argument`,
			[]string{"mount table kept changing"}},
		{"bwrap: Race condition binding dirfd", []string{"moved while it started"}},
		{"bwrap: Can't bind mount /oldroot/w/svc on /newroot/w/svc: Unable to mount source on destination: No such file or directory", []string{"moved while it started"}},
		{"", []string{"no message", "agentrun/bwrap.json"}},
	} {
		got := Advice(tc.stderr)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("Advice(%q) = %q: lacks %q", tc.stderr, got, w)
			}
		}
		if tc.stderr != "" && !strings.Contains(got, tc.stderr) {
			t.Errorf("Advice(%q) drops bubblewrap's own words: %q", tc.stderr, got)
		}
	}
}

// TestPlaceholderMarkOnSomeoneElsesFile: the mark lets the last run remove
// a placeholder another run made, never a file that merely carries it: one
// writable by others (anyone may mark it) or not private stays.
func TestPlaceholderMarkOnSomeoneElsesFile(t *testing.T) {
	base := denyTestDir(t)
	shared := filepath.Join(base, ".netrc")
	if err := os.WriteFile(shared, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(shared, placeholderMark, []byte("1"), 0); err != nil {
		t.Skipf("no user attributes on %s: %v", base, err)
	}
	_, ps, err := prepareDeny([]string{shared}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps.made) != 0 {
		t.Errorf("a marked file open to all was adopted as a placeholder")
	}
	ps.close()
	if _, err := os.Stat(shared); err != nil {
		t.Errorf("the marked file was removed: %v", err)
	}
}

// TestPlaceholderModes: a placeholder is private unless it is root's in a
// directory other users may search, where their runs must be able to open
// it to hold it.
func TestPlaceholderModes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		uid    uint32
		mode   uint32
		isFile bool
		want   uint32
	}{
		{"root's /run", 0, 0o755, false, 0o755},
		{"root's /run, a file", 0, 0o755, true, 0o600},
		{"root's sticky /var/tmp", 0, 0o1777, false, 0o755},
		{"root's, searchable by its group", 0, 0o750, false, 0o755},
		{"root's home", 0, 0o700, false, 0o700},
		{"root's home, a file", 0, 0o700, true, 0o600},
		{"a user's home", 1000, 0o755, false, 0o700},
		{"a user's home, a file", 1000, 0o755, true, 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := unix.Stat_t{Uid: tc.uid, Mode: unix.S_IFDIR | tc.mode}
			if got := placeholderMode(&dir, tc.isFile); got != tc.want {
				t.Errorf("placeholderMode = %o, want %o", got, tc.want)
			}
		})
	}
}

// TestRootsSharedPlaceholderModes: root's directory placeholder in a
// directory every user may search is readable by all whatever the umask
// (test/sandbox's TestRootsPlaceholderStaysWhileAnotherUsersRunHoldsIt has
// another user hold it), its file placeholder private; a second run adopts
// both, and the last one removes them.
func TestRootsSharedPlaceholderModes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root's placeholders: run as root (CI does)")
	}
	base := denyTestDir(t)
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	secrets, netrc := filepath.Join(base, "secrets"), filepath.Join(base, ".netrc")
	_, ps, err := prepareDeny([]string{secrets, netrc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{secrets: 0o755, netrc: 0o600} {
		if st, err := os.Lstat(p); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %o", p, st, err, want)
		}
	}
	again, ps2, err := prepareDeny([]string{secrets, netrc}, nil)
	if err != nil || len(again) != 2 || len(ps2.made) != 2 {
		t.Errorf("second run: %+v %v, adopted %d", again, err, len(ps2.made))
	}
	ps.close()
	if _, err := os.Lstat(secrets); err != nil {
		t.Errorf("removed while another run holds it: %v", err)
	}
	ps2.close()
	for _, p := range []string{secrets, netrc} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was left after the last run", p)
		}
	}
}

// TestPlaceholderLockDoesNotWaitForEver: a user who may open a placeholder
// (root's directories in /run are open to all) and holds an exclusive lock
// on it makes a run wait lockWait at most, then go on without the lock.
func TestPlaceholderLockDoesNotWaitForEver(t *testing.T) {
	base := denyTestDir(t)
	dir := filepath.Join(base, "secrets")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	holder, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := unix.Flock(int(holder.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		deny, ps, err := prepareDeny([]string{dir}, nil)
		if err == nil && (len(deny) != 1 || len(ps.locks)+len(ps.made) != 0) {
			err = fmt.Errorf("deny %+v, %d locks, %d made: want the path mounted over, unlocked", deny, len(ps.locks), len(ps.made))
		}
		ps.close()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(30 * lockWait):
		t.Fatal("prepareDeny still waits for the exclusive lock")
	}
}

// TestPlaceholderDirectorySwappedIn: a directory exchanged for the
// placeholder between its mkdir and its open (renameat2 RENAME_EXCHANGE by
// whoever may rename in the directory) is not taken for the placeholder:
// not chmodded, marked, locked or removed.
func TestPlaceholderDirectorySwappedIn(t *testing.T) {
	base := t.TempDir()
	d, err := os.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, tc := range []struct {
		name  string
		setup func(p string) error
	}{
		{"not empty", func(p string) error {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(p, "id_ed25519"), []byte("key"), 0o600)
		}},
		{"open to others", func(p string) error {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.Chmod(p, 0o750) // past the umask
		}},
		{"with a subdirectory", func(p string) error { return os.MkdirAll(filepath.Join(p, "sub"), 0o700) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(base, strings.ReplaceAll(tc.name, " ", "-"))
			if err := tc.setup(p); err != nil {
				t.Fatal(err)
			}
			// As if mkdirat had made it and the swap came before the open.
			f, err := openMadeDir(int(d.Fd()), filepath.Base(p))
			if f != nil {
				f.Close()
			}
			if !errors.Is(err, fs.ErrExist) {
				t.Errorf("openMadeDir = %v, want ErrExist", err)
			}
		})
	}
}

// TestDenyPathThatKeepsGoingIsRefused: a deny path that is gone each time
// it is locked (other runs making and removing it) is looked at again, up
// to denyPathTries times, and then fails the start instead of being left
// out of the deny list.
func TestDenyPathThatKeepsGoingIsRefused(t *testing.T) {
	base := denyTestDir(t)
	p := filepath.Join(base, ".ssh")
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	defer func(h func(*placeholders, string) (bool, error)) { holdDenyPath = h }(holdDenyPath)
	for _, tc := range []struct {
		gone    int // the looks at which the path is gone once locked
		refused bool
	}{{0, false}, {1, false}, {denyPathTries - 1, false}, {denyPathTries, true}} {
		t.Run(fmt.Sprintf("gone %d times", tc.gone), func(t *testing.T) {
			looks := 0
			holdDenyPath = func(ps *placeholders, real string) (bool, error) {
				if looks++; looks <= tc.gone {
					return false, nil
				}
				return ps.hold(real)
			}
			deny, ps, err := prepareDeny([]string{p}, nil)
			defer ps.close()
			if tc.refused {
				if err == nil || !strings.Contains(err.Error(), "came and went") {
					t.Fatalf("prepareDeny = %+v, %v; want the path refused", deny, err)
				}
				return
			}
			if err != nil || len(deny) != 1 || deny[0].Path != p {
				t.Fatalf("prepareDeny = %+v, %v; want %s denied", deny, err, p)
			}
		})
	}
}

// TestDenyPathThatKeepsGoingForLong: whoever may rename in a deny path's
// directory can hold the lock of each look for up to lockWait before
// swapping the name; the looks stop after denyPathPatience, well before
// denyPathTries of them (the reviewer's eight cost a start 7 s).
func TestDenyPathThatKeepsGoingForLong(t *testing.T) {
	base := denyTestDir(t)
	p := filepath.Join(base, ".ssh")
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	defer func(h func(*placeholders, string) (bool, error)) { holdDenyPath = h }(holdDenyPath)
	looks := 0
	holdDenyPath = func(*placeholders, string) (bool, error) {
		looks++
		time.Sleep(lockWait * 7 / 10) // a lock held almost as long as a run waits for it
		return false, nil
	}
	_, ps, err := prepareDeny([]string{p}, nil)
	defer ps.close()
	if err == nil || !strings.Contains(err.Error(), "came and went") {
		t.Fatalf("prepareDeny: %v; want the path refused", err)
	}
	if looks >= denyPathTries || looks > int(denyPathPatience/(lockWait*7/10))+1 {
		t.Errorf("%d looks; the patience allows %v", looks, denyPathPatience)
	}
}

// TestPlaceholderThatCameMeanwhile: when the name of a missing deny path
// is taken between the look and the making of its placeholder (another
// run made its own), make says so and the path is looked at again, not
// left out; a dangling link there is left alone as before (nothing is
// made through it, and there is nothing to hide).
func TestPlaceholderThatCameMeanwhile(t *testing.T) {
	base := t.TempDir()
	came, link := filepath.Join(base, ".aws"), filepath.Join(base, ".ssh")
	if err := os.Mkdir(came, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "nowhere"), link); err != nil {
		t.Fatal(err)
	}
	ps := &placeholders{}
	defer ps.close()
	if real, err := ps.make(came, false); !errors.Is(err, errPlaceholderCame) {
		t.Errorf("make over a directory that came = %q, %v; want errPlaceholderCame", real, err)
	}
	if real, err := ps.make(link, false); real != "" || err != nil {
		t.Errorf("make over a dangling link = %q, %v; want nothing made", real, err)
	}
	if _, err := os.Stat(filepath.Join(base, "nowhere")); err == nil {
		t.Errorf("a placeholder was made through the link")
	}
	// A link to what exists, come meanwhile, is looked at again: the next
	// look covers where it leads (found by the reviewer: it was left out).
	target, live := filepath.Join(base, "target"), filepath.Join(base, ".kube")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, live); err != nil {
		t.Fatal(err)
	}
	if real, err := ps.make(live, false); !errors.Is(err, errPlaceholderCame) {
		t.Errorf("make over a link to a directory = %q, %v; want errPlaceholderCame", real, err)
	}
	if real, isDir, err := lockDenyPath(ps, live, placeholderDir); err != nil || real != target || !isDir {
		t.Errorf("lockDenyPath(%s) = %q, %v, %v; want its target %s covered", live, real, isDir, err, target)
	}
}

// TestAdoptTakesOnlyWhatMakeMakes: a marked empty directory is adopted (and
// so removed by the last run) only with the mode make gives a placeholder
// in its directory; a private one in root's public directory, or an open
// one in a private directory, stays as it is.
func TestAdoptTakesOnlyWhatMakeMakes(t *testing.T) {
	root := os.Geteuid() == 0
	for _, tc := range []struct {
		name      string
		asRoot    bool // the directory is root's, else another user's (the caller's)
		dirMode   os.FileMode
		placeMode os.FileMode
		adopted   bool
	}{
		{"root's public directory, open placeholder", true, 0o755, 0o755, true},
		{"root's public directory, private placeholder", true, 0o755, 0o700, false},
		{"root's private directory, open placeholder", true, 0o700, 0o755, false},
		{"root's private directory, private placeholder", true, 0o700, 0o700, true},
		{"a user's public directory, open placeholder", false, 0o755, 0o755, false},
		{"a user's public directory, private placeholder", false, 0o755, 0o700, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.asRoot != root {
				t.Skipf("the case of a caller that is %s", map[bool]string{true: "root (CI runs it)", false: "not root (test/sandbox runs it as uid 65534)"}[tc.asRoot])
			}
			base := denyTestDir(t)
			p := filepath.Join(base, "secrets")
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
			for path, mode := range map[string]os.FileMode{base: tc.dirMode, p: tc.placeMode} {
				if err := os.Chmod(path, mode); err != nil {
					t.Fatal(err)
				}
			}
			if err := unix.Setxattr(p, placeholderMark, []byte("1"), 0); err != nil {
				t.Skipf("no user attributes on %s: %v", base, err)
			}
			deny, ps, err := prepareDeny([]string{p}, nil)
			if err != nil || len(deny) != 1 {
				t.Fatalf("prepareDeny = %+v, %v", deny, err)
			}
			if got := len(ps.made) == 1; got != tc.adopted {
				t.Errorf("adopted %v, want %v (made %d, locked %d)", got, tc.adopted, len(ps.made), len(ps.locks))
			}
			ps.close()
			if _, err := os.Lstat(p); (err == nil) == tc.adopted {
				t.Errorf("after the run: %v; removed should be %v", err, tc.adopted)
			}
		})
	}
}

// denyTestDir is a directory for deny paths, removed after the test: under
// /var/tmp, since paths under /tmp get no placeholders (the sandbox has its
// own /tmp).
func denyTestDir(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", "agentrun-deny-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	return base
}
