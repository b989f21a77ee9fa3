package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// openWS opens the workspace at ws for the test.
func openWS(t *testing.T, ws string) *Workspace {
	t.Helper()
	dir, err := OpenWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	return dir
}

// protect runs ProtectGit on the workspace at ws and holds its error to
// wantErr ("" for none); false when the case ends there, refused as
// wanted.
func protect(t *testing.T, ws, wantErr string) (GitProtection, bool) {
	t.Helper()
	got, err := ProtectGit(openWS(t, ws))
	switch {
	case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
		t.Fatalf("err %v, want %q", err, wantErr)
	case wantErr != "":
		return got, false
	case err != nil:
		t.Fatal(err)
	}
	return got, true
}

// TestProtectGitSubmodules: the submodule paths a repository's index lists
// are protected whether the submodule is checked out (its .git) or not (a
// placeholder .git, with the directories missing on its way), in the
// workspace's repository, in the repository the workspace lies in, and in
// submodules of submodules; a submodule path that goes through a link or a
// file is refused, since the agent could put a repository there.
func TestProtectGitSubmodules(t *testing.T) {
	zero := strings.Repeat("1", 40)
	gitlink := func(t *testing.T, repo string, paths ...string) {
		for _, p := range paths {
			git(t, repo, "update-index", "--add", "--cacheinfo", "160000,"+zero+","+p)
		}
	}
	tests := []struct {
		name         string
		setup        func(t *testing.T, base, ws string) // base holds ws
		paths        []string
		placeholders []string
		err          string
	}{
		{name: "populated", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			if err := os.MkdirAll(filepath.Join(ws, ".git", "modules"), 0o755); err != nil {
				t.Fatal(err)
			}
			git(t, ws, "init", "-q", "--separate-git-dir="+filepath.Join(ws, ".git", "modules", "sub"), filepath.Join(ws, "sub"))
			gitlink(t, ws, "sub")
		}, paths: []string{".git", "sub/.git"}},
		{name: "not populated", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			gitlink(t, ws, "sub", "libs/deep/sub2")
		}, paths: []string{".git", "libs/deep/sub2/.git", "sub/.git"}, placeholders: []string{"libs/deep/sub2/.git", "sub/.git"}},
		{name: "submodule of a submodule", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			if err := os.MkdirAll(filepath.Join(ws, ".git", "modules"), 0o755); err != nil {
				t.Fatal(err)
			}
			sub := filepath.Join(ws, "sub")
			git(t, ws, "init", "-q", "--separate-git-dir="+filepath.Join(ws, ".git", "modules", "sub"), sub)
			gitlink(t, ws, "sub")
			gitlink(t, sub, "inner")
		}, paths: []string{".git", "sub/.git", "sub/inner/.git"}, placeholders: []string{"sub/inner/.git"}},
		{name: "nested repository's submodule", setup: func(t *testing.T, _, ws string) {
			if err := os.MkdirAll(filepath.Join(ws, "a", "b"), 0o755); err != nil {
				t.Fatal(err)
			}
			git(t, filepath.Join(ws, "a", "b"), "init", "-q")
			gitlink(t, filepath.Join(ws, "a", "b"), "vendor/x")
		}, paths: []string{"a/b/.git", "a/b/vendor/x/.git"}, placeholders: []string{"a/b/vendor/x/.git"}},
		{name: "workspace in a checkout", setup: func(t *testing.T, base, _ string) {
			git(t, base, "init", "-q")
			gitlink(t, base, "ws/sub", "elsewhere/sub")
		}, paths: []string{".git", "sub/.git"}, placeholders: []string{".git", "sub/.git"}},
		{name: "submodule path through a link", setup: func(t *testing.T, base, ws string) {
			git(t, ws, "init", "-q")
			if err := os.Symlink(base, filepath.Join(ws, "l")); err != nil {
				t.Fatal(err)
			}
			gitlink(t, ws, "l/sub")
		}, err: "which is a symbolic link"},
		{name: "submodule path a file", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			if err := os.WriteFile(filepath.Join(ws, "sub"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			gitlink(t, ws, "sub")
		}, err: "which is not a directory"},
		{name: "submodule's .git a link", setup: func(t *testing.T, base, ws string) {
			git(t, ws, "init", "-q")
			if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(base, filepath.Join(ws, "sub", ".git")); err != nil {
				t.Fatal(err)
			}
			gitlink(t, ws, "sub")
		}, err: "neither a directory nor a file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			ws := filepath.Join(base, "ws")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, base, ws)
			got, ok := protect(t, ws, tt.err)
			if !ok {
				return
			}
			if strings.Join(got.Paths, ",") != strings.Join(tt.paths, ",") || strings.Join(got.Placeholders, ",") != strings.Join(tt.placeholders, ",") || len(got.Notes) > 0 {
				t.Errorf("ProtectGit = %+v\nwant paths %v, placeholders %v", got, tt.paths, tt.placeholders)
			}
			// What exists is known by its identity, the directories on its
			// way included.
			for _, rel := range append(chain(got.Paths), got.Paths...) {
				if _, err := os.Lstat(filepath.Join(ws, rel)); err == nil {
					if _, ok := got.ids[rel]; !ok {
						t.Errorf("no identity for %s", rel)
					}
				}
			}
		})
	}
}

// An index git cannot be read for its submodules is said so in a note, and
// the rest is protected as ever.
func TestProtectGitNotesAnUnreadableIndex(t *testing.T) {
	ws := t.TempDir()
	git(t, ws, "init", "-q")
	if err := os.WriteFile(filepath.Join(ws, ".git", "index"), []byte("DIRC\x00\x00\x00\x09garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := openWS(t, ws)
	got, err := ProtectGit(dir)
	if err != nil || strings.Join(got.Paths, ",") != ".git" || len(got.Notes) != 1 || !strings.Contains(got.Notes[0], "could not be read") {
		t.Errorf("ProtectGit = %+v, %v", got, err)
	}
}

// The mounts are bounded: past the bound a note says what is left out, and
// the workspace's own repository and its submodules come first.
func TestProtectGitMountsAreBounded(t *testing.T) {
	ws := t.TempDir()
	git(t, ws, "init", "-q")
	git(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("1", 40)+",z/sub")
	for _, d := range []string{"a", "b", "c", "d"} {
		if err := os.MkdirAll(filepath.Join(ws, d, ".git"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := openWS(t, ws)
	got, err := findGit(dir, MaxGitSearchDirs, 6) // .git; z, z/sub, z/sub/.git; a, a/.git
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Paths, ",") != ".git,z/sub/.git,a/.git" || len(got.Notes) != 1 || !strings.Contains(got.Notes[0], "b/.git") {
		t.Errorf("findGit with 6 mounts = %+v", got)
	}
	if n := len(got.Paths) + len(chain(got.Paths)); n > 6 {
		t.Errorf("%d mounts", n)
	}
}

func TestChain(t *testing.T) {
	got := chain([]string{".git", "a/b/c/.git", "a/x/.git", "z/.git"})
	if want := []string{"a", "z", "a/b", "a/x", "a/b/c"}; !slices.Equal(got, want) {
		t.Errorf("chain = %v, want %v", got, want)
	}
}

// A file git reads or runs in a protected git directory that is a link
// into the workspace would let the agent write it: the read-only mount
// covers the link, not where it leads. Links that stay in what is
// read-only, or lead out of the workspace, are the user's own.
func TestProtectGitRefusesLinksOutOfGitDirectories(t *testing.T) {
	for _, tt := range []struct {
		name, link, target, err string
	}{
		{"config", ".git/config", "../cfg", "symbolic link"},
		{"config missing", ".git/config", "../not-yet", "symbolic link"},
		{"hooks", ".git/hooks", "../hooks", "symbolic link"},
		{"a hook to a file of the workspace: that file is read-only", ".git/hooks/pre-commit", "../../hooks/pre-commit", ""},
		{"a hook through a link", ".git/hooks/pre-commit", "../../lnk/pre-commit", "symbolic link"},
		{"a hook to a directory", ".git/hooks/pre-commit", "../../mods", "symbolic link"},
		{"index", ".git/index", "../idx", "symbolic link"},
		{"modules", ".git/modules", "../mods", "symbolic link"},
		{"config outside", ".git/config", "OUTSIDE/cfg", ""},
		{"config in another repository's .git", ".git/config", "../other/.git/config", ""},
		{"config outside leading back through a link the agent can move", ".git/config", "OUTSIDE/back", "symbolic link"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			ws := filepath.Join(base, "ws")
			git(t, base, "init", "-q", ws)
			git(t, base, "init", "-q", filepath.Join(ws, "other"))
			for _, f := range []string{"cfg", "idx", "hooks/pre-commit", "mods/x"} {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(ws, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(base, "cfg"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("hooks", filepath.Join(ws, "lnk")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("other", filepath.Join(ws, "lnk2")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(ws, "lnk2", ".git", "config"), filepath.Join(base, "back")); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(ws, tt.link)
			os.RemoveAll(p)
			if err := os.Symlink(strings.ReplaceAll(tt.target, "OUTSIDE", base), p); err != nil {
				t.Fatal(err)
			}
			dir := openWS(t, ws)
			got, err := ProtectGit(dir)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("err %v, want %q", err, tt.err)
			}
			if tt.link == ".git/hooks/pre-commit" && tt.err == "" && !slices.Contains(got.Paths, "hooks/pre-commit") {
				t.Errorf("the hook's script is not read-only: %v", got.Paths)
			}
		})
	}
}

// TestProtectGitConfigPaths: what a repository's config names in the
// workspace (an included config, the hooks directory, an fsmonitor
// program) is read-only like its .git, an empty placeholder where it does
// not exist yet; a bare repository found in the workspace is read-only as
// a whole; through a link, or as the workspace itself, it is refused.
func TestProtectGitConfigPaths(t *testing.T) {
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	tests := []struct {
		name         string
		setup        func(t *testing.T, base, ws string)
		global       string // the caller's global config
		env          []string
		paths        []string
		files        []string // placeholders that are files
		placeholders []string
		err          string
	}{
		{name: "include", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			git(t, ws, "config", "include.path", "../shared.gitconfig")
			if err := os.WriteFile(filepath.Join(ws, "shared.gitconfig"), []byte("[include]\n\tpath = \"conf/more\" ; a comment\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, paths: []string{".git", "conf/more", "shared.gitconfig"}, placeholders: []string{"conf/more"}, files: []string{"conf/more"}},
		{name: "a team config with a byte order mark and a continued line", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			git(t, ws, "config", "include.path", "../team.gitconfig")
			if err := os.WriteFile(filepath.Join(ws, "team.gitconfig"), []byte("\xef\xbb\xbf[core]\n\thooksPath = .git\\\nhooks-team\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, paths: []string{".git", ".githooks-team", "team.gitconfig"}, placeholders: []string{".githooks-team"}},
		{name: "includeIf", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			git(t, ws, "config", `includeIf.gitdir:`+ws+`/.git.path`, ws+"/team.conf")
			if err := os.WriteFile(filepath.Join(ws, "team.conf"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, paths: []string{".git", "team.conf"}},
		{name: "husky", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			git(t, ws, "config", "core.hooksPath", ".husky/_")
			if err := os.MkdirAll(filepath.Join(ws, ".husky", "_"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, ".husky", "_", "pre-commit"), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}, paths: []string{".git", ".husky/_"}},
		{name: "hooks directory not made yet", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			git(t, ws, "config", "core.hooksPath", "githooks")
		}, paths: []string{".git", "githooks"}, placeholders: []string{"githooks"}},
		{name: "global hooks directory, relative to each worktree", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			if err := os.MkdirAll(filepath.Join(ws, "lib", "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			git(t, filepath.Join(ws, "lib", "x"), "init", "-q")
		}, global: "[core]\n\thooksPath = .githooks\n", paths: []string{".git", ".githooks", "lib/x/.git", "lib/x/.githooks"},
			placeholders: []string{".githooks", "lib/x/.githooks"}},
		{name: "fsmonitor program", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			git(t, ws, "config", "core.fsmonitor", "tools/fsmonitor.sh --fast")
			if err := os.MkdirAll(filepath.Join(ws, "tools"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "tools", "fsmonitor.sh"), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}, paths: []string{".git", "tools/fsmonitor.sh"}},
		{name: "fsmonitor command", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			git(t, ws, "config", "core.fsmonitor", "FOO=1 sh tools/fsmon.sh\t./missing/arg")
			if err := os.MkdirAll(filepath.Join(ws, "tools"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "tools", "fsmon.sh"), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}, paths: []string{".git", "tools/fsmon.sh"}},
		{name: "global config in the workspace through a link", setup: func(t *testing.T, base, ws string) {
			git(t, ws, "init", "-q")
			if err := os.WriteFile(filepath.Join(ws, "gitconfig"), []byte("[user]\n\tname = me\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(base, "global.gitconfig"))
			if err := os.Symlink(filepath.Join(ws, "gitconfig"), filepath.Join(base, "global.gitconfig")); err != nil {
				t.Fatal(err)
			}
		}, paths: []string{".git", "gitconfig"}},
		{name: "global config a dangling link into the workspace", setup: func(t *testing.T, base, ws string) {
			git(t, ws, "init", "-q")
			os.Remove(filepath.Join(base, "global.gitconfig"))
			if err := os.Symlink(filepath.Join(ws, "dotfiles", "gitconfig"), filepath.Join(base, "global.gitconfig")); err != nil {
				t.Fatal(err)
			}
		}, paths: []string{".git", "dotfiles/gitconfig"}, placeholders: []string{"dotfiles/gitconfig"}, files: []string{"dotfiles/gitconfig"}},
		{name: "global config through a link of the workspace", setup: func(t *testing.T, base, ws string) {
			git(t, ws, "init", "-q")
			if err := os.MkdirAll(filepath.Join(ws, "real"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "real", "gitconfig"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("real", filepath.Join(ws, "dotfiles")); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(base, "global.gitconfig"))
			if err := os.Symlink(filepath.Join(ws, "dotfiles", "gitconfig"), filepath.Join(base, "global.gitconfig")); err != nil {
				t.Fatal(err)
			}
		}, err: "through a symbolic link inside the workspace"},
		{name: "gitdir outside that is a dangling link into the workspace", setup: func(t *testing.T, base, ws string) {
			if err := os.Symlink(filepath.Join(ws, "later"), filepath.Join(base, "gitdir")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: "+filepath.Join(base, "gitdir")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, err: "which does not exist"},
		{name: "an include with .. after a link, as the kernel resolves it", setup: func(t *testing.T, base, ws string) {
			git(t, ws, "init", "-q")
			if err := os.MkdirAll(filepath.Join(ws, "dotfiles", "git"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "dotfiles", "git", "config"), []byte("[include]\n\tpath = ../local.gitconfig\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(ws, "dotfiles", "git"), filepath.Join(base, "cfgdir")); err != nil {
				t.Fatal(err)
			}
			t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(base, "cfgdir", "config"))
		}, paths: []string{".git", "dotfiles/git/config", "dotfiles/local.gitconfig"},
			placeholders: []string{"dotfiles/local.gitconfig"}, files: []string{"dotfiles/local.gitconfig"}},
		{name: "installation prefix", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
		}, global: "[core]\n\thooksPath = %(prefix)/share/git-core/hooks\n", paths: []string{".git"}},
		{name: "GIT_CONFIG_COUNT", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
		}, env: []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.hooksPath", "GIT_CONFIG_VALUE_0=env-hooks"},
			paths: []string{".git", "env-hooks"}, placeholders: []string{"env-hooks"}},
		{name: "fsmonitor daemon", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			git(t, ws, "config", "core.fsmonitor", "true")
		}, paths: []string{".git"}},
		{name: "outside the workspace", setup: func(t *testing.T, base, ws string) {
			git(t, ws, "init", "-q")
			git(t, ws, "config", "include.path", base+"/elsewhere.conf")
			git(t, ws, "config", "core.hooksPath", base+"/hooks")
		}, paths: []string{".git"}},
		{name: "bare repository", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q", "--bare", "fixtures/remote.git")
		}, paths: []string{"fixtures/remote.git"}},
		{name: "the workspace a bare repository", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q", "--bare")
		}, err: "is a bare git repository"},
		{name: "include through a link", setup: func(t *testing.T, base, ws string) {
			git(t, ws, "init", "-q")
			if err := os.Mkdir(filepath.Join(ws, "real"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("real", filepath.Join(ws, "conf")); err != nil {
				t.Fatal(err)
			}
			git(t, ws, "config", "include.path", "../conf/x")
		}, err: "through a symbolic link"},
		{name: "a hook linked into the workspace", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			git(t, ws, "config", "core.hooksPath", ".husky/_")
			if err := os.MkdirAll(filepath.Join(ws, ".husky", "_"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../pre-commit", filepath.Join(ws, ".husky", "_", "pre-commit")); err != nil {
				t.Fatal(err)
			}
		}, err: "symbolic link"},
		{name: "the hooks directory the workspace", setup: func(t *testing.T, _, ws string) {
			git(t, ws, "init", "-q")
			git(t, ws, "config", "core.hooksPath", ".")
		}, err: "itself as the hooks directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			ws := filepath.Join(base, "ws")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			global := filepath.Join(base, "global.gitconfig")
			if err := os.WriteFile(global, []byte(tt.global), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Setenv("GIT_CONFIG_GLOBAL", global)
			for _, e := range tt.env {
				k, v, _ := strings.Cut(e, "=")
				t.Setenv(k, v)
			}
			tt.setup(t, base, ws)
			got, ok := protect(t, ws, tt.err)
			if !ok {
				return
			}
			slices.Sort(got.Paths)
			slices.Sort(got.Placeholders)
			if strings.Join(got.Paths, ",") != strings.Join(tt.paths, ",") || strings.Join(got.Placeholders, ",") != strings.Join(tt.placeholders, ",") || len(got.Notes) > 0 {
				t.Errorf("ProtectGit = %+v\nwant paths %v, placeholders %v", got, tt.paths, tt.placeholders)
			}
			var files []string
			for f := range got.files {
				files = append(files, f)
			}
			if slices.Sort(files); strings.Join(files, ",") != strings.Join(tt.files, ",") {
				t.Errorf("file placeholders %v, want %v", files, tt.files)
			}
		})
	}
}

func TestConfigPathValues(t *testing.T) {
	in := "[core]\n\thooksPath = \".husky/_\" # husky\n\tfsmonitor=true\n[include]\npath = a\\\"b\n[includeIf \"gitdir:~/w/\"] path = ~/team\n" +
		"[remote \"origin\"]\n\tpath = no\n[core] hookspath = x;y\n"
	var got []string
	for _, v := range configPathValues([]byte(in)) {
		got = append(got, v.key+"="+v.value)
	}
	want := []string{"core.hookspath=.husky/_", "core.fsmonitor=true", `include.path=a"b`, "include.path=~/team", "core.hookspath=x"}
	if !slices.Equal(got, want) {
		t.Errorf("configPathValues = %q\nwant %q", got, want)
	}
}

// A config that includes itself many times is read once: the start does
// not wait on an include bomb an earlier run left.
func TestProtectGitIncludeBomb(t *testing.T) {
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	ws := t.TempDir()
	git(t, ws, "init", "-q")
	bomb := strings.Repeat("[include]\n\tpath = bomb.conf\n", 1000)
	if err := os.WriteFile(filepath.Join(ws, "bomb.conf"), []byte(bomb), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, ws, "config", "include.path", "../bomb.conf")
	dir := openWS(t, ws)
	got, err := ProtectGit(dir)
	if err != nil || strings.Join(got.Paths, ",") != ".git,bomb.conf" {
		t.Errorf("ProtectGit = %+v, %v", got, err)
	}
}

// TestProtectGitChecksEveryLinkOfAGitDirectory: each name of gitLinked
// that is a link into the workspace (outside what is read-only) is
// refused, whichever git directory it is in: the workspace's .git, or one
// outside the workspace that its .git file names (listed without the
// workspace's guard); so is a link among the entries of info. A hook that
// links to a script of the workspace makes that script read-only, from a
// git directory outside as from the workspace's own.
func TestProtectGitChecksEveryLinkOfAGitDirectory(t *testing.T) {
	setup := func(t *testing.T, outside bool) (ws, gitDir string) {
		base := t.TempDir()
		ws = filepath.Join(base, "ws")
		git(t, base, "init", "-q", ws)
		gitDir = filepath.Join(ws, ".git")
		if outside {
			moved := filepath.Join(base, "gitdir")
			if err := os.Rename(gitDir, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(gitDir, []byte("gitdir: "+moved+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			gitDir = moved
		}
		for _, d := range []string{"agent/dir", "scripts"} {
			if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []string{"agent/file", "scripts/pre-commit"} {
			if err := os.WriteFile(filepath.Join(ws, f), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return ws, gitDir
	}
	plant := func(t *testing.T, link, target string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		os.RemoveAll(link)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	for _, outside := range []bool{false, true} {
		where := "the workspace's .git"
		if outside {
			where = "a git directory outside the workspace"
		}
		t.Run(where, func(t *testing.T) {
			names := append(slices.Clone(gitLinked), "info/exclude", "info/attributes")
			for _, name := range names {
				for _, target := range []string{"agent/file", "agent/dir", "agent/not-yet"} {
					t.Run(name+" to "+target, func(t *testing.T) {
						ws, gitDir := setup(t, outside)
						plant(t, filepath.Join(gitDir, name), filepath.Join(ws, target))
						if _, err := ProtectGit(openWS(t, ws)); err == nil || !strings.Contains(err.Error(), "symbolic link") {
							t.Errorf("%s a link to %s: err %v", name, target, err)
						}
					})
				}
			}
			t.Run("a hook to a script of the workspace", func(t *testing.T) {
				ws, gitDir := setup(t, outside)
				plant(t, filepath.Join(gitDir, "hooks", "pre-commit"), filepath.Join(ws, "scripts", "pre-commit"))
				got, err := ProtectGit(openWS(t, ws))
				if err != nil || !slices.Contains(got.Paths, "scripts/pre-commit") {
					t.Errorf("the hook's script is not read-only: %v %v", got.Paths, err)
				}
			})
			t.Run("links elsewhere, and no links", func(t *testing.T) {
				ws, gitDir := setup(t, outside)
				plant(t, filepath.Join(gitDir, "info", "exclude"), "/dev/null")
				if _, err := ProtectGit(openWS(t, ws)); err != nil {
					t.Errorf("a link outside the workspace: %v", err)
				}
			})
		})
	}
}

// A note names what the agent may have named (a directory it created in an
// earlier run): quoted, so that a newline or a terminal escape in the name
// cannot forge a line of agentrun's own on the caller's terminal.
func TestProtectGitNotesQuoteNames(t *testing.T) {
	ws := t.TempDir()
	git(t, ws, "init", "-q")
	evil := "b\nagentrun sandbox: all clear\x1b[2K"
	for _, d := range []string{"a", evil} {
		if err := os.MkdirAll(filepath.Join(ws, d, ".git"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := openWS(t, ws)
	got, err := findGit(dir, MaxGitSearchDirs, 3) // .git; a, a/.git
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Notes) != 1 || strings.ContainsAny(got.Notes[0], "\n\x1b") || !strings.Contains(got.Notes[0], `\nagentrun sandbox: all clear\x1b[2K`) {
		t.Errorf("notes %q", got.Notes)
	}
}
