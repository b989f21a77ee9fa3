package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A repository needs no .git: git, looking for the repository of the
// directory it runs in, takes a directory that has HEAD, objects and refs
// for a bare repository before it looks further up (unless the user set
// safe.bareRepository=explicit). So any directory of the workspace can
// become a repository whose config (core.fsmonitor) runs on the user's
// next git command there, the top of a workspace that lies in a checkout
// and a submodule's directory included; no mount can prevent it, since
// the agent may write there. A bare repository found at the start is
// protected like a .git (findGit); one the agent leaves is told
// (LeftRepositories), as is a .git made below the top.

// headRef is the start of a HEAD file that git accepts, read widely: a
// symbolic ref ("ref:", maybe blanks, "refs/") or an object name in
// either case.
// Compiled on first use: the init binary links this package too, and
// starts on every run.
var headRef = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)^(ref:\s*refs/|[0-9a-f]{40}|[0-9a-f]{64})`)
})

// bareRepository reports whether dir, with these entries, is a directory
// git would take for a (bare) repository, erring wide as git's own test
// does not: a HEAD that is a link into refs/ or a file as above, and
// objects and refs (of any type: git only needs to reach them), or a
// commondir (which names where they are).
func (g *gitSearch) bareRepository(dir string, entries []os.DirEntry) bool {
	var head os.DirEntry
	objects, refs, common := false, false, false
	for _, e := range entries {
		switch e.Name() {
		case "HEAD":
			head = e
		case "objects":
			objects = true
		case "refs":
			refs = true
		case "commondir":
			common = true
		}
	}
	if head == nil || !(objects && refs || common) {
		return false
	}
	p := filepath.Join(dir, "HEAD")
	if head.Type()&os.ModeSymlink != 0 {
		target, err := g.readlink(p)
		return err == nil && strings.HasPrefix(target, "refs/")
	}
	b, err := g.readFile(p, 256)
	return err == nil && headRef().Match(b)
}

// LeftRepositories lists, relative to the workspace, the repositories
// that were not there at the start (ProtectGit) and are now: a .git (a
// directory, file or link, or a link that points elsewhere than it did) or
// a directory git takes for a bare repository, outside what was read-only. After the run, the agent made them, and git
// run there or below would read their config. Unchecked are the
// directories that could not be read (an agent that runs as the caller
// can take away the caller's access to a directory of its own). The
// search is bounded as ProtectGit's (node_modules skipped); complete is
// false when it stopped early.
func LeftRepositories(ws *Workspace, g GitProtection) (left, unchecked []string, complete bool) {
	s := &gitSearch{ws: ws, root: ws.Path}
	protected := func(p string) bool {
		rel := s.rel(p)
		return slices.ContainsFunc(g.Paths, func(q string) bool { return within(rel, q) })
	}
	isNew := func(p string) bool {
		old, ok := g.found[s.rel(p)]
		return (!ok || old != s.fingerprint(p)) && !protected(p)
	}
	complete, _ = s.walk(MaxGitSearchDirs, func(p string) bool { return !protected(p) }, func(dir string, entries []os.DirEntry, err error) (bool, error) {
		if err != nil {
			if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
				unchecked = append(unchecked, s.rel(dir))
			}
			return false, nil
		}
		if s.bareRepository(dir, entries) && isNew(dir) {
			left = append(left, s.rel(dir)) // and on: a repository may hide inside another
		}
		for _, e := range entries {
			if e.Name() == ".git" && isNew(filepath.Join(dir, e.Name())) {
				left = append(left, s.rel(filepath.Join(dir, e.Name())))
			}
		}
		return true, nil
	})
	return left, unchecked, complete
}
