package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// What a repository's config names. git reads the config of the
// repository it runs in, and some values there are paths that it reads or
// runs from: include.path and includeIf.<condition>.path (more config,
// which may set core.fsmonitor), core.hooksPath (the hooks, in place of
// .git/hooks: husky sets it to .husky/_) and core.fsmonitor when it names a
// program. A protected .git does not help when one of them lies in the
// writable workspace: the agent writes the included config or the hook,
// and the user's next git status or commit runs it. So each one inside the
// workspace is read-only too, as what the repository's git directory
// holds: what exists is bound over itself, and where nothing exists yet an
// empty file (an include) or directory is (a placeholder, see
// MakeGitPlaceholders), which git reads as no config and no hooks, and
// cannot run; a directory would be a bad config to git. A path that goes
// through a link inside the workspace is refused (the agent could move
// the link). The repositories' own configs are read (config,
// config.worktree, the common directory's), their includes to git's depth
// of 10, and the caller's global configs, whose relative core.hooksPath
// applies to every repository's worktree.
//
// What git runs by command rather than by path (a filter, a diff driver, a
// credential helper, core.sshCommand naming a script of the workspace) and
// hooks that run files of the worktree in turn (husky's .husky/pre-commit,
// pre-commit's configuration, lefthook.yml) are the project's files, which
// the agent may change like any other: docs/sandbox.md, "Repositories
// are read-only".

// maxIncludeDepth is git's own bound on nested includes.
const maxIncludeDepth = 10

// configPath is one value of a config that names a path.
type configPath struct {
	key   string // include.path (includeIf's too), core.hookspath or core.fsmonitor
	value string
	file  string // the config file that set it
}

// readConfig collects the path values of the config file at file, and of
// the files it includes, protecting those that lie in the workspace. Each
// file is read once for one repository (seen): what it names does not
// change, and a file that includes itself many times would otherwise be
// read exponentially often within git's depth.
func (g *gitSearch) readConfig(file string, depth int, seen map[string]bool, out *[]configPath) error {
	real, _, ok := g.resolve(file)
	if !ok || seen[real] {
		return nil
	}
	seen[real] = true
	b, err := g.readFile(real, maxGitFile)
	if err != nil {
		return nil // none, or unreadable to the caller and so to git run by them
	}
	for _, v := range configPathValues(b) {
		v.file = file
		if v.key != "include.path" {
			*out = append(*out, v)
			continue
		}
		// Relative to the directory of the file as git opened it.
		p, ok := expandPath(v.value, filepath.Dir(file))
		if !ok {
			continue
		}
		if _, err := g.protectNamed(p, v, "an included config"); err != nil {
			return err
		}
		if depth < maxIncludeDepth {
			if err := g.readConfig(p, depth+1, seen, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// configPaths protects what the configs of the repositories found name in
// the workspace: their includes (readConfig), hooks directories and
// fsmonitor programs; and the caller's global configs themselves, when one
// is (or links to) a file of the workspace (a dotfiles checkout).
func (g *gitSearch) configPaths() error {
	var global []configPath
	seen := map[string]bool{}
	for _, f := range globalConfigs() {
		v := configPath{key: "global config", value: f, file: f}
		if _, err := g.protectNamed(f, v, "a config git reads in every repository"); err != nil {
			return err
		}
		if err := g.readConfig(f, 0, seen, &global); err != nil {
			return err
		}
	}
	global = append(global, envConfig()...)
	done := map[gitRepo]bool{}
	for _, r := range g.configRepos {
		if done[r] {
			continue
		}
		done[r] = true
		var vals []configPath
		seen := map[string]bool{}
		files := []string{filepath.Join(r.gitDir, "config"), filepath.Join(r.gitDir, "config.worktree")}
		if common := g.commonOf(r.gitDir); common != r.gitDir {
			files = append(files, filepath.Join(common, "config"))
		}
		for _, f := range files {
			if err := g.readConfig(f, 0, seen, &vals); err != nil {
				return err
			}
		}
		// The hooks run from the top of the worktree (from the git
		// directory in a bare repository): a relative value means there.
		base := r.worktree
		if base == "" {
			base = r.gitDir
		}
		for _, v := range slices.Concat(global, vals) {
			if err := g.hookPath(v, base); err != nil {
				return err
			}
		}
	}
	return nil
}

// hookPath protects what core.hooksPath or core.fsmonitor names (relative
// to base), when it lies in the workspace.
func (g *gitSearch) hookPath(v configPath, base string) error {
	switch v.key {
	case "core.hookspath":
		p, ok := expandPath(v.value, base)
		if !ok {
			return nil
		}
		real, err := g.protectNamed(p, v, "the hooks directory")
		if err != nil {
			return err
		}
		if g.inside(real) && !slices.Contains(g.hookDirs, real) {
			g.hookDirs = append(g.hookDirs, real)
		}
	case "core.fsmonitor":
		// true/false select git's own daemon; anything else is a
		// command, run by the shell: each word that is a path (not an
		// assignment) is protected, the first one where it is missing.
		if isConfigBool(v.value) {
			return nil
		}
		first := true
		for _, w := range strings.Fields(v.value) {
			if !strings.Contains(w, "/") || strings.Contains(w, "=") {
				continue
			}
			p, ok := expandPath(strings.Trim(w, `'"`), base)
			if !ok {
				continue
			}
			if real, _, ok := g.resolve(p); first || ok && exists(real) {
				if _, err := g.protectNamed(p, v, "a file of the fsmonitor command"); err != nil {
					return err
				}
			}
			first = false
		}
	}
	return nil
}

// protectNamed makes the path p that the config value v names read-only
// when it lies in the workspace, as the kernel finds it (resolve): bound
// over itself when it exists, an empty file (a config) or directory
// (hooks) in its place when not. Through a link inside the workspace, it
// is refused. It returns where p really is.
func (g *gitSearch) protectNamed(p string, v configPath, what string) (string, error) {
	real, viaLink, ok := g.resolve(p)
	switch {
	case !ok || !g.inside(real):
		return real, nil // outside: read-only with the rest (unresolvable: git fails too)
	case viaLink:
		return "", fmt.Errorf("%s = %s in %s names %s, %s, through a symbolic link inside the workspace, which the agent could change: "+
			"make it name the real path, or pass --writable-git", v.key, v.value, v.file, real, what)
	case real == g.root:
		return "", fmt.Errorf("%s = %s in %s names the working directory %s itself as %s, which the agent writes: "+
			"point it elsewhere, or pass --writable-git", v.key, v.value, v.file, g.root, what)
	case g.has(real):
		return real, nil
	}
	_, _, err := g.lstat(real)
	switch {
	case errors.Is(err, unix.ENOENT) && (v.key == "include.path" || v.key == "global config"):
		g.placeholderFile(real)
	case errors.Is(err, unix.ENOENT):
		g.placeholder(real)
	case errors.Is(err, unix.ENOTDIR):
		return "", fmt.Errorf("%s = %s in %s names %s, %s, below a file of the workspace, which the agent could replace with a directory of its own: "+
			"fix the value, or pass --writable-git", v.key, v.value, v.file, real, what)
	case err == nil:
		g.add(real)
	}
	return real, nil // otherwise unreadable to the caller, and so to the agent
}

// exists reports whether there is anything at p (a link included).
func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// commonOf is the common directory of the git directory dir (what its
// commondir file names), or dir itself.
func (g *gitSearch) commonOf(dir string) string {
	target, ok := g.pointer(filepath.Join(dir, "commondir"), "")
	if !ok {
		return dir
	}
	if real, _, ok := g.resolve(rawJoin(dir, target)); ok {
		return real
	}
	return dir
}

// globalConfigs are the caller's config files that git reads in every
// repository: the system's and the user's, with GIT_CONFIG_NOSYSTEM,
// GIT_CONFIG_SYSTEM and GIT_CONFIG_GLOBAL read as git reads them.
func globalConfigs() []string {
	var out []string
	if !envBool("GIT_CONFIG_NOSYSTEM") {
		if f := os.Getenv("GIT_CONFIG_SYSTEM"); f != "" {
			out = append(out, f)
		} else {
			out = append(out, "/etc/gitconfig")
		}
	}
	if f, ok := os.LookupEnv("GIT_CONFIG_GLOBAL"); ok {
		return append(out, f)
	}
	home, _ := os.UserHomeDir()
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if xdg == "" && home != "" {
		xdg = filepath.Join(home, ".config")
	}
	if xdg != "" {
		out = append(out, filepath.Join(xdg, "git", "config"))
	}
	if home != "" {
		out = append(out, filepath.Join(home, ".gitconfig"))
	}
	return out
}

// envConfig are the path values that GIT_CONFIG_COUNT, GIT_CONFIG_KEY_<n>
// and GIT_CONFIG_VALUE_<n> give (the caller's git sees them in every
// repository, as a global config). GIT_CONFIG_PARAMETERS (what git -c
// passes to the commands it starts) is git's own, and not read.
func envConfig() []configPath {
	var out []configPath
	n, _ := strconv.Atoi(os.Getenv("GIT_CONFIG_COUNT"))
	for i := range min(n, 1000) {
		key := strings.ToLower(os.Getenv(fmt.Sprintf("GIT_CONFIG_KEY_%d", i)))
		if strings.HasPrefix(key, "includeif.") && strings.HasSuffix(key, ".path") {
			key = "include.path"
		}
		switch key {
		case "include.path", "core.hookspath", "core.fsmonitor":
			out = append(out, configPath{key: key, value: os.Getenv(fmt.Sprintf("GIT_CONFIG_VALUE_%d", i)), file: fmt.Sprintf("GIT_CONFIG_KEY_%d", i)})
		}
	}
	return out
}

// envBool reads a boolean variable as git does: true, yes, on or a
// non-zero number.
func envBool(name string) bool {
	switch v := strings.ToLower(strings.TrimSpace(os.Getenv(name))); v {
	case "true", "yes", "on":
		return true
	default:
		n, err := strconv.Atoi(v)
		return err == nil && n != 0
	}
}

// expandPath is a path value of a config as git reads it: ~/ is the home
// directory, a relative path is relative to base, and nothing is cleaned
// (see resolve). A ~user/ path, one under %(prefix)/ or an empty value
// gives false.
func expandPath(v, base string) (string, bool) {
	v = strings.TrimPrefix(v, ":(optional)")
	switch {
	case v == "" || strings.HasPrefix(v, "%(prefix)/"):
		// %(prefix)/ is git's installation directory: not the workspace.
		return "", false
	case v == "~" || strings.HasPrefix(v, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			return "", false
		}
		return home + strings.TrimPrefix(v, "~"), true
	case strings.HasPrefix(v, "~"):
		return "", false
	}
	return rawJoin(base, v), true
}

func isConfigBool(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "true", "false", "yes", "no", "on", "off", "1", "0":
		return true
	}
	return false
}

var configSection = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\[\s*([A-Za-z0-9.-]+)(\s+"(?:[^"\\]|\\.)*")?\s*\]`)
})

// configEntry is one key = value line of a git config file.
type configEntry struct {
	section string // lowercased
	sub     bool   // the section has a quoted subsection ([includeIf "gitdir:..."])
	key     string // lowercased
	value   string // as git reads it (configValueText)
}

// configEntries reads a git config file as git writes it, every entry in
// order: sections (with a quoted subsection), key = value lines, a value
// quoted in part or whole and continued over lines after a backslash,
// comments after # or ; outside quotes, backslash escapes, and a byte
// order mark at the start.
func configEntries(b []byte) []configEntry {
	var out []configEntry
	var section string
	var sub bool
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	b = bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\\\r\n"), nil), []byte("\\\n"), nil)
	for _, raw := range bytes.Split(b, []byte("\n")) {
		line := strings.TrimSpace(string(raw))
		if m := configSection().FindStringSubmatch(line); m != nil {
			section, sub = strings.ToLower(m[1]), m[2] != ""
			line = strings.TrimSpace(line[len(m[0]):])
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			out = append(out, configEntry{section: section, sub: sub, key: strings.ToLower(strings.TrimSpace(k)), value: configValueText(v)})
		}
	}
	return out
}

// configValue is the last value of section.key (no subsection) in a git
// config file, lowercased.
func configValue(b []byte, section, key string) string {
	var val string
	for _, e := range configEntries(b) {
		if e.section == section && !e.sub && e.key == key {
			val = strings.ToLower(e.value)
		}
	}
	return val
}

// configPathValues are the values of a git config file that name paths,
// every one in order: include.path and includeIf.*.path (both as
// "include.path"), core.hooksPath and core.fsmonitor (keys lowercased).
func configPathValues(b []byte) []configPath {
	var out []configPath
	for _, e := range configEntries(b) {
		switch {
		case e.key == "path" && (e.section == "include" && !e.sub || e.section == "includeif" && e.sub):
			out = append(out, configPath{key: "include.path", value: e.value})
		case e.section == "core" && !e.sub && (e.key == "hookspath" || e.key == "fsmonitor"):
			out = append(out, configPath{key: "core." + e.key, value: e.value})
		}
	}
	return out
}

// configValueText is a raw config value as git reads it: quotes removed,
// escapes resolved, a comment outside quotes dropped, outer spaces
// trimmed.
func configValueText(v string) string {
	var out strings.Builder
	quoted := false
	v = strings.TrimSpace(v)
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"':
			quoted = !quoted
		case c == '\\' && i+1 < len(v):
			i++
			switch v[i] {
			case 'n':
				out.WriteByte('\n')
			case 't':
				out.WriteByte('\t')
			default:
				out.WriteByte(v[i])
			}
		case (c == '#' || c == ';') && !quoted:
			return strings.TrimSpace(out.String())
		default:
			out.WriteByte(c)
		}
	}
	return strings.TrimSpace(out.String())
}
