package claudecode

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/internal/safefile"
)

// claude-code keeps each session as CLAUDE_CONFIG_DIR/projects/<cwd with
// every character that is not a letter or digit turned into '-'>/<id>.jsonl
// (seen in 2.1.328). The adapter points CLAUDE_CONFIG_DIR into the run's
// state directory, so the transcript is found there after the run and put
// back there for --resume.

func projectDir(spec adapters.LaunchSpec) string {
	name := strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, spec.Cwd)
	return filepath.Join(spec.StateDir, "claude", "projects", name)
}

// errSessionID refuses an id that is no plain id (see adapters.ValidSessionID).
func errSessionID(id string) error {
	return fmt.Errorf("the session id %q is not a plain id (letters, digits, - and _)", id)
}

// SaveSession copies the transcript of session id to file. The state
// directory is the agent's, and so is the id (it comes from the CLI's
// output): only a plain id is used, the candidates are files directly in a
// project folder of the state directory, read without following links (the
// transcript could point at a host file) and only when regular and within
// adapters.MaxSessionBytes, and written beside file first.
func (a *Adapter) SaveSession(spec adapters.LaunchSpec, id, file string) (bool, error) {
	if !adapters.ValidSessionID(id) {
		return false, errSessionID(id)
	}
	files := spec.Files()
	candidates := []string{filepath.Join(projectDir(spec), id+".jsonl")}
	// Should claude-code name the folder differently (very long paths are
	// shortened), any project folder may hold it.
	projects := filepath.Join(spec.StateDir, "claude", "projects")
	entries, err := files.ReadDir(projects)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	for _, e := range entries {
		if e.IsDir() {
			candidates = append(candidates, filepath.Join(projects, e.Name(), id+".jsonl"))
		}
	}
	for _, src := range candidates {
		in, err := files.Open(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		defer in.Close()
		if st, err := in.Stat(); err == nil && st.Size() > adapters.MaxSessionBytes {
			return false, fmt.Errorf("%s: %w", src, safefile.ErrTooLarge)
		}
		return true, files.WriteFile(file, safefile.LimitReader(in, adapters.MaxSessionBytes), 0o600)
	}
	return false, nil
}

// RestoreSession puts a saved transcript where claude-code --resume looks.
func (a *Adapter) RestoreSession(spec adapters.LaunchSpec, file string) error {
	id := strings.TrimSuffix(filepath.Base(file), ".jsonl")
	if !adapters.ValidSessionID(id) {
		return errSessionID(id)
	}
	err := spec.Files().Copy(filepath.Join(projectDir(spec), id+".jsonl"), file, adapters.MaxSessionBytes, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no session file %s", file)
	}
	return err
}
