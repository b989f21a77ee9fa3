package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fixture is a workspace an agent wrote, next to a host secret.
func fixture(t *testing.T) (ws, secret string) {
	t.Helper()
	base := t.TempDir()
	ws = filepath.Join(base, "ws")
	secret = filepath.Join(base, "id_rsa")
	must(t, os.MkdirAll(filepath.Join(ws, "sessions", "claude-code"), 0o755))
	must(t, os.WriteFile(secret, []byte("PRIVATE KEY"), 0o600))
	must(t, os.WriteFile(filepath.Join(ws, "ok.jsonl"), []byte("transcript"), 0o600))
	must(t, os.Symlink(secret, filepath.Join(ws, "link.jsonl")))
	must(t, os.Symlink(filepath.Dir(secret), filepath.Join(ws, "linkdir")))
	must(t, syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600))
	return ws, secret
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesPlantedLinks(t *testing.T) {
	ws, secret := fixture(t)
	g := Guard{Untrusted: []string{ws}}
	tests := []struct {
		name string
		path string
		want error
	}{
		{"regular file", filepath.Join(ws, "ok.jsonl"), nil},
		{"link as the file", filepath.Join(ws, "link.jsonl"), ErrLink},
		{"link on the way", filepath.Join(ws, "linkdir", "id_rsa"), ErrLink},
		{"fifo", filepath.Join(ws, "fifo"), ErrNotRegular},
		{"directory", filepath.Join(ws, "sessions"), ErrNotRegular},
		{"outside: the caller's own path", secret, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := g.ReadFile(tt.path, 1<<20)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("ReadFile: %v", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("ReadFile = %q, %v; want %v", b, err, tt.want)
			case tt.want != nil && strings.Contains(string(b), "PRIVATE"):
				t.Fatalf("the secret was read")
			}
		})
	}
}

func TestCreateDoesNotWriteThroughLinks(t *testing.T) {
	ws, secret := fixture(t)
	g := Guard{Untrusted: []string{ws}}
	for _, p := range []string{filepath.Join(ws, "link.jsonl"), filepath.Join(ws, "linkdir", "id_rsa")} {
		if f, err := g.Create(p, 0o600); err == nil {
			f.WriteString("agent text")
			f.Close()
			t.Errorf("Create %s went through a link", p)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "PRIVATE KEY" {
		t.Fatalf("the host file was changed: %q", b)
	}
	// A missing directory is an error, not made (a mistyped path would
	// otherwise leave directories anywhere).
	if f, err := g.Create(filepath.Join(ws, "new", "deeper", "events.jsonl"), 0o600); !errors.Is(err, fs.ErrNotExist) {
		if f != nil {
			f.Close()
		}
		t.Errorf("Create in a missing directory: %v, want not exist", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Create made a directory: %v", err)
	}
	// Truncates an existing regular file.
	must(t, os.WriteFile(filepath.Join(ws, "old"), []byte("long old content"), 0o600))
	f, err := g.Create(filepath.Join(ws, "old"), 0o600)
	must(t, err)
	f.WriteString("new")
	f.Close()
	if b, _ := os.ReadFile(filepath.Join(ws, "old")); string(b) != "new" {
		t.Errorf("Create must truncate: %q", b)
	}
}

// TestAppendDoesNotWriteThroughLinks: Append keeps what is there and adds
// to it, and refuses a link planted in the workspace as Create does.
func TestAppendDoesNotWriteThroughLinks(t *testing.T) {
	ws, secret := fixture(t)
	g := Guard{Untrusted: []string{ws}}
	for _, p := range []string{filepath.Join(ws, "link.jsonl"), filepath.Join(ws, "linkdir", "id_rsa")} {
		if f, err := g.Append(p, 0o600); err == nil {
			f.WriteString("agent text")
			f.Close()
			t.Errorf("Append %s went through a link", p)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "PRIVATE KEY" {
		t.Fatalf("the host file was changed: %q", b)
	}
	for _, line := range []string{"a\n", "b\n"} {
		f, err := g.Append(filepath.Join(ws, "phases"), 0o600)
		must(t, err)
		f.WriteString(line)
		f.Close()
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "phases")); string(b) != "a\nb\n" {
		t.Errorf("Append must keep what is there: %q", b)
	}
}

// TestWritesRefuseAHardLink: a file to be written in the workspace (or,
// with OthersUntrusted, in a directory another user can write, such as
// /tmp) that has another name may be a hard link a writer there made to
// a file of the caller's (any file of the caller's where
// fs.protected_hardlinks is off): Create would truncate it, Append add to
// it. Both refuse it; the caller's own path outside is its own choice.
func TestWritesRefuseAHardLink(t *testing.T) {
	ws, secret := fixture(t)
	planted := filepath.Join(ws, "events.jsonl")
	must(t, os.Link(secret, planted))
	g := Guard{Untrusted: []string{ws}}
	open := map[string]func(string, os.FileMode) (*os.File, error){"Create": g.Create, "Append": g.Append}
	for name, f := range open {
		if out, err := f(planted, 0o600); !errors.Is(err, ErrHardLink) {
			if err == nil {
				out.Close()
			}
			t.Errorf("%s of a hard link in the workspace: %v, want ErrHardLink", name, err)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "PRIVATE KEY" {
		t.Fatalf("the host file was changed: %q", b)
	}
	// Outside the untrusted directories a file with two names is the
	// caller's own.
	own := filepath.Join(filepath.Dir(secret), "own")
	must(t, os.WriteFile(own, nil, 0o600))
	must(t, os.Link(own, own+".2"))
	for name, f := range open {
		out, err := f(own, 0o600)
		if err != nil {
			t.Errorf("%s of the caller's own file with two names: %v", name, err)
			continue
		}
		out.Close()
	}
}

func TestWriteFileReplacesALinkInsteadOfFollowingIt(t *testing.T) {
	ws, secret := fixture(t)
	g := Guard{Untrusted: []string{ws}}
	dst := filepath.Join(ws, "sessions", "claude-code", "abc.jsonl")
	// A planted temporary file name and a link at the destination.
	must(t, os.Symlink(secret, dst))
	must(t, os.Symlink(secret, dst+".tmp"))
	must(t, g.WriteFile(dst, strings.NewReader("session"), 0o600))
	if b, _ := os.ReadFile(secret); string(b) != "PRIVATE KEY" {
		t.Fatalf("the host file was overwritten: %q", b)
	}
	st, err := os.Lstat(dst)
	if err != nil || !st.Mode().IsRegular() {
		t.Fatalf("the destination is not a regular file now: %v %v", st, err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "session" {
		t.Errorf("content %q", b)
	}
	if err := g.WriteFile(filepath.Join(ws, "linkdir", "x"), strings.NewReader("x"), 0o600); !errors.Is(err, ErrLink) {
		t.Errorf("a linked directory on the way must be refused: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(secret), "x")); err == nil {
		t.Errorf("a file appeared outside the workspace")
	}
}

func TestOutermostUntrustedDirectoryWins(t *testing.T) {
	ws, secret := fixture(t)
	// The agent replaced an inner untrusted directory with a link.
	must(t, os.Symlink(filepath.Dir(secret), filepath.Join(ws, "state")))
	g := Guard{Untrusted: []string{filepath.Join(ws, "state"), ws}}
	if _, err := g.ReadFile(filepath.Join(ws, "state", "id_rsa"), 1<<20); !errors.Is(err, ErrLink) {
		t.Errorf("the walk must start at the outermost untrusted directory: %v", err)
	}
}

// aliasFixture is a workspace with a planted link where the runner will
// write or read, a host file the link points to, and ways to name the
// workspace other than its path: a link to it outside, and (as root) a
// bind mount of it.
type aliases struct {
	ws, victim, wslink, bind string
}

func aliasFixture(t *testing.T) aliases {
	t.Helper()
	base := t.TempDir()
	a := aliases{ws: filepath.Join(base, "ws"), victim: filepath.Join(base, "victim.txt"), wslink: filepath.Join(base, "wslink")}
	must(t, os.Mkdir(a.ws, 0o755))
	must(t, os.WriteFile(a.victim, []byte("host content"), 0o600))
	must(t, os.Symlink(a.victim, filepath.Join(a.ws, "events.jsonl")))
	must(t, os.Symlink(a.victim, filepath.Join(a.ws, "screenshot.png")))
	must(t, os.Mkdir(filepath.Join(a.ws, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(a.ws, "real.png"), []byte("png"), 0o600))
	must(t, os.Symlink(a.ws, a.wslink))
	if os.Geteuid() == 0 {
		a.bind = filepath.Join(base, "bind")
		must(t, os.Mkdir(a.bind, 0o755))
		if err := unix.Mount(a.ws, a.bind, "", unix.MS_BIND, ""); err != nil {
			t.Logf("no bind mount (%v): that alias is not tested", err)
			a.bind = ""
		} else {
			t.Cleanup(func() { _ = unix.Unmount(a.bind, unix.MNT_DETACH) })
		}
	}
	return a
}

// The runner's paths name the workspace in many ways: relative to the
// current directory (which is the workspace), through a link to it,
// through /proc/self/root, with "..", or through a bind mount. Each must
// be recognised as the workspace, so the planted link is refused: the
// victim is neither truncated (--events, --raw, --summary) nor read
// (--image, --env-file).
func TestAliasesOfTheWorkspaceAreRecognised(t *testing.T) {
	a := aliasFixture(t)
	t.Chdir(a.ws)
	g := Guard{Untrusted: []string{a.ws}}
	names := map[string]string{
		"relative":           "%s",
		"dot relative":       "./sub/../%s",
		"link to workspace":  filepath.Join(a.wslink, "%s"),
		"proc self root":     "/proc/self/root" + a.ws + "/%s",
		"proc self cwd":      "/proc/self/cwd/%s",
		"dot-dot":            filepath.Join(a.ws, "sub") + "/../%s",
		"link, then dot-dot": filepath.Join(a.wslink, "sub") + "/../%s",
	}
	if a.bind != "" {
		names["bind mount"] = filepath.Join(a.bind, "%s")
	}
	for name, form := range names {
		t.Run(name, func(t *testing.T) {
			if f, err := g.Create(fmt.Sprintf(form, "events.jsonl"), 0o644); !errors.Is(err, ErrLink) {
				if err == nil {
					f.Close()
				}
				t.Errorf("Create through a planted link: %v, want %v", err, ErrLink)
			}
			if b, _ := os.ReadFile(a.victim); string(b) != "host content" {
				t.Fatalf("the host file was truncated: %q", b)
			}
			if f, err := g.Open(fmt.Sprintf(form, "screenshot.png")); !errors.Is(err, ErrLink) {
				if err == nil {
					f.Close()
				}
				t.Errorf("Open through a planted link: %v, want %v", err, ErrLink)
			}
			// What is really in the workspace stays readable by any name.
			f, err := g.Open(fmt.Sprintf(form, "real.png"))
			if err != nil {
				t.Fatalf("a regular file in the workspace: %v", err)
			}
			f.Close()
		})
	}
}

func TestCallersOwnLinksAreFollowed(t *testing.T) {
	a := aliasFixture(t)
	g := Guard{Untrusted: []string{a.ws}}
	own := filepath.Join(filepath.Dir(a.ws), "own-link")
	must(t, os.Symlink("victim.txt", own)) // relative, outside the workspace
	if b, err := g.ReadFile(own, 100); err != nil || string(b) != "host content" {
		t.Errorf("a link of the caller's outside the workspace: %q, %v", b, err)
	}
	f, err := g.Create(filepath.Join(filepath.Dir(a.ws), "events.jsonl"), 0o644)
	if err != nil {
		t.Fatalf("Create outside the workspace: %v", err)
	}
	f.Close()
	// A device outside the workspace may be written (the caller's choice),
	// never read.
	if f, err := g.Create("/dev/null", 0o644); err != nil {
		t.Errorf("Create /dev/null: %v", err)
	} else {
		f.Close()
	}
}

// Reads are of regular files only and bounded, wherever the file is: a
// device or a FIFO would block or never end, a sparse file would fill the
// disk it is copied to.
func TestReadsAreRegularAndBounded(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	must(t, os.Mkdir(ws, 0o755))
	g := Guard{Untrusted: []string{ws}}
	fifo := filepath.Join(base, "fifo") // outside the workspace
	must(t, syscall.Mkfifo(fifo, 0o600))
	sparse := filepath.Join(ws, "huge.jsonl")
	must(t, os.WriteFile(sparse, nil, 0o600))
	must(t, os.Truncate(sparse, 64<<20)) // small enough that a missing bound does no harm
	tests := []struct {
		name string
		path string
		want error
	}{
		{"zero device", "/dev/zero", ErrNotRegular},
		{"fifo outside", fifo, ErrNotRegular},
		{"fifo through /dev/fd", "/dev/stdin", nil}, // whatever stdin is: must not block
		{"sparse file over the limit", sparse, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := g.ReadFile(tt.path, 1<<20)
				done <- err
			}()
			select {
			case err := <-done:
				if tt.want != nil && !errors.Is(err, tt.want) {
					t.Errorf("ReadFile %s: %v, want %v", tt.path, err, tt.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("ReadFile %s hangs", tt.path)
			}
		})
	}
	dst := filepath.Join(base, "copy.jsonl")
	if err := g.Copy(dst, sparse, 1<<20, 0o600); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Copy of a sparse file over the limit: %v", err)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Errorf("a partial copy was left")
	}
}

func TestMkdirAllDoesNotCreateThroughLinks(t *testing.T) {
	ws, secret := fixture(t)
	g := Guard{Untrusted: []string{ws}}
	if err := g.MkdirAll(filepath.Join(ws, "linkdir", "claude-code"), 0o700); !errors.Is(err, ErrLink) {
		t.Errorf("MkdirAll through a planted link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(secret), "claude-code")); err == nil {
		t.Errorf("a directory appeared outside the workspace")
	}
	if err := g.MkdirAll(filepath.Join(ws, "a", "b"), 0o700); err != nil {
		t.Errorf("MkdirAll in the workspace: %v", err)
	}
	if st, err := os.Stat(filepath.Join(ws, "a", "b")); err != nil || !st.IsDir() {
		t.Errorf("not made: %v", err)
	}
}

// TestOthersUntrustedFollowsOnlyRootsLinks: with OthersUntrusted, a link
// in a directory another user owns (a home whose owner linked ~/.config
// to /etc) or anyone may write is not followed; a link in a directory only
// root can change is (/var/run -> /run). Parent returns the directory the
// final name is in, for the caller to create it there.
func TestOthersUntrustedFollowsOnlyRootsLinks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root; CI runs the suite as root")
	}
	base, err := os.MkdirTemp("/var/lib", "safefile-test-") // below directories only root can change
	must(t, err)
	defer os.RemoveAll(base)
	must(t, os.Chmod(base, 0o755))
	sys := filepath.Join(base, "etc")
	home := filepath.Join(base, "alice")
	must(t, os.Mkdir(sys, 0o755))
	must(t, os.Mkdir(home, 0o755))
	must(t, os.Symlink(sys, filepath.Join(home, ".config")))
	must(t, os.Lchown(filepath.Join(home, ".config"), 4242, 4242))
	must(t, os.Chown(home, 4242, 4242))
	must(t, os.Symlink("etc", filepath.Join(base, "run"))) // root's own link
	shared := filepath.Join(base, "shared")
	must(t, os.Mkdir(shared, 0o777))
	must(t, os.Chmod(shared, 0o1777))
	must(t, os.Symlink(sys, filepath.Join(shared, "l")))

	g := Guard{OthersUntrusted: true}
	for _, p := range []string{filepath.Join(home, ".config", "gh"), filepath.Join(shared, "l", "x")} {
		if d, name, err := g.Parent(p); !errors.Is(err, ErrLink) {
			t.Errorf("Parent(%s) = %v %q %v; want ErrLink", p, d, name, err)
			if d != nil {
				d.Close()
			}
		}
	}
	d, name, err := g.Parent(filepath.Join(base, "run", "gh"))
	if err != nil || name != "gh" {
		t.Fatalf("root's own link: %v %q", err, name)
	}
	defer d.Close()
	var st, want unix.Stat_t
	must(t, unix.Fstat(int(d.Fd()), &st))
	must(t, unix.Stat(sys, &want))
	if st.Ino != want.Ino || st.Dev != want.Dev {
		t.Errorf("Parent through root's link is not the directory it names")
	}
	if _, _, err := g.Parent(filepath.Join(home, "missing", "gh")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing directory: %v", err)
	}
	// Without OthersUntrusted the caller's view is unchanged: links
	// outside Untrusted are followed.
	if d, _, err := (Guard{}).Parent(filepath.Join(home, ".config", "gh")); err != nil {
		t.Errorf("without OthersUntrusted: %v", err)
	} else {
		d.Close()
	}
}
