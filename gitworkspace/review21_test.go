package gitworkspace

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
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

// TestReviewFetchScopeNeverWritesTheToken (review of issue 21): the git
// host's answers to a fetch carry the real token when the host echoes
// what it got (in a malformed line the proxy's error quotes, a header
// name or value, a trailer, a redirect's percent-encoded URL, base64
// without its padding, a 1xx answer); the agent must get none of it, over
// a CONNECT tunnel or in absolute form, and the proxy's log neither.
func TestReviewFetchScopeNeverWritesTheToken(t *testing.T) {
	for _, user := range []string{DefaultBasicUser, "x-oauth-basic"} {
		t.Run(user, func(t *testing.T) { fetchScopeLeaks(t, user) })
	}
}

func fetchScopeLeaks(t *testing.T, user string) {
	const token = "ghp_review21TokenABCdef0123456789xy" // user:token is not a multiple of 3 long: its base64 is padded
	header := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+token))
	if !strings.HasSuffix(header, "=") {
		t.Fatal("the Basic value has no padding: the test proves less than it says")
	}
	forms := []struct{ name, answer string }{
		{"a header line without a colon", "HTTP/1.1 200 OK\r\nE\r\nContent-Length: 2\r\n\r\nok"},
		{"a status line that is the echo", "E\r\n\r\n"},
		{"the echo as Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: E\r\n\r\nok"},
		{"the echo as a header value", "HTTP/1.1 200 OK\r\nX-Echo: E\r\nContent-Length: 2\r\n\r\nok"},
		{"the echo in a header name", "HTTP/1.1 200 OK\r\nX-E-Echo: x\r\nContent-Length: 2\r\n\r\nok"},
		{"the echo in a trailer", "HTTP/1.1 200 OK\r\nTrailer: X-Echo\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Echo: E\r\n\r\n"},
		{"the echo percent-encoded in a redirect", "HTTP/1.1 302 Found\r\nLocation: https://evil.test/cb?k=Q\r\nContent-Length: 2\r\n\r\nok"},
		{"the echo percent-encoded in the body", "HTTP/1.1 200 OK\r\nContent-Length: LEN\r\n\r\nQ"},
		{"base64 without padding in the body", "HTTP/1.1 200 OK\r\nContent-Length: LEN\r\n\r\nR"},
		{"the echo quoted in the body", "HTTP/1.1 200 OK\r\nContent-Length: LEN\r\n\r\n\"E\""},
		{"a 1xx answer carrying the echo", "HTTP/1.1 103 Early Hints\r\nX-Echo: E\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
	}
	var mu sync.Mutex
	var answer string
	var got []string // the Authorization values the upstream received
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				auth := req.Header.Get("Authorization")
				mu.Lock()
				got = append(got, auth)
				a := answer
				mu.Unlock()
				for _, echo := range []string{auth, token} {
					body := ""
					switch {
					case strings.Contains(a, "\r\n\r\nQ"):
						body = url.QueryEscape(echo)
					case strings.Contains(a, "\r\n\r\nR"):
						body = strings.TrimRight(strings.TrimPrefix(echo, "Basic "), "=") + "\n"
					case strings.Contains(a, "\r\n\r\n\"E\""):
						body = `"` + echo + `"`
					}
					out := strings.NewReplacer("LEN", strconv.Itoa(len(body)), "\r\n\r\nQ", "\r\n\r\n"+body, "\r\n\r\nR", "\r\n\r\n"+body,
						"\r\n\r\n\"E\"", "\r\n\r\n"+body, "Q", url.QueryEscape(echo), "E", echo).Replace(a)
					if echo == auth {
						// The header first; a second answer on the same
						// connection is what Go logs as unsolicited.
						io.WriteString(c, out)
						continue
					}
					io.WriteString(c, out)
				}
				if cw, ok := c.(interface{ CloseWrite() error }); ok {
					cw.CloseWrite()
				}
				io.Copy(io.Discard, c)
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	r, err := parseRemote("http://git.test:"+port+"/app.git", true)
	if err != nil {
		t.Fatal(err)
	}
	scope := NewFetchScope(&Checkout{remote: r, spec: Spec{Token: token, Auth: Auth{User: user}}}, nil, nil, false)
	standIn := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+scope.standIn))
	p, err := proxy.NewPolicy(proxy.ModeCustom, []string{"git.test:" + port, "127.0.0.1:" + port})
	if err != nil {
		t.Fatal(err)
	}
	res := &proxy.HostResolver{Static: map[string][]netip.Addr{"git.test": {netip.MustParseAddr("127.0.0.1")}}}
	var logs bytes.Buffer
	var logMu sync.Mutex
	prev := log.Writer()
	log.SetOutput(writerFunc(func(b []byte) (int, error) { logMu.Lock(); defer logMu.Unlock(); return logs.Write(b) }))
	defer log.SetOutput(prev)
	defer scope.RedactLogs()()
	ps := &proxy.Server{Policy: p, Resolver: res, Intercept: proxy.Interceptors{scope}, TunnelIdleTimeout: 5 * time.Second}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ps.Serve(pl)
	defer ps.Close()
	leaks := func(text string) []string {
		var out []string
		if strings.Contains(strings.ToLower(text), strings.ToLower(token)) {
			out = append(out, "the token")
		}
		for name, v := range map[string]string{
			"user:token in base64":         base64.RawStdEncoding.EncodeToString([]byte(user + ":" + token)),
			"the token in base64":          base64.RawStdEncoding.EncodeToString([]byte(token)),
			"the token in base64 for URLs": base64.RawURLEncoding.EncodeToString([]byte(token)),
		} {
			if strings.Contains(text, v) {
				out = append(out, name)
			}
		}
		return out
	}
	target := "git.test:" + port
	for _, f := range forms {
		for _, absolute := range []bool{false, true} {
			mu.Lock()
			answer, got = f.answer, nil
			mu.Unlock()
			c, err := net.Dial("tcp", pl.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			path := "/app.git/info/refs?service=git-upload-pack"
			if absolute {
				path = "http://" + target + path
			} else {
				fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
			}
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nConnection: close\r\n\r\n", path, target, standIn)
			b, _ := io.ReadAll(c)
			c.Close()
			mu.Lock()
			sent := append([]string{}, got...)
			mu.Unlock()
			name := fmt.Sprintf("%s, absolute %v", f.name, absolute)
			if len(sent) == 0 || sent[0] != header {
				t.Errorf("%s: the upstream did not get the real token (%q): the test proves nothing", name, sent)
				continue
			}
			if l := leaks(string(b)); len(l) > 0 {
				t.Errorf("%s: the agent got %s:\n%.600s", name, strings.Join(l, ", "), b)
			}
		}
	}
	// Kept alive: the second answer on the connection (the token) is what
	// Go's client logs as unsolicited.
	mu.Lock()
	answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 E\r\n\r\n"
	mu.Unlock()
	c, err := net.Dial("tcp", pl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\nGET /app.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\n\r\n", target, target, target, standIn)
	b, _ := io.ReadAll(c)
	c.Close()
	if l := leaks(string(b)); len(l) > 0 {
		t.Errorf("kept alive: the agent got %s:\n%.600s", strings.Join(l, ", "), b)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		logMu.Lock()
		done := strings.Contains(logs.String(), "Unsolicited")
		logMu.Unlock()
		if done {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	logMu.Lock()
	if !strings.Contains(logs.String(), "Unsolicited") {
		t.Errorf("Go's client did not log the unsolicited answer, so this part proves nothing: %q", logs.String())
	}
	defer logMu.Unlock()
	if l := leaks(logs.String()); len(l) > 0 {
		t.Errorf("the proxy's log holds %s:\n%s", strings.Join(l, ", "), logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
