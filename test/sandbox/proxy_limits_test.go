package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/proxy"
)

var (
	connfloodOnce sync.Once
	connflood     string
	connfloodErr  error
)

// buildConnflood builds the flooding helper beside the probe, where the
// sandbox can run it (binDir is outside /tmp).
func buildConnflood(t *testing.T) string {
	t.Helper()
	connfloodOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		out := filepath.Join(binDir, "connflood")
		build := exec.Command("go", "build", "-o", out, "./test/sandbox/connflood")
		build.Dir = filepath.Join(filepath.Dir(file), "..", "..")
		if b, err := build.CombinedOutput(); err != nil {
			connfloodErr = fmt.Errorf("build connflood: %v\n%s", err, b)
			return
		}
		connflood = out
	})
	if connfloodErr != nil {
		t.Fatal(connfloodErr)
	}
	return connflood
}

// The attack of the security review: about a thousand idle connections
// exhausted the runner's descriptors, so the agent's own model calls timed
// out. The runner gets the limit common in containers, 1024 descriptors,
// once the sandbox is up (the sandbox keeps the host's, so the flood itself
// is not bounded by it), and the flood is larger than that.
const (
	runnerNofile = "1024"
	floodConns   = 1100
)

func TestProxySurvivesAFloodOfIdleConnections(t *testing.T) {
	flood := buildConnflood(t)
	forEachUser(t, func(t *testing.T, w *world) {
		gate := filepath.Join(w.ws, "flood.gate")
		limited := make(chan error, 1)
		go func() { limited <- limitRunner(w, gate) }()
		flags := []string{"--add-host", "mock-model.test=127.0.0.1", "--allow-host", "mock-model.test:" + w.port, "--allow-host", "127.0.0.1:" + w.port}
		// The request comes after the flood has sat idle for more than a
		// moment, as a model call would.
		o := w.run(t, flags, nil, flood, fmt.Sprint(floodConns), "1500ms", "http://mock-model.test:"+w.port+"/", gate)
		if err := <-limited; err != nil {
			t.Fatal(err)
		}
		t.Log(o.stdout)
		var status, ms, opened, closed int
		if _, err := fmt.Sscanf(o.stdout, "ok status=%d ms=%d opened=%d closed=%d", &status, &ms, &opened, &closed); err != nil {
			t.Fatalf("the request through the flooded proxy failed: %q (stderr %s)", o.stdout, o.stderr)
		}
		if status != 200 || ms > 2000 {
			t.Errorf("request through the flooded proxy: %d after %d ms, want 200 at once", status, ms)
		}
		if opened != floodConns {
			t.Errorf("the flood opened %d connections, want %d", opened, floodConns)
		}
		// Those over the cap are closed, and one more to make room.
		if want := floodConns - proxy.DefaultMaxConns + 1; closed < want {
			t.Errorf("the proxy closed %d of the %d idle connections, want at least %d", closed, floodConns, want)
		}
		// The flood named no destination: the request is the only event.
		if len(o.net) != 1 || !o.net[0].Allowed || o.net[0].Host != "mock-model.test" {
			t.Errorf("network events %+v, want the one allowed request", o.net)
		}
	})
}

// limitRunner waits for the sandbox to be up (the flood's GATE.ready) and
// the runner's pid (w.run writes it), lowers the runner's descriptor limit
// to runnerNofile and opens the gate.
func limitRunner(w *world, gate string) error {
	pidFile := filepath.Join(w.ws, "runner.pid")
	var pid []byte
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, errReady := os.Stat(gate + ".ready")
		var errPid error
		pid, errPid = os.ReadFile(pidFile)
		if errReady == nil && errPid == nil && len(pid) > 0 {
			break
		}
		if time.Now().After(end) {
			return fmt.Errorf("the sandbox did not start the flood")
		}
	}
	// As the runner's own user: changing another user's limits takes
	// CAP_SYS_RESOURCE, which the test's root may not have.
	argv := append(append([]string{}, w.u.prefix...), "prlimit", "--pid", strings.TrimSpace(string(pid)), "--nofile="+runnerNofile+":"+runnerNofile)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("prlimit: %v %s", err, out)
	}
	return os.WriteFile(gate, nil, 0o644)
}
