package gitworkspace

import (
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/internal/gitserver"
	"github.com/agentrun-dev/agentrun/proxy"
)

// TestReviewFetchScopeByAddress (review of issue 21): the run's
// repository on a name that --add-host maps to a private address needs an
// --allow-host IP:PORT entry (the runner refuses the run otherwise, and
// the CLI tests pass one), and through that entry the agent's git reached
// the same server by its address past the fetch scope: it read another
// repository of the host and pushed to the run's repository, both of
// which the scope refuses under the repository's name. A real git server
// (git http-backend, anonymous reads and pushes, as a forge on an internal
// network may allow), a real git client through the proxy.
func TestReviewFetchScopeByAddress(t *testing.T) {
	srv, err := gitserver.Start(gitserver.Options{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, name := range []string{"app", "secret"} {
		if _, err := srv.Create(name, map[string]string{"README.md": name + "\n"}); err != nil {
			t.Fatal(err)
		}
	}
	u, _ := url.Parse(srv.URL())
	port := u.Port()
	r, err := parseRemote("http://git.test:"+port+"/app.git", true)
	if err != nil {
		t.Fatal(err)
	}
	scope := NewFetchScope(&Checkout{remote: r}, nil, nil, false)
	// What the runner builds for --repo http://git.test:PORT/app.git
	// --add-host git.test=127.0.0.1 --allow-host 127.0.0.1:PORT.
	p, err := proxy.NewPolicy(proxy.ModeCustom, []string{"127.0.0.1:" + port, "git.test:" + port})
	if err != nil {
		t.Fatal(err)
	}
	res := &proxy.HostResolver{Static: map[string][]netip.Addr{"git.test": {netip.MustParseAddr("127.0.0.1")}}}
	ps := &proxy.Server{Policy: p, Resolver: res, Intercept: proxy.Interceptors{scope}, TunnelIdleTimeout: 5 * time.Second}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ps.Serve(pl)
	defer ps.Close()
	work := t.TempDir()
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-c", "http.proxy=http://" + pl.Addr().String()}, args...)...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
			"GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=a@example.com")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := git("clone", "-q", "http://git.test:"+port+"/app.git", "."); err != nil {
		t.Fatalf("the run's repository by its name: %v\n%s: the test proves nothing", err, out)
	}
	if out, err := git("ls-remote", "http://git.test:"+port+"/secret.git"); err == nil {
		t.Fatalf("another repository by the repository's name was read: %s", out)
	}
	for i, host := range []string{"127.0.0.1", "[::ffff:127.0.0.1]", "2130706433"} {
		base := "http://" + host + ":" + port
		if out, err := git("ls-remote", base+"/secret.git"); err == nil || strings.Contains(out, "refs/heads/main") {
			t.Errorf("%s: another repository of the git host was read past the fetch scope: %s", host, out)
		}
		if out, err := git("commit", "-q", "--allow-empty", "-m", "agent"); err != nil {
			t.Fatal(err, out)
		}
		branch := "refs/heads/evil-" + strconv.Itoa(i)
		out, err := git("push", base+"/app.git", "HEAD:"+branch)
		if got, _ := srv.Git("app", "for-each-ref", branch); got != "" || err == nil {
			t.Errorf("%s: the agent pushed to the run's repository past the fetch scope (%v: %s; the server has %q)", host, err, out, got)
		}
	}
}
