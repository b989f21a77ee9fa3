package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

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
//   - every submodule path that a protected repository's index lists (its
//     gitlinks, see gitindex.go): `git status` enters a submodule that has
//     a .git, so one that has none (a clone without --recursive) gets an
//     empty read-only .git directory for the run, which git takes for no
//     repository, and the agent cannot make one there;
//   - when the workspace has no .git of its own but lies inside a
//     repository (a subdirectory of a checkout), an empty read-only
//     directory at its .git: git passes over a .git that is no repository,
//     and the agent cannot create one there that git would use for
//     `git status` in the workspace. A workspace in no repository gets
//     none: a .git the agent creates there is a repository of its own,
//     which nobody expects to be the user's (and an empty .git would make
//     tools that look for one, such as `go build`'s VCS stamping, fail);
//   - what the repositories' configs name in the workspace (an included
//     config, the hooks directory: see gitconfig.go), and each bare
//     repository found (see gitleft.go).
//
// A read-only mount does not stop the agent from renaming the directory
// above it: the mount moves along, and the agent makes a repository of its
// own at the old name. The kernel refuses to rename or remove a mount
// point, so every directory from the workspace down to what is protected
// is bound over itself too (in the sandbox only): none of them can be
// moved or removed during the run.
//
// Everything is read below the workspace's open descriptor, without
// following links (see Workspace), and what is mounted must still be what
// was found, by device and inode.
//
// The search does not enter node_modules (npm keeps no .git, and its trees
// are the largest in a workspace) nor a .git, and stops after
// MaxGitSearchDirs directories (breadth first, so the repositories nearest
// the top are found first); what `git status` at the top enters (the
// workspace's repository and its submodules) comes before the rest. A .git
// the agent creates below the top of the workspace during the run, outside
// the submodule paths, is not covered: git uses it only when run in that
// directory or below.

// MaxGitSearchDirs bounds the search for repositories: a large monorepo has
// some ten thousand directories outside node_modules, and reading them takes
// well under a second.
const MaxGitSearchDirs = 20000

// MaxGitMounts bounds what is mounted to protect the repositories (what is
// read-only and the directories on its way): bubblewrap reads the whole
// mount table for each mount, so the time grows with the square of their
// number: a thousand take about a second and a half.
const MaxGitMounts = 1000

// maxGitFile bounds a .git, commondir or config file read for what it names.
const maxGitFile = 1 << 20

// maxGitIndexTotal bounds the bytes of all the indexes read at one start.
const maxGitIndexTotal = 1 << 30

// GitSearchNote is the [note] of a workspace too large to search for
// repositories in full (without node_modules).
var GitSearchNote = fmt.Sprintf("the search for repositories in the working directory stopped after %d directories: a .git deeper in it is not read-only for the agent", MaxGitSearchDirs)

// GitProtection is what of a workspace's repositories is bound read-only.
type GitProtection struct {
	// Paths are relative to the workspace, nearest the top first, without
	// one inside another.
	Paths []string
	// Placeholders are the paths of Paths where an empty directory (an
	// empty file for an included config) is made for the run and removed
	// after it (MakeGitPlaceholders): the .git of a workspace that lies in
	// a repository without one of its own, of each submodule path that
	// has none, and what a config names that does not exist yet. The
	// directories on their way that do not exist are made too.
	Placeholders []string
	// Notes say what could not be protected (the [note] lines).
	Notes []string
	// ids are the identities, at the search, of Paths and of the
	// directories on their way (relative paths).
	ids map[string]fileID
	// pinned are directories bound over themselves only (writable as
	// ever), so that they cannot be moved: those above a placeholder this
	// user could not make. The agent cannot make it there either, but it
	// could rename the directory and make its own at the old name.
	pinned []string
	// files are the Placeholders that are empty files rather than
	// directories: an included config git must find readable.
	files map[string]bool
	// found are the repositories' git directories and .git files found
	// at the start, protected or not (relative paths), with their
	// fingerprint: LeftRepositories tells the new and the changed ones.
	found map[string]string
}

// chain is the directories strictly between the workspace and each of
// paths (relative), each once, outermost first: what is bound over itself
// so that nothing protected can be moved away.
func chain(paths []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		for d := filepath.Dir(p); d != "." && !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		if n, m := strings.Count(a, "/"), strings.Count(b, "/"); n != m {
			return n - m
		}
		return strings.Compare(a, b)
	})
	return out
}

// pinnedDirs are the directories bound over themselves, writable, so that
// nothing protected can be moved away: those on the way to what is
// read-only (chain) and the pinned ones, outermost first.
func (g GitProtection) pinnedDirs() []string {
	out := chain(g.Paths)
	for _, d := range g.pinned {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	return out
}

// ProtectGit finds what of the repositories in the workspace ws is to be
// read-only; an error says why the workspace cannot be protected.
func ProtectGit(ws *Workspace) (GitProtection, error) {
	return findGit(ws, MaxGitSearchDirs, MaxGitMounts)
}

func findGit(ws *Workspace, maxDirs, maxMounts int) (GitProtection, error) {
	g := &gitSearch{ws: ws, root: ws.Path, files: safefile.Guard{Untrusted: []string{ws.Path, ws.ProcPath()}},
		ids: map[string]fileID{}, chained: map[string]bool{}, read: map[string]bool{}, found: map[string]string{}, maxMounts: maxMounts}
	if err := g.top(); err != nil {
		return GitProtection{}, err
	}
	if err := g.gitlinks(); err != nil {
		return GitProtection{}, err
	}
	if err := g.search(maxDirs); err != nil {
		return GitProtection{}, err
	}
	if err := g.configPaths(); err != nil {
		return GitProtection{}, err
	}
	if err := g.checkLinks(); err != nil {
		return GitProtection{}, err
	}
	out := GitProtection{Notes: g.notes, ids: map[string]fileID{}, found: map[string]string{}, files: map[string]bool{}}
	for p, fp := range g.found {
		out.found[g.rel(p)] = fp
	}
	for _, p := range g.paths {
		rel := g.rel(p)
		out.Paths = append(out.Paths, rel)
		if slices.Contains(g.placeholders, p) {
			out.Placeholders = append(out.Placeholders, rel)
			if g.fileHolders[p] {
				out.files[rel] = true
			}
		}
	}
	for _, rel := range append(chain(out.Paths), out.Paths...) {
		if id, ok := g.ids[filepath.Join(g.root, rel)]; ok {
			out.ids[rel] = id
		}
	}
	return out, nil
}

type gitSearch struct {
	ws    *Workspace
	root  string         // ws.Path
	files safefile.Guard // for what lies outside the workspace
	paths []string       // absolute, outermost only
	// placeholders are the paths to make for the run (absolute), and
	// those of them to make as empty files.
	placeholders []string
	fileHolders  map[string]bool
	ids          map[string]fileID // absolute path → identity at the search
	chained      map[string]bool   // the directories on the way to paths
	repos        []gitRepo         // whose gitlinks are still to read
	read         map[string]bool   // the worktrees whose gitlinks were read
	gitDirs      []string          // the git directories found (absolute), for checkLinks
	configRepos  []gitRepo         // whose configs are read for the paths they name
	hookDirs     []string          // core.hooksPath directories in the workspace, for checkLinks
	found        map[string]string // every .git and bare repository seen (absolute): its fingerprint
	indexBytes   int64             // read so far
	notes        []string
	maxMounts    int
	full         bool // maxMounts reached: a note says so once
}

// gitRepo is a repository whose index is to be read for its gitlinks.
type gitRepo struct {
	worktree string // absolute: the gitlinks are relative to it
	gitDir   string // absolute; may lie outside the workspace
}

func (g *gitSearch) rel(p string) string {
	rel, _ := filepath.Rel(g.root, p)
	return rel
}

func (g *gitSearch) inside(p string) bool { return within(p, g.root) }

// lstat is the type and identity of p inside the workspace, without
// following links; a link on its way is a *LinkError.
func (g *gitSearch) lstat(p string) (fileID, uint32, error) {
	fd, err := openBeneath(g.ws.fd(), g.rel(p), unix.O_PATH)
	if err != nil {
		return fileID{}, 0, err
	}
	defer unix.Close(fd)
	return statFD(fd)
}

// readlink is the target of the link p inside the workspace.
func (g *gitSearch) readlink(p string) (string, error) {
	dir, err := openBeneath(g.ws.fd(), g.rel(filepath.Dir(p)), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return "", err
	}
	defer unix.Close(dir)
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir, filepath.Base(p), buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// top protects the workspace's own repository: its .git, or, when it lies
// in a repository without one, a placeholder (and that repository's
// submodules inside the workspace).
func (g *gitSearch) top() error {
	dotGit := filepath.Join(g.root, ".git")
	_, typ, err := g.lstat(dotGit)
	switch {
	case err == nil && typ == unix.S_IFLNK:
		target, _ := g.readlink(dotGit)
		return fmt.Errorf("%s is a symbolic link (to %s), which the agent could replace with a repository of its own: "+
			"make it the real directory or file, or pass --writable-git", dotGit, target)
	case err == nil:
		return g.dotGit(dotGit, typ)
	case !errors.Is(err, unix.ENOENT):
		return nil // unreadable to the caller, and so to the agent
	}
	outer, ok := enclosingRepo(filepath.Dir(g.root), g.files)
	if !ok {
		return nil
	}
	g.placeholder(dotGit)
	if outer.gitDir != "" {
		g.repos = append(g.repos, outer)
	}
	return nil
}

// search walks the workspace breadth first for the other repositories.
func (g *gitSearch) search(maxDirs int) error {
	complete, err := g.walk(maxDirs, func(string) bool { return true }, func(dir string, entries []os.DirEntry, err error) (bool, error) {
		if err != nil {
			return false, nil // unreadable to the caller (and so to the agent), or changed meanwhile
		}
		if g.bareRepository(dir, entries) {
			if dir == g.root {
				return false, fmt.Errorf("%s is a bare git repository (HEAD, objects and refs at its top): its config and hooks would be the agent's to write, "+
					"and git run there reads them; work in a checkout of it, or pass --writable-git", g.root)
			}
			g.found[dir] = g.fingerprint(dir)
			if g.add(dir) {
				g.gitDirs = append(g.gitDirs, dir)
				g.configRepos = append(g.configRepos, gitRepo{gitDir: dir})
			}
			return false, nil // read-only as a whole
		}
		for _, e := range entries {
			if e.Name() != ".git" || dir == g.root {
				continue // the top's: top did it
			}
			p := filepath.Join(dir, e.Name())
			if g.has(p) {
				continue
			}
			if err := g.dotGit(p, uint32(unixType(e.Type()))); err != nil {
				return false, err
			}
			if err := g.gitlinks(); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	if !complete {
		g.notes = append(g.notes, GitSearchNote)
	}
	return err
}

// walk visits the workspace's directories breadth first, at most maxDirs
// of them, reading each without following links: visit gets its entries
// (or why it could not be read) and says whether to go below it, into
// each subdirectory that enter allows (never a .git or a node_modules).
// complete is false when it stopped at maxDirs; an error of visit stops it.
func (g *gitSearch) walk(maxDirs int, enter func(p string) bool, visit func(dir string, entries []os.DirEntry, err error) (bool, error)) (complete bool, err error) {
	queue := []string{g.root}
	for dirs := 0; len(queue) > 0; dirs++ {
		if dirs == maxDirs {
			return false, nil
		}
		dir := queue[0]
		queue = queue[1:]
		entries, rerr := g.readDirUnsorted(dir)
		below, err := visit(dir, entries, rerr)
		if err != nil {
			return true, err
		}
		if !below {
			continue
		}
		// In name order, so that the search's order does not depend on
		// the directory's.
		var subdirs []string
		for _, e := range entries {
			if e.IsDir() && e.Name() != ".git" && e.Name() != "node_modules" {
				subdirs = append(subdirs, e.Name())
			}
		}
		slices.Sort(subdirs)
		for _, name := range subdirs {
			if p := filepath.Join(dir, name); enter(p) {
				queue = append(queue, p)
			}
		}
	}
	return true, nil
}

// unixType is the S_IF type of a directory entry's type.
func unixType(t fs.FileMode) int {
	switch {
	case t.IsDir():
		return unix.S_IFDIR
	case t.IsRegular():
		return unix.S_IFREG
	case t&fs.ModeSymlink != 0:
		return unix.S_IFLNK
	}
	return 0
}

// readDir lists a directory of the workspace, sorted, reached without
// following links.
func (g *gitSearch) readDir(dir string) ([]os.DirEntry, error) {
	entries, err := g.readDirUnsorted(dir)
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

// readDirUnsorted is readDir in the directory's own order.
func (g *gitSearch) readDirUnsorted(dir string) ([]os.DirEntry, error) {
	fd, err := openBeneath(g.ws.fd(), g.rel(dir), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	// Named by /proc so that an entry of unknown type is looked up there.
	f := os.NewFile(uintptr(fd), fmt.Sprintf("/proc/self/fd/%d", fd))
	defer f.Close()
	return f.ReadDir(-1)
}

// fingerprint tells what is at p (in the workspace) apart from what the
// agent could put there instead: a link by where it points (a .git link
// below the top is not read-only, and the agent may point it at a
// repository of its own); anything else is protected, or new.
func (g *gitSearch) fingerprint(p string) string {
	if target, err := g.readlink(p); err == nil {
		return "link:" + target
	}
	return "there"
}

// dotGit protects the .git at p (inside the workspace) of the given type,
// and queues its repository for its gitlinks.
func (g *gitSearch) dotGit(p string, typ uint32) error {
	g.found[p] = g.fingerprint(p)
	worktree := filepath.Dir(p)
	switch typ {
	case unix.S_IFDIR:
		if !g.add(p) {
			return nil
		}
		g.repos = append(g.repos, gitRepo{worktree: worktree, gitDir: p})
		_, err := g.commondir(p)
		return err
	case unix.S_IFREG:
		if !g.add(p) {
			return nil
		}
		target, ok := g.pointer(p, "gitdir: ")
		if !ok {
			return nil // not a gitfile: git refuses it
		}
		gitDir, err := g.gitDir(p, target)
		if gitDir != "" {
			g.repos = append(g.repos, gitRepo{worktree: worktree, gitDir: gitDir})
		}
		return err
	case unix.S_IFLNK:
		// Deeper than the top (that one was refused): whatever it points
		// to inside the workspace is protected; the link itself can be
		// replaced, like a .git the agent creates there.
		target, err := g.readlink(p)
		if err != nil {
			return nil
		}
		gitDir, err := g.gitDir(p, target)
		if gitDir != "" {
			g.repos = append(g.repos, gitRepo{worktree: worktree, gitDir: gitDir})
		}
		return err
	}
	return nil
}

// gitDir protects the git directory target that the file at from names
// (relative to from's directory), when it lies inside the workspace, and
// returns where it is ("" when nowhere).
func (g *gitSearch) gitDir(from, target string) (string, error) {
	// Outside the workspace it is read-only with the rest, unless links
	// lead back into it.
	target, viaLink, ok := g.resolve(rawJoin(filepath.Dir(from), target))
	switch {
	case !ok || !g.inside(target):
		return target, nil // or unresolvable: git fails
	case viaLink:
		return "", fmt.Errorf("%s points to %s inside the workspace through a symbolic link, which the agent could change; "+
			"make %s name the real path, or pass --writable-git", from, target, from)
	}
	_, typ, err := g.lstat(target)
	var link *LinkError
	switch {
	case errors.As(err, &link) || err == nil && typ == unix.S_IFLNK:
		// The agent could point the link elsewhere during the run.
		return "", fmt.Errorf("%s points to %s inside the workspace through a symbolic link, which the agent could change; "+
			"make %s name the real path, or pass --writable-git", from, target, from)
	case err != nil:
		return "", fmt.Errorf("%s points to %s inside the workspace, which does not exist: the agent could create it as a repository of its own; "+
			"fix or remove %s, or pass --writable-git", from, target, from)
	case g.has(target):
		return target, nil
	}
	// Whatever it is: a file the agent could replace with a directory.
	g.add(target)
	if typ == unix.S_IFDIR {
		_, err := g.commondir(target)
		return target, err
	}
	return "", nil
}

// resolve is where the absolute path p really is, as the kernel finds it:
// its links followed one component at a time and each ".." taken from
// where the path really is by then (so p must not be cleaned first: git
// opens "dir/../x" as it stands). Where a component is missing, it is
// where a file made there would be (a dangling link into the workspace
// leads there too). viaLink says a link inside the workspace, outside what
// is read-only, was followed on the way: the agent could point it
// elsewhere, so what it leads to now proves nothing. ok is false past 40
// links or on an error other than a missing component.
func (g *gitSearch) resolve(p string) (real string, viaLink, ok bool) {
	real = "/"
	parts := strings.Split(p, "/")
	for links := 0; len(parts) > 0; {
		c := parts[0]
		parts = parts[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			real = filepath.Dir(real)
			continue
		}
		next := filepath.Join(real, c)
		st, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR):
			return filepath.Join(append([]string{next}, parts...)...), viaLink, true
		case err != nil:
			return "", false, false
		case st.Mode()&fs.ModeSymlink == 0:
			real = next
			continue
		}
		if links++; links > 40 {
			return "", false, false
		}
		viaLink = viaLink || g.inside(next) && !g.has(next)
		target, err := os.Readlink(next)
		if err != nil {
			return "", false, false
		}
		if filepath.IsAbs(target) {
			real = "/"
		}
		parts = append(strings.Split(target, "/"), parts...)
	}
	return real, viaLink, true
}

// rawJoin is rel relative to dir, not cleaned (see resolve).
func rawJoin(dir, rel string) string {
	if filepath.IsAbs(rel) {
		return rel
	}
	return dir + "/" + rel
}

// commondir protects what the commondir file of the git directory dir
// names (a linked worktree's shared repository) and returns it ("" for
// none).
func (g *gitSearch) commondir(dir string) (string, error) {
	file := filepath.Join(dir, "commondir")
	if target, ok := g.pointer(file, ""); ok {
		common, err := g.gitDir(file, target)
		if common != "" {
			g.gitDirs = append(g.gitDirs, common)
		}
		return common, err
	}
	return "", nil
}

// gitLinked are what git reads or runs in a git directory that a link
// there could lead to a file of the agent's: the read-only mount covers
// the link, not where it leads.
var gitLinked = []string{"config", "config.worktree", "index", "commondir", "hooks", "info", "modules", "worktrees"}

// checkLinks refuses a git directory found whose config, index, hooks (or
// a hook), info, modules or worktrees is a symbolic link that leads into
// the workspace, outside what is read-only: the agent would write the
// config (core.fsmonitor) or a hook through it.
func (g *gitSearch) checkLinks() error {
	seen := map[string]bool{}
	for _, dir := range g.gitDirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		// One listing of the git directory tells which of gitLinked are
		// there and which are links (its entries' types): only a link
		// needs a closer look. One that cannot be listed (searchable, not
		// readable) is checked name by name.
		top, err := g.listDir(dir)
		listed := err == nil
		types := map[string]fs.FileMode{}
		for _, e := range top {
			types[e.Name()] = e.Type()
		}
		for _, name := range gitLinked {
			p := filepath.Join(dir, name)
			typ, there := types[name]
			if listed && !there {
				continue
			}
			if !listed || typ&fs.ModeSymlink != 0 {
				if err := g.checkLink(p); err != nil {
					return err
				}
			}
			if name != "hooks" && name != "info" {
				continue
			}
			if err := g.checkEntries(p, name == "hooks"); err != nil {
				return err
			}
		}
	}
	for _, dir := range g.hookDirs {
		if err := g.checkEntries(dir, true); err != nil {
			return err
		}
	}
	return nil
}

// checkEntries checks the entries of a protected hooks or info directory
// (checkEntry); only a link can lead elsewhere, and the listing says which
// are links.
func (g *gitSearch) checkEntries(dir string, hooks bool) error {
	entries, _ := g.listDir(dir)
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		if err := g.checkEntry(filepath.Join(dir, e.Name()), hooks); err != nil {
			return err
		}
	}
	return nil
}

// checkEntry checks an entry of a protected hooks or info directory. A
// hook that is a link to a script of the workspace (hooks/pre-commit ->
// ../../scripts/pre-commit, a common set-up) makes that script read-only
// too, when it is a regular file reached without links; any other link
// into the workspace is refused (checkLink).
func (g *gitSearch) checkEntry(p string, hook bool) error {
	if target, ok := g.linkTarget(p); ok && hook {
		if real, viaLink, ok := g.resolve(target); ok && !viaLink && g.inside(real) && !g.has(real) {
			if _, typ, err := g.lstat(real); err == nil && typ == unix.S_IFREG {
				g.add(real)
			}
		}
	}
	return g.checkLink(p)
}

// linkTarget is where the link p points, made absolute but not cleaned
// (see resolve); false when p is no link.
func (g *gitSearch) linkTarget(p string) (string, bool) {
	var target string
	var err error
	if g.inside(p) {
		_, typ, lerr := g.lstat(p)
		if lerr != nil || typ != unix.S_IFLNK {
			return "", false
		}
		target, err = g.readlink(p)
	} else {
		if st, lerr := os.Lstat(p); lerr != nil || st.Mode()&fs.ModeSymlink == 0 {
			return "", false
		}
		target, err = os.Readlink(p)
	}
	if err != nil {
		return "", false
	}
	return rawJoin(filepath.Dir(p), target), true
}

// checkLink refuses p when it is a link that leads into the workspace,
// outside what is read-only.
func (g *gitSearch) checkLink(p string) error {
	target, ok := g.linkTarget(p)
	if !ok {
		return nil
	}
	real, viaLink, ok := g.resolve(target)
	if ok && (viaLink || g.inside(real) && !g.has(real)) {
		return fmt.Errorf("%s is a symbolic link to %s inside the workspace, where the agent could change what git reads or runs from it: "+
			"make it a file or directory of its own, or pass --writable-git", p, target)
	}
	return nil
}

// listDir lists a directory, inside the workspace without following
// links; each entry's type is the directory's (lstat where the file
// system does not say).
func (g *gitSearch) listDir(dir string) ([]os.DirEntry, error) {
	if g.inside(dir) {
		return g.readDir(dir)
	}
	return os.ReadDir(dir)
}

// readFile reads a regular file of at most max bytes: inside the
// workspace without following links, outside as the caller's own.
func (g *gitSearch) readFile(p string, max int64) ([]byte, error) {
	f, err := g.open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(safefile.LimitReader(f, max))
}

// open opens the regular file p for reading (see readFile).
func (g *gitSearch) open(p string) (*os.File, error) {
	if !g.inside(p) {
		return g.files.Open(p)
	}
	fd, err := openBeneath(g.ws.fd(), g.rel(p), unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	if _, typ, err := statFD(fd); err != nil || typ != unix.S_IFREG {
		unix.Close(fd)
		return nil, safefile.ErrNotRegular
	}
	return os.NewFile(uintptr(fd), p), nil
}

// pointer reads the path in a .git or commondir file: its first line
// after prefix. Only a regular file, read without following links.
func (g *gitSearch) pointer(file, prefix string) (string, bool) {
	b, err := g.readFile(file, maxGitFile)
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

// gitlinks reads the index of every queued repository and protects the
// submodule paths it lists inside the workspace, queueing the submodules'
// own repositories in turn.
func (g *gitSearch) gitlinks() error {
	for len(g.repos) > 0 {
		r := g.repos[0]
		g.repos = g.repos[1:]
		if g.read[r.worktree] {
			continue
		}
		g.read[r.worktree] = true
		g.gitDirs = append(g.gitDirs, r.gitDir)
		g.configRepos = append(g.configRepos, r)
		idx, err := g.readIndex(r)
		if err != nil {
			g.notes = append(g.notes, fmt.Sprintf("the index of the repository at %q could not be read (%q): a submodule it lists may not be protected from the agent", r.worktree, err))
		} else if idx.incomplete != "" {
			g.notes = append(g.notes, fmt.Sprintf("the index of the repository at %q lists only some submodules: %s, which agentrun does not read; a submodule it does not list is not protected from the agent", r.worktree, idx.incomplete))
		}
		for _, link := range idx.gitlinks {
			if err := g.gitlink(r, link); err != nil {
				return err
			}
		}
	}
	return nil
}

// readIndex reads the gitlinks of r's index; a repository without one has
// none.
func (g *gitSearch) readIndex(r gitRepo) (gitIndex, error) {
	f, err := g.open(filepath.Join(r.gitDir, "index"))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOENT) {
		return gitIndex{}, nil
	}
	if err != nil {
		return gitIndex{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return gitIndex{}, err
	}
	if g.indexBytes += st.Size(); g.indexBytes > maxGitIndexTotal {
		return gitIndex{}, fmt.Errorf("the indexes read at this start exceed %d MiB", maxGitIndexTotal>>20)
	}
	return readGitIndex(f, st.Size(), g.hashLen(r.gitDir))
}

// hashLen is the object name length of the repository whose git directory
// is dir: 32 when its config (the common directory's, read as git reads
// the repository format: without includes) says sha256, else 20.
func (g *gitSearch) hashLen(dir string) int {
	b, err := g.readFile(filepath.Join(g.commonOf(dir), "config"), maxGitFile)
	if err == nil && configValue(b, "extensions", "objectformat") == "sha256" {
		return 32
	}
	return 20
}

// gitlink protects the submodule path link of r's index when it lies in
// the workspace: its .git when it has one (a populated submodule), else a
// placeholder; every directory on its way must be a directory (the agent
// could replace a link or a file with one holding a repository).
func (g *gitSearch) gitlink(r gitRepo, link string) error {
	p := filepath.Join(r.worktree, link)
	for _, c := range strings.Split(link, "/") {
		if strings.EqualFold(c, ".git") {
			return nil // no path git would check out
		}
	}
	if !g.inside(p) || p == g.root || g.has(p) {
		return nil // outside: read-only with the rest; the top: see top
	}
	dotGit := filepath.Join(p, ".git")
	for d := p; d != g.root; d = filepath.Dir(d) {
		_, typ, err := g.lstat(d)
		var l *LinkError
		switch {
		case errors.As(err, &l):
			continue // found nearer the top
		case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
			continue
		case err != nil:
			return nil // unreadable to the caller, and so to the agent
		case typ != unix.S_IFDIR:
			what := "not a directory"
			if typ == unix.S_IFLNK {
				what = "a symbolic link"
			}
			return fmt.Errorf("the submodule path %s (a gitlink in the index of %s) goes through %s, which is %s: the agent could put a repository of its own there, "+
				"which the next git status in %s would enter; restore the submodule's directory (git submodule update --init %s) or pass --writable-git",
				p, r.worktree, d, what, r.worktree, link)
		}
	}
	_, typ, err := g.lstat(dotGit)
	switch {
	case errors.Is(err, unix.ENOENT):
		g.placeholder(dotGit)
		return nil
	case err != nil:
		return nil
	case typ == unix.S_IFDIR || typ == unix.S_IFREG:
		return g.dotGit(dotGit, typ)
	}
	return fmt.Errorf("%s, the .git of a submodule (a gitlink in the index of %s), is neither a directory nor a file, which the agent could replace with a repository of its own; "+
		"make it the real directory or file, or pass --writable-git", dotGit, r.worktree)
}

// placeholder protects p with an empty directory made for the run.
func (g *gitSearch) placeholder(p string) {
	if g.add(p) {
		g.placeholders = append(g.placeholders, p)
	}
}

// placeholderFile protects p with an empty file made for the run: git
// reads a missing include as nothing, an empty file too, but a directory
// as a bad config.
func (g *gitSearch) placeholderFile(p string) {
	if g.add(p) {
		g.placeholders = append(g.placeholders, p)
		if g.fileHolders == nil {
			g.fileHolders = map[string]bool{}
		}
		g.fileHolders[p] = true
	}
}

func (g *gitSearch) has(p string) bool {
	for _, q := range g.paths {
		if within(p, q) {
			return true
		}
	}
	return false
}

// add keeps p (inside the workspace) unless an outer path has it,
// dropping the paths inside it, and records the identities of p and of the
// directories on its way; it reports false when p is already protected or
// MaxGitMounts would be exceeded.
func (g *gitSearch) add(p string) bool {
	if g.has(p) {
		return false
	}
	var ways []string
	for d := filepath.Dir(p); d != g.root && !g.chained[d]; d = filepath.Dir(d) {
		ways = append(ways, d)
	}
	if len(g.paths)+len(g.chained)+len(ways)+1 > g.maxMounts {
		if !g.full {
			g.full = true
			g.notes = append(g.notes, fmt.Sprintf("the working directory holds more repositories than agentrun makes read-only (%d mounts): %q and what comes after it are not read-only for the agent", g.maxMounts, p))
		}
		return false
	}
	for _, d := range ways {
		g.chained[d] = true
		if id, typ, err := g.lstat(d); err == nil && typ == unix.S_IFDIR {
			g.ids[d] = id
		}
	}
	if id, _, err := g.lstat(p); err == nil {
		g.ids[p] = id
	}
	g.paths = slices.DeleteFunc(g.paths, func(q string) bool { return within(q, p) })
	g.paths = append(g.paths, p)
	return true
}

// enclosingRepo is the repository whose worktree holds dir (the nearest
// .git above it, as git's own search finds it), and its git directory
// ("" when it cannot be found); ok is false in no repository.
func enclosingRepo(dir string, files safefile.Guard) (gitRepo, bool) {
	for {
		p := filepath.Join(dir, ".git")
		if st, err := os.Lstat(p); err == nil {
			r := gitRepo{worktree: dir}
			switch {
			case st.IsDir():
				r.gitDir = p
			case st.Mode().IsRegular():
				if b, err := files.ReadFile(p, maxGitFile); err == nil {
					line, _, _ := bytes.Cut(b, []byte("\n"))
					if target, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("gitdir: ")); ok {
						r.gitDir = string(bytes.TrimSpace(target))
						if !filepath.IsAbs(r.gitDir) {
							r.gitDir = filepath.Join(dir, r.gitDir)
						}
					}
				}
			}
			return r, true
		}
		if dir == "/" {
			return gitRepo{}, false
		}
		dir = filepath.Dir(dir)
	}
}

// MakeGitPlaceholders makes the empty directories (and files) of a
// GitProtection's Placeholders (and the directories missing on their way),
// owned like the workspace, and returns what removes them after the run:
// each only while it is the same empty directory (rmdir) or empty file,
// deepest first, so that nothing of the user's is removed. A placeholder
// this user may not make (nor, then, the agent) is dropped from g.Paths,
// and the directories above it are pinned (see GitProtection.pinned).
// An existing one is not taken for a placeholder: the workspace changed
// since the search.
func MakeGitPlaceholders(ws *Workspace, g *GitProtection) (func(), error) {
	type made struct {
		rel  string
		id   fileID
		file bool
	}
	var all []made
	undo := func() {
		for i := len(all) - 1; i >= 0; i-- {
			m := all[i]
			dir, err := openBeneath(ws.fd(), filepath.Dir(m.rel), unix.O_PATH|unix.O_DIRECTORY)
			if err != nil {
				continue
			}
			var st unix.Stat_t
			name := filepath.Base(m.rel)
			if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && (fileID{st.Dev, st.Ino}) == m.id {
				if !m.file {
					_ = unix.Unlinkat(dir, name, unix.AT_REMOVEDIR) // if something was put there, it stays
				} else if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == 0 {
					_ = unix.Unlinkat(dir, name, 0)
				}
			}
			unix.Close(dir)
		}
	}
	if g.ids == nil {
		g.ids = map[string]fileID{}
	}
	var dropped []string
	for _, rel := range g.Placeholders {
		var mine []made
		err := func() error {
			parts := strings.Split(rel, "/")
			for i := range parts {
				sub := strings.Join(parts[:i+1], "/")
				last := i == len(parts)-1
				dir, err := openBeneath(ws.fd(), filepath.Dir(sub), unix.O_PATH|unix.O_DIRECTORY)
				if err != nil {
					return err
				}
				file := last && g.files[rel]
				if file {
					var fd int
					if fd, err = unix.Openat(dir, parts[i], unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644); err == nil {
						unix.Close(fd)
					}
				} else {
					err = unix.Mkdirat(dir, parts[i], 0o755)
				}
				if errors.Is(err, unix.EEXIST) && !last {
					unix.Close(dir)
					continue
				}
				if err == nil {
					var st unix.Stat_t
					if err = unix.Fstatat(dir, parts[i], &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
						mine = append(mine, made{sub, fileID{st.Dev, st.Ino}, file})
						if os.Geteuid() == 0 {
							_ = unix.Fchownat(dir, parts[i], ws.UID, ws.GID, unix.AT_SYMLINK_NOFOLLOW)
						}
					}
				}
				unix.Close(dir)
				if err != nil {
					return fmt.Errorf("cannot make the read-only placeholder %s: %w", filepath.Join(ws.Path, sub), err)
				}
			}
			return nil
		}()
		all = append(all, mine...)
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS) {
			// Where this user cannot make it, neither can the agent, who
			// writes as this user or with less; but the agent could move
			// the directory above it away and make one at the old name,
			// so the directories above it stay where they are.
			dropped = append(dropped, rel)
			for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
				fd, oerr := openBeneath(ws.fd(), d, unix.O_PATH|unix.O_DIRECTORY)
				if oerr != nil {
					continue // made for it and removed again, or never there
				}
				if id, _, serr := statFD(fd); serr == nil && !slices.Contains(g.pinned, d) {
					g.pinned = append(g.pinned, d)
					g.ids[d] = id
				}
				unix.Close(fd)
			}
			continue
		}
		if err != nil {
			undo()
			return nil, err
		}
		for _, m := range mine {
			g.ids[m.rel] = m.id
		}
	}
	g.Paths = slices.DeleteFunc(g.Paths, func(p string) bool { return slices.Contains(dropped, p) })
	return undo, nil
}
