package claudecode

import (
	"errors"
	"fmt"
	"io"
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

// SaveSession copies the transcript of session id to file.
func (a *Adapter) SaveSession(spec adapters.LaunchSpec, id, file string) (bool, error) {
	src := filepath.Join(projectDir(spec), id+".jsonl")
	if _, err := os.Stat(src); err != nil {
		// Fall back to any project folder, should claude-code name the
		// folder differently (very long paths are shortened).
		matches, _ := filepath.Glob(filepath.Join(spec.StateDir, "claude", "projects", "*", id+".jsonl"))
		if len(matches) == 0 {
			return false, nil
		}
		src = matches[0]
	}
	if err := copyFile(src, file); err != nil {
		return false, err
	}
	return true, nil
}

// RestoreSession puts a saved transcript where claude-code --resume looks.
func (a *Adapter) RestoreSession(spec adapters.LaunchSpec, file string) error {
	id := strings.TrimSuffix(filepath.Base(file), ".jsonl")
	return copyFile(file, filepath.Join(projectDir(spec), id+".jsonl"))
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no session file %s", src)
		}
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
