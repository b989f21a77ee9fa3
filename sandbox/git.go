package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/agentrun-dev/agentrun/internal/safefile"
)

// A repository in the workspace is agent-writable like the rest: a hook, a
// config key (core.fsmonitor, core.sshCommand, a filter) or a redirect
// planted in it runs code on the host's next git command there, as root
// when root runs git. So, unless --writable-git, every repository's git
// directory found in the workspace at start is bound read-only (codex's own
// sandbox makes .git read-only for the same reason):
//
//   - each .git, a directory or a file (a linked worktree's or a
//     submodule's "gitdir: PATH"): a .git file rewritten to point at a
//     directory of the agent's would be as good as a writable .git;
//   - the git directory a .git file points to, and the one a git
//     directory's commondir names, when it lies inside the workspace
//     (outside, everything is read-only anyway); one inside the workspace
//     that does not exist yet is refused, since the agent could create it;
//   - when the workspace has no .git of its own but lies inside a
//     repository (a subdirectory of a checkout), an empty read-only
//     directory at its .git: git passes over a .git that is no repository,
//     and the agent cannot create one there that git would use for
//     `git status` in the workspace. A workspace in no repository gets
//     none: a .git the agent creates there is a repository of its own,
//     which nobody expects to be the user's (and an empty .git would make
//     tools that look for one, such as `go build`'s VCS stamping, fail).
//
// The search does not enter node_modules (npm keeps no .git, and its trees
// are the largest in a workspace) nor a .git, and stops after
// MaxGitSearchDirs directories (breadth first, so the repositories nearest
// the top are found first). A .git the agent creates below the top of the
// workspace during the run is not covered: git uses it only when run in
// that directory or below.

// MaxGitSearchDirs bounds the search for repositories: a large monorepo has
// some ten thousand directories outside node_modules, and reading them takes
// well under a second.
const MaxGitSearchDirs = 20000

// maxGitFile bounds a .git or commondir file read for its path.
const maxGitFile = 4096

// GitProtection is what of a workspace's repositories is bound read-only.
type GitProtection struct {
	// Paths are relative to the workspace, outermost first, without one
	// inside another.
	Paths []string
	// Placeholder is set when the workspace has no .git but lies in a
	// repository: an empty directory is to be made and bound read-only at
	// .git (MakeGitPlaceholder); Paths then holds ".git".
	Placeholder bool
	// Partial is set when the search stopped at MaxGitSearchDirs: a
	// repository deeper in the tree is not protected.
	Partial bool
}

// ProtectGit finds what of the repositories in workspace (absolute,
// resolved) is to be read-only; an error says why the workspace cannot be
// protected.
func ProtectGit(workspace string) (GitProtection, error) {
	return findGit(workspace, MaxGitSearchDirs)
}

func findGit(ws string, maxDirs int) (GitProtection, error) {
	g := &gitSearch{ws: ws, files: safefile.Guard{Untrusted: []string{ws}}}
	root := filepath.Join(ws, ".git")
	if st, err := os.Lstat(root); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(root)
		return GitProtection{}, fmt.Errorf("%s is a symbolic link (to %s), which the agent could replace with a repository of its own: "+
			"make it the real directory or file, or pass --writable-git", root, target)
	}
	queue, dirs := []string{ws}, 0
	var out GitProtection
	for len(queue) > 0 {
		if dirs == maxDirs {
			out.Partial = true
			break
		}
		dir := queue[0]
		queue = queue[1:]
		dirs++
		entries, err := readDir(dir)
		if err != nil {
			continue // unreadable to the caller, and so to the agent
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			switch {
			case e.Name() == ".git":
				if err := g.dotGit(p, e.Type()); err != nil {
					return GitProtection{}, err
				}
			case e.IsDir() && e.Name() != "node_modules":
				queue = append(queue, p)
			}
		}
	}
	if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) && inRepository(filepath.Dir(ws)) {
		out.Placeholder = true
		g.add(root)
	}
	for _, p := range g.paths {
		rel, _ := filepath.Rel(ws, p)
		out.Paths = append(out.Paths, rel)
	}
	return out, nil
}

// readDir lists a directory unsorted, without following links.
func readDir(dir string) ([]os.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

type gitSearch struct {
	ws    string
	files safefile.Guard
	paths []string // absolute, outermost only
}

// dotGit protects the .git at p of the given type.
func (g *gitSearch) dotGit(p string, typ fs.FileMode) error {
	switch {
	case typ.IsDir():
		g.add(p)
		return g.commondir(p)
	case typ.IsRegular():
		g.add(p)
		target, ok := g.pointer(p, "gitdir: ")
		if !ok {
			return nil // not a gitfile: git refuses it
		}
		return g.gitDir(p, target)
	case typ&fs.ModeSymlink != 0:
		// Deeper than the top (that one was refused): whatever it points
		// to inside the workspace is protected; the link itself can be
		// replaced, like a .git the agent creates there.
		target, err := os.Readlink(p)
		if err != nil {
			return nil
		}
		return g.gitDir(p, target)
	}
	return nil
}

// gitDir protects the git directory target that the file at from names
// (relative to from's directory), when it lies inside the workspace.
func (g *gitSearch) gitDir(from, target string) error {
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(from), target)
	}
	target = filepath.Clean(target)
	real, err := filepath.EvalSymlinks(target)
	switch {
	case within(target, g.ws) && err != nil:
		return fmt.Errorf("%s points to %s inside the workspace, which does not exist: the agent could create it as a repository of its own; "+
			"fix or remove %s, or pass --writable-git", from, target, from)
	case within(target, g.ws) && real != target:
		// The agent could point the link elsewhere during the run.
		return fmt.Errorf("%s points to %s inside the workspace through a symbolic link (it is %s now), which the agent could change; "+
			"make %s name the real path, or pass --writable-git", from, target, real, from)
	case err != nil || !within(real, g.ws):
		return nil // outside the workspace, read-only with the rest (or missing: git fails)
	case g.has(real):
		return nil
	}
	// Whatever it is: a file the agent could replace with a directory.
	g.add(real)
	if st, err := os.Stat(real); err == nil && st.IsDir() {
		return g.commondir(real)
	}
	return nil
}

// commondir protects what the commondir file of the git directory dir names
// (a linked worktree's shared repository).
func (g *gitSearch) commondir(dir string) error {
	file := filepath.Join(dir, "commondir")
	if target, ok := g.pointer(file, ""); ok {
		return g.gitDir(file, target)
	}
	return nil
}

// pointer reads the path in a .git or commondir file: its first line
// after prefix. Only a regular file, read without following links.
func (g *gitSearch) pointer(file, prefix string) (string, bool) {
	b, err := g.files.ReadFile(file, maxGitFile)
	if err != nil {
		return "", false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	rest, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte(prefix))
	if !ok || len(bytes.TrimSpace(rest)) == 0 {
		return "", false
	}
	return string(bytes.TrimSpace(rest)), true
}

func (g *gitSearch) has(p string) bool {
	for _, q := range g.paths {
		if within(p, q) {
			return true
		}
	}
	return false
}

// add keeps p unless an outer path has it, dropping the paths inside it.
func (g *gitSearch) add(p string) {
	if g.has(p) {
		return
	}
	g.paths = slices.DeleteFunc(g.paths, func(q string) bool { return within(q, p) })
	g.paths = append(g.paths, p)
}

// inRepository reports whether dir or a directory above it has a .git, as
// git's own search from the workspace would find it.
func inRepository(dir string) bool {
	for {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return true
		}
		if dir == "/" {
			return false
		}
		dir = filepath.Dir(dir)
	}
}

// MakeGitPlaceholder makes the empty directory workspace/.git that a
// GitProtection with Placeholder binds read-only, owned like the workspace,
// and returns what removes it after the run: only while it is the same
// empty directory (rmdir), so that nothing of the user's is removed.
func MakeGitPlaceholder(workspace string) (func(), error) {
	p := filepath.Join(workspace, ".git")
	if err := os.Mkdir(p, 0o755); err != nil {
		return nil, fmt.Errorf("cannot make the read-only placeholder %s: %w", p, err)
	}
	made, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if ws, err := os.Stat(workspace); err == nil && os.Geteuid() == 0 {
		sys := ws.Sys().(*syscall.Stat_t)
		_ = os.Lchown(p, int(sys.Uid), int(sys.Gid))
	}
	return func() {
		if st, err := os.Lstat(p); err == nil && os.SameFile(st, made) {
			_ = os.Remove(p) // rmdir: if something was put there, it stays
		}
	}, nil
}
