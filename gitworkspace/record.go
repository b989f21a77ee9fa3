package gitworkspace

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/agentrun-dev/agentrun/internal/safefile"
)

// Change is what the agent changed, recorded in agentrun's repository.
type Change struct {
	// Base is the commit the run started from; Head the commit that holds
	// the whole change (Base when nothing changed).
	Base, Head string
	// Commits counts the commits from Base to Head: the agent's, and one
	// of agentrun's for what it left uncommitted.
	Commits int
	// FilesChanged, Insertions and Deletions are the diff stat of Base to
	// Head (a binary file counts as changed, with no lines).
	FilesChanged, Insertions, Deletions int
	// Paths are the first MaxPaths changed paths, as shown to people
	// (control characters escaped).
	Paths []string
	// Notes say what of the workspace was not recorded, and why.
	Notes []string
}

// Empty reports whether nothing changed.
func (c *Change) Empty() bool { return c.Head == c.Base }

// MaxPaths bounds Change.Paths (end.git.paths, status.git.paths).
const MaxPaths = 20

// Committer is the identity of agentrun's own commit.
var Committer = struct{ Name, Email string }{"agentrun", "agentrun@localhost"}

// Record records the change the agent made in the workspace, once it has
// exited: its commits (taken from the workspace's .git only through a
// checked transfer, see takeAgentCommits) and what it left uncommitted (one
// more commit, by agentrun, whose message names the run). A part that
// cannot be taken is left out with a note, and the rest recorded: a HEAD
// that does not descend from the base commit, objects that do not check
// out, a working tree over the bounds.
func (c *Checkout) Record(ctx context.Context, runName string) (*Change, error) {
	ch := &Change{Base: c.Base}
	agent, note := c.takeAgentCommits(ctx)
	if note != "" {
		ch.Notes = append(ch.Notes, note)
	}
	tree, notes, err := c.workingTree(ctx, agent)
	ch.Notes = append(ch.Notes, notes...)
	if err != nil {
		return nil, err
	}
	head := agent
	agentTree, err := c.revParse(ctx, agent+"^{tree}")
	if err != nil {
		return nil, err
	}
	if tree != "" && tree != agentTree {
		msg := fmt.Sprintf("agentrun: what the agent left uncommitted\n\nAgentrun-Run: %s\nAgentrun-Base: %s\n", oneLine(runName), c.Base)
		g := c.git.with("GIT_AUTHOR_NAME="+Committer.Name, "GIT_AUTHOR_EMAIL="+Committer.Email,
			"GIT_COMMITTER_NAME="+Committer.Name, "GIT_COMMITTER_EMAIL="+Committer.Email)
		out, err := g.runInput(ctx, []byte(msg), "--git-dir", c.repo, "commit-tree", tree, "-p", agent)
		if err != nil {
			return nil, err
		}
		head = strings.TrimSpace(string(out))
	}
	if _, err := c.git.run(ctx, "--git-dir", c.repo, "update-ref", "refs/agentrun/head", head); err != nil {
		return nil, err
	}
	ch.Head = head
	if !ch.Empty() {
		if err := c.stat(ctx, ch); err != nil {
			return nil, err
		}
	}
	return ch, nil
}

// takeAgentCommits brings the agent's commits into agentrun's repository
// and returns the commit they lead to (the base when there are none, or
// when they cannot be taken: the note says why).
//
// The agent wrote every byte of .git: its HEAD and refs are read as small
// regular files, never through a link; of its objects only the loose
// objects and the packs are copied (never objects/info/alternates, which
// could name a repository on the host the sandbox could not read, nor
// info/grafts, the commit-graph or an index agentrun did not make), each
// pack indexed again by agentrun; and the commits then reach agentrun's
// repository only by a fetch with every object checked.
func (c *Checkout) takeAgentCommits(ctx context.Context) (string, string) {
	gitDir := filepath.Join(c.workspace, ".git")
	guard := safefile.Guard{Untrusted: []string{c.workspace}}
	head, err := readHead(guard, gitDir)
	switch {
	case err != nil:
		return c.Base, "the agent's commits are not published: " + err.Error() + "; its working tree is recorded instead"
	case head == c.Base:
		return c.Base, ""
	}
	quarantine := filepath.Join(c.private, "quarantine.git")
	os.RemoveAll(quarantine)
	if _, err := c.git.run(ctx, "init", "-q", "--bare", quarantine); err != nil {
		return c.Base, "the agent's commits are not published: " + err.Error()
	}
	if err := os.WriteFile(filepath.Join(quarantine, "objects", "info", "alternates"), []byte(filepath.Join(c.repo, "objects")+"\n"), 0o644); err != nil {
		return c.Base, err.Error()
	}
	if sh, err := os.ReadFile(filepath.Join(c.repo, "shallow")); err == nil {
		if err := os.WriteFile(filepath.Join(quarantine, "shallow"), sh, 0o644); err != nil {
			return c.Base, err.Error()
		}
	}
	if err := c.copyObjects(ctx, guard, filepath.Join(gitDir, "objects"), filepath.Join(quarantine, "objects")); err != nil {
		return c.Base, "the agent's commits are not published: " + err.Error() + "; its working tree is recorded instead"
	}
	if _, err := c.git.run(ctx, "--git-dir", quarantine, "update-ref", "refs/agentrun/head", head); err != nil {
		return c.Base, "the agent's HEAD " + head + " is not a commit of its repository; its working tree is recorded instead"
	}
	local := *c.git
	local.allowFile = true
	if _, err := local.run(ctx, "--git-dir", c.repo, "fetch", "-q", "--no-tags", "--no-write-fetch-head",
		"file://"+quarantine, "+refs/agentrun/head:refs/agentrun/agent"); err != nil {
		return c.Base, "the agent's commits do not check out (" + err.Error() + "): they are not published; its working tree is recorded instead"
	}
	if _, err := c.git.run(ctx, "--git-dir", c.repo, "merge-base", "--is-ancestor", c.Base, "refs/agentrun/agent"); err != nil {
		return c.Base, "the agent's HEAD " + head + " does not descend from the base commit " + c.Base + ": its commits are not published; its working tree is recorded instead"
	}
	return head, ""
}

// maxRefFile bounds a HEAD or loose ref; maxPackedRefs packed-refs.
const (
	maxRefFile    = 4 << 10
	maxPackedRefs = 64 << 20
)

// Compiled on first use: its bounded repetition makes a large program,
// and every start of agentrun would pay for it.
var refName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^refs/heads/[A-Za-z0-9._/+-]{1,200}$`) })

// readHead reads the commit the workspace's HEAD names: a commit id, or a
// branch of refs/heads, loose or packed.
func readHead(g safefile.Guard, gitDir string) (string, error) {
	b, err := g.ReadFile(filepath.Join(gitDir, "HEAD"), maxRefFile)
	if err != nil {
		return "", fmt.Errorf("its .git/HEAD cannot be read (%v)", err)
	}
	v := strings.TrimSpace(string(b))
	if hexID().MatchString(v) {
		return v, nil
	}
	ref, ok := strings.CutPrefix(v, "ref: ")
	if !ok || !refName().MatchString(ref) || strings.Contains(ref, "..") {
		return "", fmt.Errorf("its .git/HEAD is neither a commit id nor a branch (%q)", cut(v, 80))
	}
	if b, err := g.ReadFile(filepath.Join(gitDir, filepath.FromSlash(ref)), maxRefFile); err == nil {
		if id := strings.TrimSpace(string(b)); hexID().MatchString(id) {
			return id, nil
		}
		return "", fmt.Errorf("its %s is not a commit id", ref)
	}
	packed, err := g.ReadFile(filepath.Join(gitDir, "packed-refs"), maxPackedRefs)
	if err != nil {
		return "", fmt.Errorf("its HEAD names %s, which it does not hold", ref)
	}
	for _, line := range strings.Split(string(packed), "\n") {
		if id, name, ok := strings.Cut(line, " "); ok && name == ref && hexID().MatchString(id) {
			return id, nil
		}
	}
	return "", fmt.Errorf("its HEAD names %s, which it does not hold", ref)
}

var (
	looseDir  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{2}$`) })
	looseFile = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{38}([0-9a-f]{24})?$`) })
	packFile  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^pack-[0-9a-f]{40}([0-9a-f]{24})?\.pack$`) })
)

// copyObjects copies the agent's loose objects and packs into dst, within
// the bound on their bytes, and indexes each pack itself.
func (c *Checkout) copyObjects(ctx context.Context, g safefile.Guard, src, dst string) error {
	budget := c.spec.Limits.AgentObjectBytes
	take := func(from, to string) error {
		info, err := os.Lstat(from)
		if err != nil || !info.Mode().IsRegular() {
			return nil // not an object file: left out
		}
		if info.Size() > budget {
			return fmt.Errorf("its objects are larger than the bound of %d MiB", c.spec.Limits.AgentObjectBytes>>20)
		}
		budget -= info.Size()
		return g.Copy(to, from, info.Size()+1, 0o444)
	}
	entries, err := g.ReadDir(src)
	if err != nil {
		return fmt.Errorf("its objects cannot be read (%v)", err)
	}
	for _, e := range entries {
		switch {
		case e.IsDir() && looseDir().MatchString(e.Name()):
			files, err := g.ReadDir(filepath.Join(src, e.Name()))
			if err != nil {
				continue
			}
			if err := os.MkdirAll(filepath.Join(dst, e.Name()), 0o755); err != nil {
				return err
			}
			for _, f := range files {
				if f.Type().IsRegular() && looseFile().MatchString(f.Name()) {
					if err := take(filepath.Join(src, e.Name(), f.Name()), filepath.Join(dst, e.Name(), f.Name())); err != nil {
						return err
					}
				}
			}
		case e.IsDir() && e.Name() == "pack":
			files, err := g.ReadDir(filepath.Join(src, "pack"))
			if err != nil {
				continue
			}
			for _, f := range files {
				if !f.Type().IsRegular() || !packFile().MatchString(f.Name()) {
					continue
				}
				to := filepath.Join(dst, "pack", f.Name())
				if err := take(filepath.Join(src, "pack", f.Name()), to); err != nil {
					return err
				}
				if _, err := c.git.run(ctx, "--git-dir", filepath.Dir(dst), "index-pack", "--strict", to); err != nil {
					return fmt.Errorf("its pack %s does not check out (%v)", f.Name(), err)
				}
			}
		}
	}
	return nil
}

// workingTree records the working tree over the commit agent: the tree
// object of what a `git add -A` would make, in agentrun's repository, from
// an index of agentrun's own (the one made at the clone, so that files the
// agent did not touch are not read again). Ignored files stay out as
// .gitignore says; a directory that holds a repository of its own, and
// anything a submodule holds, are not recorded (notes say so); the files
// read are bounded in number and size. It returns "" with a note when the
// working tree cannot be recorded.
func (c *Checkout) workingTree(ctx context.Context, agent string) (string, []string, error) {
	var notes []string
	index := filepath.Join(c.private, "index")
	g := c.git.with("GIT_INDEX_FILE="+index, "GIT_WORK_TREE="+c.workspace)
	wt := func(args ...string) ([]byte, error) {
		return g.run(ctx, append([]string{"--git-dir", c.repo, "--work-tree", c.workspace}, args...)...)
	}
	if _, err := wt("read-tree", "-m", c.Base, agent); err != nil {
		if _, err := wt("read-tree", agent); err != nil {
			return "", nil, err
		}
	}
	gitlinks, err := gitlinksOf(wt)
	if err != nil {
		return "", nil, err
	}
	// What a `git add -A` would read: the untracked files that are not
	// ignored (a repository of the agent's own shows as "dir/"), and the
	// tracked ones whose stat changed.
	out, err := wt("ls-files", "-z", "--others", "--exclude-standard", "--modified")
	if err != nil {
		return "", nil, err
	}
	var nested []string
	var files int
	var total int64
	for _, p := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if p == "" {
			continue
		}
		if strings.HasSuffix(p, "/") {
			if _, isLink := gitlinks[strings.TrimSuffix(p, "/")]; !isLink {
				nested = append(nested, p)
			}
			continue
		}
		files++
		info, err := os.Lstat(filepath.Join(c.workspace, p))
		if err != nil {
			continue
		}
		if info.Mode().IsRegular() && info.Size() > c.spec.Limits.FileBytes {
			return "", append(notes, fmt.Sprintf("what the agent left uncommitted is not recorded: %s is larger than %d MiB", display(p), c.spec.Limits.FileBytes>>20)), nil
		}
		total += info.Size()
		if files > c.spec.Limits.ChangeFiles || total > c.spec.Limits.ChangeBytes {
			return "", append(notes, fmt.Sprintf("what the agent left uncommitted is not recorded: more than %d files or %d MiB changed", c.spec.Limits.ChangeFiles, c.spec.Limits.ChangeBytes>>20)), nil
		}
	}
	if len(nested) > 0 {
		var exclude bytes.Buffer
		for _, p := range nested {
			exclude.WriteString("/" + globEscape(p) + "\n")
		}
		if err := os.WriteFile(filepath.Join(c.repo, "info", "exclude"), exclude.Bytes(), 0o644); err != nil {
			return "", nil, err
		}
		notes = append(notes, fmt.Sprintf("not recorded: %s, which %s a repository of its own", joinShown(nested, 5), map[bool]string{true: "holds", false: "each hold"}[len(nested) == 1]))
	}
	if _, err := wt("add", "-A", "--ignore-errors", "--", "."); err != nil {
		notes = append(notes, "some files could not be read and are not recorded: "+cut(err.Error(), 300))
	}
	// A submodule stays the commit the checkout had: what its .git names
	// is the agent's to point anywhere (a repository on the host).
	if len(gitlinks) > 0 {
		after, err := gitlinksOf(wt)
		if err != nil {
			return "", nil, err
		}
		var info bytes.Buffer
		for p, id := range gitlinks {
			if after[p] != id {
				notes = append(notes, "not recorded: the change of submodule "+display(p)+" (a run does not move a submodule)")
			}
			fmt.Fprintf(&info, "160000 %s\t%s\x00", id, p)
		}
		if _, err := g.runInput(ctx, info.Bytes(), "--git-dir", c.repo, "update-index", "-z", "--index-info"); err != nil {
			return "", nil, err
		}
	}
	tree, err := g.run(ctx, "--git-dir", c.repo, "write-tree")
	if err != nil {
		return "", nil, err
	}
	return strings.TrimSpace(string(tree)), notes, nil
}

// gitlinksOf lists the index's submodule entries: path → commit.
func gitlinksOf(wt func(...string) ([]byte, error)) (map[string]string, error) {
	out, err := wt("ls-files", "-z", "--stage")
	if err != nil {
		return nil, err
	}
	links := map[string]string{}
	for _, e := range strings.Split(string(out), "\x00") {
		meta, path, ok := strings.Cut(e, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 && f[0] == "160000" {
			links[path] = f[1]
		}
	}
	return links, nil
}

// stat fills the diff stat and the first paths of Base..Head.
func (c *Checkout) stat(ctx context.Context, ch *Change) error {
	out, err := c.git.run(ctx, "--git-dir", c.repo, "diff-tree", "-r", "-z", "--numstat", "--no-renames", "--no-textconv", "--no-ext-diff", ch.Base, ch.Head)
	if err != nil {
		return err
	}
	fields := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	for _, f := range fields {
		parts := strings.SplitN(f, "\t", 3)
		if len(parts) != 3 {
			continue
		}
		ch.FilesChanged++
		if n, err := strconv.Atoi(parts[0]); err == nil {
			ch.Insertions += n
		}
		if n, err := strconv.Atoi(parts[1]); err == nil {
			ch.Deletions += n
		}
		if len(ch.Paths) < MaxPaths {
			ch.Paths = append(ch.Paths, display(parts[2]))
		}
	}
	n, err := c.git.run(ctx, "--git-dir", c.repo, "rev-list", "--count", ch.Base+".."+ch.Head)
	if err != nil {
		return err
	}
	ch.Commits, _ = strconv.Atoi(strings.TrimSpace(string(n)))
	return nil
}

func (c *Checkout) revParse(ctx context.Context, rev string) (string, error) {
	out, err := c.git.run(ctx, "--git-dir", c.repo, "rev-parse", "--verify", rev)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// display shows a path the agent named: control characters (a newline, an
// escape sequence) as \xNN, invalid UTF-8 replaced, at most 256 bytes.
func display(p string) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(p, "\uFFFD") {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069') {
			fmt.Fprintf(&b, `\x%02x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return cut(b.String(), 256)
}

func oneLine(s string) string { return display(strings.TrimSpace(s)) }

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8Start(b byte) bool { return b&0xc0 != 0x80 }

// globEscape quotes the characters an exclude pattern gives a meaning.
func globEscape(p string) string {
	var b strings.Builder
	for i, r := range p {
		if strings.ContainsRune(`*?[]\`, r) || (i == 0 && (r == '#' || r == '!')) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return strings.TrimRight(b.String(), " ")
}

func joinShown(ps []string, n int) string {
	var out []string
	for i, p := range ps {
		if i == n {
			out = append(out, fmt.Sprintf("and %d more", len(ps)-n))
			break
		}
		out = append(out, display(p))
	}
	return strings.Join(out, ", ")
}
