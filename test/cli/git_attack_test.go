package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/events"
)

// gitAttack is one thing a hostile agent does to the checkout before it
// exits, and what must hold once agentrun has recorded and published the
// change on the host, with the token at hand.
type gitAttack struct {
	name string
	// script runs in the workspace, inside the sandbox, as the agent. M is
	// a directory only host-side code can write: a file appearing there
	// means the host ran something the agent wrote. SECRET is the id of a
	// blob of a repository on the host that the agent cannot read.
	script string
	push   string // branch (default) or patch
	check  func(t *testing.T, a *gitAttackRun)
}

type gitAttackRun struct {
	g      *gitRepo
	end    *events.End
	patch  []byte
	stderr []byte
}

// fakeAgent is a claude-code stand-in that runs script in its working
// directory and ends as claude-code does.
func fakeAgent(t *testing.T, dir, script string) string {
	t.Helper()
	bin := filepath.Join(dir, "claude")
	body := "#!/bin/sh\ncat >/dev/null\n(\n" + script + "\n) >&2\n" +
		`echo '{"type":"system","subtype":"init","session_id":"x"}'` + "\n" +
		`echo '{"type":"result","subtype":"success","is_error":false,"result":"done","usage":{"input_tokens":1,"output_tokens":1}}'` + "\n"
	if err := os.WriteFile(bin, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestGitAttacks: every attack of docs/git.md, "What host-side git never
// does", as root and as an unprivileged caller.
func TestGitAttacks(t *testing.T) {
	commit := `git -c user.name=agent -c user.email=a@example.com commit -q --no-verify`
	attacks := []gitAttack{
		{name: "hooks", script: `for h in pre-commit post-commit pre-push post-checkout post-merge reference-transaction pre-auto-gc post-rewrite; do
  printf '#!/bin/sh\ntouch M/hook-%s 2>/dev/null; exit 0\n' $h > .git/hooks/$h; chmod +x .git/hooks/$h; done
echo a >> README.md; ` + commit + ` -am hooked`,
			check: pushedWith(1)},
		{name: "config runs nothing and redirects nothing", script: `mkdir -p h; printf '#!/bin/sh\ntouch M/hookspath\n' > h/pre-push; chmod +x h/pre-push
git config core.hooksPath "$PWD/h"; git config core.fsmonitor 'touch M/fsmonitor 2>/dev/null; false'
git config credential.helper '!f() { cat > M/credential; }; f'; git config core.sshCommand 'touch M/ssh'
git config http.proxy http://127.0.0.1:9; git config http.extraHeader 'Authorization: Basic ZXZpbDpldmls'
git config include.path /var/tmp/evil.gitconfig; git config --add includeIf.gitdir:/.path /var/tmp/evil.gitconfig
git config filter.evil.clean 'touch M/filter 2>/dev/null; cat'; git config filter.evil.smudge 'touch M/smudge 2>/dev/null; cat'; git config filter.evil.required true
git config diff.evil.textconv 'touch M/textconv'; git config diff.evil.command 'touch M/diff'; git config merge.evil.driver 'touch M/merge'
git config core.pager 'touch M/pager'; git config gpg.program 'touch M/gpg'; git config commit.gpgSign true
echo '* filter=evil diff=evil merge=evil' > .gitattributes; echo b >> README.md; ` + commit + ` --no-gpg-sign -am configured; echo c > c.txt`,
			check: pushedWith(2)},
		{name: ".git replaced by a link", script: `echo a >> README.md; ` + commit + ` -am x; mv .git .realgit; ln -s /root .git; echo d > d.txt`,
			check: func(t *testing.T, a *gitAttackRun) {
				pushedWith(1)(t, a)
				if !strings.Contains(a.end.Git.Detail, "not published") {
					t.Errorf("detail %q, want the agent's commits not published", a.end.Git.Detail)
				}
			}},
		{name: ".git a gitdir file leading elsewhere", script: `rm -rf .git; echo 'gitdir: /var/tmp' > .git; echo d > d.txt`,
			check: pushedWith(1)},
		{name: "alternates to a host repository", script: `echo "$SECRET_REPO/objects" > .git/objects/info/alternates
tree=$(printf '100644 blob %s\tstolen.txt\n' "$SECRET" | git mktree --missing)
c=$(git -c user.name=a -c user.email=a@example.com commit-tree "$tree" -p HEAD -m steal); git update-ref refs/heads/main "$c"; echo e > e.txt`,
			check: func(t *testing.T, a *gitAttackRun) {
				if _, err := a.g.srv.Git("app", "cat-file", "-e", os.Getenv("SECRET")); err == nil {
					t.Error("the host repository's secret blob reached the server")
				}
				if !strings.Contains(a.end.Git.Detail, "not published") {
					t.Errorf("detail %q, want the agent's commits not published", a.end.Git.Detail)
				}
			}},
		{name: "grafts and a forged shallow file", script: `echo f >> README.md; ` + commit + ` -am g; echo "$(git rev-parse HEAD) $SECRET" > .git/info/grafts; echo 0000000000000000000000000000000000000000 >> .git/shallow`,
			check: pushedWith(1)},
		{name: "gitmodules with options and file URLs", script: `printf '[submodule "x"]\n\tpath = x\n\turl = --upload-pack=touch M/upload-pack\n[submodule "y"]\n\tpath = y\n\turl = file:///etc\n' > .gitmodules; ` + commit + ` -q --allow-empty -m m; git add .gitmodules; ` + commit + ` -m modules`,
			check: func(t *testing.T, a *gitAttackRun) {
				// git's object checks refuse the agent's commits (their
				// .gitmodules names an option as a URL): the working tree
				// is published instead.
				pushedWith(1)(t, a)
				if !strings.Contains(a.end.Git.Detail, "disallowed submodule url") {
					t.Errorf("detail %q, want the object check's refusal", a.end.Git.Detail)
				}
			}},
		{name: "links to host files", push: "patch", script: `ln -s /etc/shadow shadow; ln -s /root/.ssh keys; ln -s ../../../../etc/passwd passwd`,
			check: func(t *testing.T, a *gitAttackRun) {
				if bytes.Contains(a.patch, []byte("root:")) || !bytes.Contains(a.patch, []byte("+/etc/shadow")) {
					t.Errorf("the patch carries a link's target, not the link:\n%s", a.patch)
				}
			}},
		{name: "hostile file names", script: `touch "$(printf 'new\nline')" "$(printf 'esc\033]0;pwned\007')" -- '-rf' "$(printf '\342\200\256rtl')"`,
			check: func(t *testing.T, a *gitAttackRun) {
				pushedWith(1)(t, a)
				for _, p := range a.end.Git.Paths {
					if strings.ContainsAny(p, "\n\x1b\x07\u202e") {
						t.Errorf("path %q reaches end.git unescaped", p)
					}
				}
				if b, _ := json.Marshal(a.end.Git.Paths); !strings.Contains(string(b), `new\\x0aline`) {
					t.Errorf("paths %s", b)
				}
			}},
		{name: "a history that does not descend from the base", script: `git checkout -q --orphan fresh; ` + commit + ` -m root; echo g > g.txt`,
			check: func(t *testing.T, a *gitAttackRun) {
				if !strings.Contains(a.end.Git.Detail, "does not descend from the base commit") {
					t.Errorf("detail %q", a.end.Git.Detail)
				}
			}},
		{name: "a nested repository leading to the host", script: `mkdir sub; echo "gitdir: $SECRET_REPO" > sub/.git; echo hi > sub/f; echo h > h.txt`,
			check: func(t *testing.T, a *gitAttackRun) {
				pushedWith(1)(t, a)
				if tree, _ := a.g.srv.Git("app", "ls-tree", "-r", "--name-only", a.end.Git.HeadCommit); strings.Contains(tree, "sub") {
					t.Errorf("the nested repository was published: %s", tree)
				}
				if !strings.Contains(a.end.Git.Detail, "sub/") {
					t.Errorf("detail %q, want a note on sub/", a.end.Git.Detail)
				}
			}},
	}
	for _, u := range []struct {
		name   string
		uid    int
		prefix []string
	}{
		{"root", 0, nil},
		{"nobody", 65534, []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}},
	} {
		t.Run(u.name, func(t *testing.T) {
			g := newGitRepo(t)
			dir, err := os.MkdirTemp("/var/tmp", "agentrun-git-attack-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(dir, "agentrun")
			if b, err := os.ReadFile(agentrun); err != nil || os.WriteFile(bin, b, 0o755) != nil {
				t.Fatalf("copying agentrun: %v", err)
			}
			ca := filepath.Join(dir, "ca.pem")
			if err := os.WriteFile(ca, g.srv.CAPEM(), 0o644); err != nil {
				t.Fatal(err)
			}
			// The host repository the agent must not reach: private to
			// the caller (the agent runs as another user).
			secretRepo := filepath.Join(dir, "secret.git")
			if out, err := exec.Command("git", "init", "-q", "--bare", secretRepo).CombinedOutput(); err != nil {
				t.Fatalf("%v %s", err, out)
			}
			hash := exec.Command("git", "--git-dir", secretRepo, "hash-object", "-w", "--stdin")
			hash.Stdin = strings.NewReader("the host's secret\n")
			secret, err := hash.Output()
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv("SECRET", strings.TrimSpace(string(secret)))
			if err := filepath.Walk(secretRepo, func(p string, _ os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				return os.Lchown(p, u.uid, u.uid)
			}); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(secretRepo, 0o700); err != nil {
				t.Fatal(err)
			}
			for i, at := range attacks {
				t.Run(at.name, func(t *testing.T) {
					marks := filepath.Join(dir, "marks"+string(rune('a'+i)))
					home := filepath.Join(dir, "home"+string(rune('a'+i)))
					for _, d := range []string{marks, home} {
						if err := os.Mkdir(d, 0o700); err != nil {
							t.Fatal(err)
						}
						if err := os.Lchown(d, u.uid, u.uid); err != nil {
							t.Fatal(err)
						}
					}
					script := strings.ReplaceAll(at.script, "M/", marks+"/")
					fake := fakeAgent(t, filepath.Join(dir), "SECRET="+os.Getenv("SECRET")+" SECRET_REPO="+secretRepo+"\nexport SECRET SECRET_REPO\n"+script)
					if err := os.Rename(fake, fake+string(rune('a'+i))); err != nil {
						t.Fatal(err)
					}
					fake += string(rune('a' + i))
					push := at.push
					if push == "" {
						push = "branch"
					}
					patch := filepath.Join(home, "change.patch")
					args := append(append([]string{}, u.prefix...), bin, "run", "--runtime", "claude-code", "--format", "jsonl",
						"--repo", g.url, "--git-credential", "GIT_TOKEN", "--upstream-ca", ca, "--push", push,
						"--add-host", gitHost+"=127.0.0.1", "--allow-host", "127.0.0.1:"+g.port)
					if push == "branch" {
						args = append(args, "--branch", "agentrun/attack-"+u.name+"-"+string(rune('a'+i)))
					} else {
						args = append(args, "--patch", patch)
					}
					args = append(args, "attack")
					cmd := exec.Command(args[0], args[1:]...)
					cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "AGENTRUN_CLAUDE_BIN=" + fake, "GIT_TOKEN=" + gitToken}
					var stdout, stderr bytes.Buffer
					cmd.Stdout, cmd.Stderr = &stdout, &stderr
					_ = cmd.Run()
					var end *events.End
					rd := events.NewReader(bytes.NewReader(stdout.Bytes()))
					for {
						e, err := rd.Next()
						if err != nil {
							break
						}
						if x, ok := e.(*events.End); ok {
							end = x
						}
					}
					if end == nil || end.Status != events.StatusFinished || end.Git == nil {
						t.Fatalf("end %+v\nstdout %s\nstderr %s", end, stdout.Bytes(), stderr.Bytes())
					}
					if entries, _ := os.ReadDir(marks); len(entries) > 0 {
						var names []string
						for _, e := range entries {
							names = append(names, e.Name())
						}
						t.Errorf("host-side git ran what the agent wrote: %v", names)
					}
					for what, b := range map[string][]byte{"stdout": stdout.Bytes(), "stderr": stderr.Bytes()} {
						if bytes.Contains(b, []byte(gitToken)) {
							t.Errorf("%s holds the token", what)
						}
					}
					a := &gitAttackRun{g: g, end: end, stderr: stderr.Bytes()}
					a.patch, _ = os.ReadFile(patch)
					if at.check != nil {
						at.check(t, a)
					}
					if t.Failed() {
						t.Logf("end.git %s\nstderr %s", show(end.Git), stderr.Bytes())
					}
				})
			}
		})
	}
}

// pushedWith: the change reached the run's branch with n commits, and the
// server's branch is at end.git.head_commit.
func pushedWith(n int) func(t *testing.T, a *gitAttackRun) {
	return func(t *testing.T, a *gitAttackRun) {
		t.Helper()
		gi := a.end.Git
		if !gi.Pushed || gi.Commits != n {
			t.Errorf("pushed %v with %d commits, want %d (detail %q)", gi.Pushed, gi.Commits, n, gi.Detail)
			return
		}
		if head, _ := a.g.srv.Git("app", "rev-parse", "refs/heads/"+*gi.Branch); head != gi.HeadCommit {
			t.Errorf("the server's branch is at %q, want %s", head, gi.HeadCommit)
		}
	}
}
