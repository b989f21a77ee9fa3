package claudecode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentrun-dev/agentrun/adapters"
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

// SaveSession copies the transcript of session id to file. The state
// directory is the agent's: the transcript is read without following links
// (it could point at a host file), and written beside file first.
func (a *Adapter) SaveSession(spec adapters.LaunchSpec, id, file string) (bool, error) {
	files := spec.Files()
	candidates := []string{filepath.Join(projectDir(spec), id+".jsonl")}
	// Should claude-code name the folder differently (very long paths are
	// shortened), any project folder may hold it.
	projects := filepath.Join(spec.StateDir, "claude", "projects")
	if entries, err := os.ReadDir(projects); err == nil {
		for _, e := range entries {
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
		return true, files.WriteFile(file, in, 0o600)
	}
	return false, nil
}

// RestoreSession puts a saved transcript where claude-code --resume looks.
func (a *Adapter) RestoreSession(spec adapters.LaunchSpec, file string) error {
	files := spec.Files()
	id := strings.TrimSuffix(filepath.Base(file), ".jsonl")
	in, err := files.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no session file %s", file)
	}
	if err != nil {
		return err
	}
	defer in.Close()
	return files.WriteFile(filepath.Join(projectDir(spec), id+".jsonl"), in, 0o600)
}
