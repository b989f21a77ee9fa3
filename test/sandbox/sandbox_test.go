// Package sandbox attacks the agent's sandbox from inside, with the real
// bubblewrap, real sockets and the real filter proxy, through the built
// `agentrun sandbox` verb (exactly the sandbox and proxy an agent gets).
// Every attack runs as root and as an unprivileged user.
package sandbox

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
)

var (
	binDir   string
	agentrun string
	probe    string
)

func TestMain(m *testing.M) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	// Outside /tmp: the sandbox has its own /tmp, and commands run through
	// sh must still find the probe.
	dir, err := os.MkdirTemp("/var/tmp", "agentrun-sandbox-test-")
	if err == nil {
		err = os.Chmod(dir, 0o755) // the unprivileged user runs these too
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	agentrun, probe = filepath.Join(dir, "agentrun"), filepath.Join(dir, "probe")
	// With the small init helper beside agentrun, as installed in the runner
	// image (test/cli covers the fallback to agentrun's own hidden verb).
	initBin := filepath.Join(dir, "agentrun-sandbox-init")
	// agentrun and the init are built as the runner image builds them
	// (runner-image/Dockerfile: static, no cgo), so the attacks and the
	// start-up benchmark run what ships.
	for out, pkg := range map[string]string{agentrun: "./cmd/agentrun", probe: "./test/sandbox/probe", initBin: "./cmd/agentrun-sandbox-init"} {
		build := exec.Command("go", "build", "-o", out, pkg)
		if pkg != "./test/sandbox/probe" {
			build = exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build:", err)
			os.Exit(1)
		}
	}
	for _, tool := range []string{"bwrap", "curl", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			fmt.Fprintf(os.Stderr, "%s is missing: run hack/setup.sh\n", tool)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// As is who runs agentrun.
type as struct {
	name   string
	uid    int
	prefix []string
}

var users = []as{
	{name: "root", uid: 0},
	{name: "nobody", uid: 65534, prefix: []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}},
}

// world is the host side of one test: a home full of credentials, a
// workspace, and a web server on the host's loopback.
type world struct {
	u       as
	home    string // the runner's HOME, outside /tmp so the sandbox could see it
	ws      string
	outside string // a directory outside both, for extra deny paths
	web     *httptest.Server
	port    string
}

const secret = "TOP-SECRET-7f3a"

func newWorld(t *testing.T, u as) *world {
	t.Helper()
	w := &world{u: u}
	mk := func(prefix string) string {
		d, err := os.MkdirTemp("/var/tmp", prefix)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	w.home, w.ws, w.outside = mk("agentrun-home-"), mk("agentrun-ws-"), mk("agentrun-outside-")
	files := map[string]string{
		".ssh/id_ed25519": secret, ".aws/credentials": secret, ".gnupg/key": secret, ".kube/config": secret,
		".docker/config.json": secret, ".config/gcloud/credentials.db": secret, ".azure/token": secret,
		".npmrc": secret, ".pypirc": secret, ".git-credentials": secret, "notes.txt": "not secret",
	}
	for rel, content := range files {
		p := filepath.Join(w.home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(w.outside, "token"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(w.outside, "keys"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.outside, "keys", "k"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{w.home, w.ws, w.outside} {
		chownAll(t, d, u.uid)
		// Open to others, as most homes are: what hides the credentials
		// is the deny list, not the mode (a root caller's agent is such
		// an other user).
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.web = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, "hello from %s", r.Host)
	}))
	t.Cleanup(w.web.Close)
	_, w.port, _ = net.SplitHostPort(w.web.Listener.Addr().String())
	return w
}

func chownAll(t *testing.T, dir string, uid int) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// run is `agentrun sandbox --cwd WS --events F FLAGS -- CMD...` as w.u; it
// returns the command's stdout and the network events.
type outcome struct {
	stdout string
	stderr string
	exit   int
	net    []*events.NetworkAccess
	pid    int // the runner's pid
}

func (w *world) run(t *testing.T, flags []string, env []string, cmd ...string) outcome {
	t.Helper()
	evPath := filepath.Join(w.outside, fmt.Sprintf("events-%d.jsonl", time.Now().UnixNano()))
	args := append([]string{agentrun, "sandbox", "--cwd", w.ws, "--events", evPath}, flags...)
	args = append(append(args, "--"), cmd...)
	args = append(append([]string{}, w.u.prefix...), args...)
	c := exec.Command(args[0], args[1:]...)
	c.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + w.home, "AGENTRUN_TEST_SECRET=" + secret}, env...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	o := outcome{pid: c.Process.Pid}
	// The command inside can read the runner's pid from the workspace.
	_ = os.WriteFile(filepath.Join(w.ws, "runner.pid"), []byte(fmt.Sprint(c.Process.Pid)), 0o644)
	err := c.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		o.exit = ee.ExitCode()
	}
	o.stdout, o.stderr = strings.TrimSpace(stdout.String()), stderr.String()
	if o.exit == 125 {
		t.Fatalf("the sandbox did not run: %s", o.stderr)
	}
	data, _ := os.ReadFile(evPath)
	rd := events.NewReader(bytes.NewReader(data))
	for {
		e, err := rd.Next()
		if err != nil {
			break
		}
		if n, ok := e.(*events.NetworkAccess); ok {
			o.net = append(o.net, n)
		}
	}
	return o
}

func forEachUser(t *testing.T, f func(t *testing.T, w *world)) {
	for _, u := range users {
		t.Run(u.name, func(t *testing.T) { f(t, newWorld(t, u)) })
	}
}

func TestDeniedPathsAreUnreadable(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		extra := []string{"--deny-read", filepath.Join(w.outside, "token"), "--deny-read", filepath.Join(w.outside, "keys")}
		denied := []string{".ssh", ".ssh/id_ed25519", ".aws/credentials", ".gnupg/key", ".kube/config", ".docker/config.json",
			".config/gcloud/credentials.db", ".azure/token", ".npmrc", ".pypirc", ".git-credentials"}
		var paths []string
		for _, rel := range denied {
			paths = append(paths, filepath.Join(w.home, rel))
		}
		paths = append(paths, filepath.Join(w.outside, "token"), filepath.Join(w.outside, "keys"), filepath.Join(w.outside, "keys", "k"))
		for _, p := range paths {
			o := w.run(t, extra, nil, probe, "read", p)
			if !strings.HasPrefix(o.stdout, "denied:") || strings.Contains(o.stdout, secret) {
				t.Errorf("read %s: %q", p, o.stdout)
			}
		}
		if o := w.run(t, extra, nil, probe, "read", filepath.Join(w.home, "notes.txt")); o.stdout != "ok not secret" {
			t.Errorf("a file that is not on the list must stay readable: %q", o.stdout)
		}
	})
}

func TestDenyPathCreatedLaterStaysHidden(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		netrc := filepath.Join(w.home, ".netrc") // on the default list, absent at launch
		later := filepath.Join(w.outside, "later")
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Wait for the placeholders, then write as the host would.
			for i := 0; i < 100; i++ {
				if _, err := os.Stat(later); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			_ = os.WriteFile(netrc, []byte(secret), 0o644)
			_ = os.WriteFile(filepath.Join(later, "inner"), []byte(secret), 0o644)
		}()
		o := w.run(t, []string{"--deny-read", later}, nil, "sh", "-c",
			fmt.Sprintf("sleep 1; %s read %s; %s read %s", probe, netrc, probe, filepath.Join(later, "inner")))
		<-done
		for _, line := range strings.Split(o.stdout, "\n") {
			if !strings.HasPrefix(line, "denied:") {
				t.Errorf("a deny path created during the run became readable: %q", o.stdout)
			}
		}
		if b, _ := os.ReadFile(netrc); string(b) != secret {
			t.Errorf("the host's own file was disturbed: %q", b)
		}
	})
}

func TestWritesOnlyInWorkspaceAndPrivateTmp(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		for _, p := range []string{"/etc/agentrun-escape", filepath.Join(w.home, "escape"), filepath.Join(w.outside, "escape"), "/usr/agentrun-escape", "/var/tmp/agentrun-escape"} {
			if o := w.run(t, nil, nil, probe, "write", p); !strings.HasPrefix(o.stdout, "denied:") {
				t.Errorf("write %s: %q", p, o.stdout)
			}
			if _, err := os.Stat(p); err == nil {
				os.Remove(p)
				t.Errorf("%s appeared on the host", p)
			}
		}
		if o := w.run(t, nil, nil, probe, "write", filepath.Join(w.ws, "ok.txt")); o.stdout != "ok" {
			t.Errorf("the workspace must be writable: %q", o.stdout)
		}
		marker := fmt.Sprintf("/tmp/agentrun-private-%d", time.Now().UnixNano())
		if o := w.run(t, nil, nil, probe, "write", marker); o.stdout != "ok" {
			t.Errorf("the private /tmp must be writable: %q", o.stdout)
		}
		if _, err := os.Stat(marker); err == nil {
			os.Remove(marker)
			t.Errorf("the sandbox's /tmp is the host's")
		}
	})
}

func TestNoDirectNetwork(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		for _, mode := range [][]string{nil, {"--network", "none"}} {
			o := w.run(t, mode, nil, probe, "tcp", "127.0.0.1:"+w.port)
			if !strings.HasPrefix(o.stdout, "denied:") {
				t.Errorf("%v: a direct connection to the host's loopback server: %q", mode, o.stdout)
			}
		}
		o := w.run(t, []string{"--network", "none"}, nil, "curl", "-sS", "-m", "5", "http://example.com/")
		if o.exit == 0 || len(o.net) != 0 {
			t.Errorf("--network none let curl through: exit %d %q, events %v", o.exit, o.stdout, o.net)
		}
	})
}

// curlCode runs curl through the sandbox's proxy and returns the HTTP code
// (and the body after a newline).
func curlArgs(extra ...string) []string {
	return append([]string{"curl", "-sS", "-m", "10", "-w", "\n%{http_code}"}, extra...)
}

func TestProxyAllowsListedHostOverHTTPAndConnect(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		flags := []string{"--add-host", "mock-model.test=127.0.0.1", "--allow-host", "mock-model.test:" + w.port, "--allow-host", "127.0.0.1:" + w.port}
		url := "http://mock-model.test:" + w.port + "/"
		for _, how := range [][]string{nil, {"-p"}} { // absolute-form, then CONNECT
			o := w.run(t, flags, nil, curlArgs(append(how, url)...)...)
			if o.stdout != "hello from mock-model.test:"+w.port+"\n200" {
				t.Errorf("curl %v %s: %q (stderr %s)", how, url, o.stdout, o.stderr)
			}
			if len(o.net) != 1 || !o.net[0].Allowed || o.net[0].Host != "mock-model.test" || o.net[0].Reason != nil {
				t.Errorf("network events %+v", o.net)
			}
		}
		// The Host header cannot steer the proxy elsewhere.
		o := w.run(t, flags, nil, curlArgs("-H", "Host: metadata.google.internal", url)...)
		if o.stdout != "hello from mock-model.test:"+w.port+"\n200" {
			t.Errorf("spoofed Host header: %q", o.stdout)
		}
	})
}

func TestProxyRefusals(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		custom := []string{"--allow-host", "mock-model.test:" + w.port}
		for name, ip := range map[string]string{"lo.test": "127.0.0.1", "ten.test": "10.0.0.1", "meta.test": "169.254.169.254",
			"v6.test": "::1", "mapped.test": "::ffff:127.0.0.1"} {
			custom = append(custom, "--add-host", name+"="+ip, "--allow-host", name+":"+w.port)
		}
		check := func(flags []string, url, reason string) {
			t.Helper()
			o := w.run(t, flags, nil, curlArgs(url)...)
			if !strings.HasSuffix(o.stdout, "403") {
				t.Errorf("%s: %q, want 403", url, o.stdout)
			}
			if len(o.net) != 1 || o.net[0].Allowed || o.net[0].Reason == nil || *o.net[0].Reason != reason {
				t.Errorf("%s: events %+v, want one refusal %s", url, o.net, reason)
			}
		}
		check(custom, "http://not-listed.test:"+w.port+"/", events.ReasonNotAllowed)
		for _, name := range []string{"lo.test", "ten.test", "meta.test", "v6.test", "mapped.test"} {
			check(custom, "http://"+name+":"+w.port+"/", events.ReasonPrivateAddress)
		}
		// IP-literal tricks, sent to the proxy verbatim (curl would
		// normalise them, and would go direct for what NO_PROXY lists).
		full := []string{"--network", "full"}
		for _, host := range []string{"127.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "[::1]", "[::ffff:127.0.0.1]", "169.254.169.254", "[::ffff:a9fe:a9fe]", "[64:ff9b::7f00:1]"} {
			target := host + ":" + w.port
			o := w.run(t, full, nil, probe, "connect", target)
			if !strings.Contains(o.stdout, " 403 ") {
				t.Errorf("CONNECT %s under --network full: %q, want 403", target, o.stdout)
			}
			if len(o.net) != 1 || o.net[0].Allowed || o.net[0].Reason == nil || *o.net[0].Reason != events.ReasonPrivateAddress {
				t.Errorf("CONNECT %s: events %+v, want one private_address refusal", target, o.net)
			}
		}
	})
}

func TestHostUnixSocketUnreachable(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		sock := filepath.Join(w.ws, "host.sock")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := os.Chmod(sock, 0o777); err != nil {
			t.Fatal(err)
		}
		accepted := make(chan bool, 1)
		go func() {
			c, err := l.Accept()
			if err == nil {
				c.Close()
			}
			accepted <- err == nil
		}()
		o := w.run(t, nil, nil, probe, "unix", sock)
		if !strings.HasPrefix(o.stdout, "denied:") {
			t.Errorf("a host Unix socket in the workspace was reachable: %q", o.stdout)
		}
		select {
		case <-accepted:
			t.Errorf("the host socket accepted a connection from the sandbox")
		case <-time.After(200 * time.Millisecond):
		}
	})
}

func TestRunnerEnvironmentInvisible(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		for _, proc := range []string{"fresh", "host"} {
			env := []string{"AGENTRUN_SANDBOX_PROC=" + proc}
			o := w.run(t, nil, env, "sh", "-c", "env; "+probe+" scan "+hex.EncodeToString([]byte(secret)))
			if strings.Contains(o.stdout, secret) || strings.Contains(o.stdout, "found:") {
				t.Errorf("/proc %s: the runner's secret is visible inside: %s", proc, o.stdout)
			}
			for _, line := range strings.Split(o.stdout, "\n") {
				k, _, _ := strings.Cut(line, "=")
				if strings.Contains(line, "=") && !allowedEnv[k] {
					t.Errorf("/proc %s: unexpected variable inside: %s", proc, k)
				}
			}
			// The runner itself, by pid: visible with the outer /proc, its
			// environ and memory must still be closed (setpriv execs
			// agentrun in place, so the pid is the one the test started).
			o = w.run(t, nil, env, "sh", "-c", "sleep 0.5; "+probe+" proc $(cat "+filepath.Join(w.ws, "runner.pid")+")")
			if !strings.HasPrefix(o.stdout, "denied:") {
				t.Errorf("/proc host: the sandbox opened the runner's environ or memory: %q", o.stdout)
			}
		}
	})
}

// allowedEnv is the whole environment the sandbox gets without --env.
var allowedEnv = map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TERM": true, "TMPDIR": true, "PWD": true,
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "ALL_PROXY": true, "GRPC_PROXY": true, "NO_PROXY": true,
	"http_proxy": true, "https_proxy": true, "all_proxy": true, "grpc_proxy": true, "no_proxy": true, "SHLVL": true, "_": true}

func TestNoInheritedDescriptors(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		if o := w.run(t, nil, nil, probe, "fds"); o.stdout != "ok fds:" {
			t.Errorf("descriptors inherited into the sandbox: %q", o.stdout)
		}
	})
}

func TestExitCodeAndEnv(t *testing.T) {
	forEachUser(t, func(t *testing.T, w *world) {
		o := w.run(t, []string{"--env", "GREETING=hi"}, nil, "sh", "-c", `echo "$GREETING"; exit 7`)
		if o.exit != 7 || o.stdout != "hi" {
			t.Errorf("exit %d stdout %q, want 7 and hi", o.exit, o.stdout)
		}
	})
}
