package claudecode

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/internal/safefile"
)

// sessionFixture is a run's state directory after the agent wrote its
// transcript, a session directory inside the workspace, and a host secret.
func sessionFixture(t *testing.T) (spec adapters.LaunchSpec, sessions, secret string) {
	t.Helper()
	base := t.TempDir()
	spec = adapters.LaunchSpec{Cwd: filepath.Join(base, "ws"), StateDir: filepath.Join(base, "state")}
	sessions = filepath.Join(spec.Cwd, ".sessions")
	secret = filepath.Join(base, "id_rsa")
	for _, d := range []string{projectDir(spec), sessions} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(secret, []byte("PRIVATE KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	return spec, sessions, secret
}

func TestSaveSessionCopiesTheTranscript(t *testing.T) {
	spec, sessions, _ := sessionFixture(t)
	if err := os.WriteFile(filepath.Join(projectDir(spec), "abc.jsonl"), []byte("transcript\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(sessions, "claude-code", "abc.jsonl")
	a := &Adapter{}
	if ok, err := a.SaveSession(spec, "abc", dst); !ok || err != nil {
		t.Fatalf("SaveSession = %v, %v", ok, err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "transcript\n" {
		t.Errorf("saved %q", b)
	}
	// Restored into a new run's state directory.
	spec2 := spec
	spec2.StateDir = filepath.Join(filepath.Dir(spec.StateDir), "state2")
	if err := os.Mkdir(spec2.StateDir, 0o700); err != nil {
		t.Fatal(err)
	} // the runner makes it
	if err := a.RestoreSession(spec2, dst); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(projectDir(spec2), "abc.jsonl")); string(b) != "transcript\n" {
		t.Errorf("restored %q", b)
	}
	if ok, err := a.SaveSession(spec, "missing", dst); ok || err != nil {
		t.Errorf("no transcript: %v, %v", ok, err)
	}
}

// The agent replaces its transcript with a link to a host file, or plants
// a link where the saved session will be written, or replaces a saved
// session with a link before a resume: nothing of the host may move.
func TestSessionStoreFollowsNoPlantedLink(t *testing.T) {
	a := &Adapter{}
	t.Run("transcript is a link", func(t *testing.T) {
		spec, sessions, secret := sessionFixture(t)
		if err := os.Symlink(secret, filepath.Join(projectDir(spec), "abc.jsonl")); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(sessions, "claude-code", "abc.jsonl")
		if _, err := a.SaveSession(spec, "abc", dst); !errors.Is(err, safefile.ErrLink) {
			t.Errorf("SaveSession of a linked transcript: %v", err)
		}
		if b, err := os.ReadFile(dst); err == nil && strings.Contains(string(b), "PRIVATE") {
			t.Errorf("the host secret was copied into the session")
		}
	})
	t.Run("project folder is a link", func(t *testing.T) {
		spec, sessions, secret := sessionFixture(t)
		// A host directory holding a file of the transcript's name.
		hostDir := filepath.Join(filepath.Dir(secret), "host")
		if err := os.MkdirAll(filepath.Join(hostDir, "p"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(hostDir, "p", "abc.jsonl"), []byte("PRIVATE KEY"), 0o600); err != nil {
			t.Fatal(err)
		}
		projects := filepath.Dir(projectDir(spec))
		os.RemoveAll(projects)
		if err := os.Symlink(hostDir, projects); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(sessions, "x.jsonl")
		if _, err := a.SaveSession(spec, "abc", dst); !errors.Is(err, safefile.ErrLink) {
			t.Errorf("SaveSession through a linked folder: %v", err)
		}
		if _, err := os.Stat(dst); err == nil {
			t.Errorf("a session was saved through a linked folder")
		}
	})
	t.Run("temporary file planted", func(t *testing.T) {
		spec, sessions, secret := sessionFixture(t)
		if err := os.WriteFile(filepath.Join(projectDir(spec), "abc.jsonl"), []byte("agent text"), 0o600); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(sessions, "claude-code", "abc.jsonl")
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, dst+".tmp"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, dst); err != nil {
			t.Fatal(err)
		}
		if ok, err := a.SaveSession(spec, "abc", dst); !ok || err != nil {
			t.Fatalf("SaveSession = %v, %v", ok, err)
		}
		if b, _ := os.ReadFile(secret); string(b) != "PRIVATE KEY" {
			t.Errorf("the host file was overwritten with %q", b)
		}
	})
	t.Run("saved session replaced by a link before resume", func(t *testing.T) {
		spec, sessions, secret := sessionFixture(t)
		saved := filepath.Join(sessions, "claude-code", "abc.jsonl")
		if err := os.MkdirAll(filepath.Dir(saved), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, saved); err != nil {
			t.Fatal(err)
		}
		if err := a.RestoreSession(spec, saved); !errors.Is(err, safefile.ErrLink) {
			t.Errorf("RestoreSession of a linked session: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(projectDir(spec), "abc.jsonl")); err == nil {
			t.Errorf("a linked file reached the agent's state: %q", b)
		}
	})
}

// The session id comes from the CLI's output, which a tool of the agent can
// write into: an id that is a path (with the link the agent planted at its
// end) would copy any file the runner can read, its own environment with
// the real credential included, into --session-dir, and --resume would hand
// it to the next agent.
func TestSessionIDsThatAreNoPlainIDsAreRefused(t *testing.T) {
	spec, sessions, secret := sessionFixture(t)
	// The attack of the review: a link in the workspace, named by an id
	// that climbs out of the state directory and back in through /proc.
	if err := os.Symlink(secret, filepath.Join(spec.Cwd, "env.jsonl")); err != nil {
		t.Fatal(err)
	}
	a := &Adapter{}
	for _, id := range []string{
		"../../../../../../../../proc/self/root" + spec.Cwd + "/env",
		"../../../../" + strings.TrimSuffix(secret, "/id_rsa") + "/id_rsa",
		"..", "a/b", "", "-rf", ".hidden", "id\n", "x" + strings.Repeat("y", 128),
	} {
		dst := filepath.Join(sessions, "claude-code", "out.jsonl")
		ok, err := a.SaveSession(spec, id, dst)
		if ok || err == nil || !strings.Contains(err.Error(), "not a plain id") {
			t.Errorf("SaveSession(%q) = %v, %v; want a refusal", id, ok, err)
		}
		if b, err := os.ReadFile(dst); err == nil {
			t.Errorf("SaveSession(%q) saved %q", id, b)
		}
	}
	// A saved session whose file name is no id is not restored.
	bad := filepath.Join(sessions, "claude-code", "a b.jsonl")
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.RestoreSession(spec, bad); err == nil || !strings.Contains(err.Error(), "not a plain id") {
		t.Errorf("RestoreSession of %s: %v", bad, err)
	}
	// The real ids pass.
	for _, id := range []string{"3b6cb412-5e0e-4628-9575-877bdda698c8", "01a22825-e595-736d-ae17-8e0657ef683d", "abc_1"} {
		if !adapters.ValidSessionID(id) {
			t.Errorf("%q is a real id", id)
		}
	}
}

// A transcript that is a FIFO, or a sparse file over the limit, neither
// blocks the runner nor fills the session directory.
func TestSessionFilesAreRegularAndBounded(t *testing.T) {
	a := &Adapter{}
	t.Run("fifo", func(t *testing.T) {
		spec, sessions, _ := sessionFixture(t)
		if err := syscall.Mkfifo(filepath.Join(projectDir(spec), "abc.jsonl"), 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := a.SaveSession(spec, "abc", filepath.Join(sessions, "abc.jsonl"))
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, safefile.ErrNotRegular) {
				t.Errorf("SaveSession of a FIFO: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("SaveSession of a FIFO blocks")
		}
	})
	t.Run("sparse", func(t *testing.T) {
		spec, sessions, _ := sessionFixture(t)
		src := filepath.Join(projectDir(spec), "abc.jsonl")
		if err := os.WriteFile(src, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(src, adapters.MaxSessionBytes+1); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(sessions, "abc.jsonl")
		if _, err := a.SaveSession(spec, "abc", dst); !errors.Is(err, safefile.ErrTooLarge) {
			t.Errorf("SaveSession of a sparse file over the limit: %v", err)
		}
		if _, err := os.Stat(dst); err == nil {
			t.Errorf("something was saved")
		}
	})
}
