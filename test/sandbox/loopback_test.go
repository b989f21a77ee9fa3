package sandbox

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/events"
)

// TestLoopbackOpensExactlyOnePort: --allow-host 127.0.0.1:PORT and
// localhost:PORT (a model on this machine) let the agent reach exactly
// that port of the host's loopback through the proxy: no other port of
// it, by address, by name, in any spelling of the address, nor another
// loopback or private address, nor the host's own address; and nothing
// directly. As root and as uid 65534.
func TestLoopbackOpensExactlyOnePort(t *testing.T) {
	// Another server, on every address of the host: what the agent must
	// not reach.
	other := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprint(rw, "the other server")
	}))
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	other.Listener = l
	other.Start()
	defer other.Close()
	_, otherPort, _ := net.SplitHostPort(l.Addr().String())
	var own string // one of the host's own addresses, when it has one
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
				own = n.IP.String()
				break
			}
		}
	}
	forEachUser(t, func(t *testing.T, w *world) {
		flags := []string{"--allow-host", "127.0.0.1:" + w.port, "--allow-host", "localhost:" + w.port,
			// A name routed to the loopback, allowed on the other port.
			"--add-host", "lo.test=127.0.0.1", "--allow-host", "lo.test:" + otherPort}
		for _, url := range []string{"http://127.0.0.1:" + w.port + "/", "http://localhost:" + w.port + "/"} {
			for _, how := range [][]string{nil, {"-p"}} { // absolute-form, then CONNECT
				o := w.run(t, flags, []string{}, curlArgs(append(how, url)...)...)
				if !strings.HasPrefix(o.stdout, "hello from ") || !strings.HasSuffix(o.stdout, "\n200") {
					t.Errorf("curl %v %s: %q (stderr %s)", how, url, o.stdout, o.stderr)
				}
				if len(o.net) != 1 || !o.net[0].Allowed {
					t.Errorf("curl %v %s: network events %+v", how, url, o.net)
				}
			}
		}
		refused := map[string]string{
			"127.0.0.1:" + otherPort:          events.ReasonNotAllowed,
			"localhost:" + otherPort:          events.ReasonNotAllowed,
			"[::1]:" + otherPort:              events.ReasonNotAllowed,
			"127.0.0.2:" + w.port:             events.ReasonNotAllowed,
			"0.0.0.0:" + otherPort:            events.ReasonNotAllowed,
			"0.0.0.0:" + w.port:               events.ReasonNotAllowed,
			"2130706433:" + otherPort:         events.ReasonNotAllowed,
			"127.1:" + otherPort:              events.ReasonNotAllowed,
			"[::ffff:127.0.0.1]:" + otherPort: events.ReasonNotAllowed,
			"[64:ff9b::7f00:1]:" + w.port:     events.ReasonNotAllowed,
			"10.0.0.1:" + w.port:              events.ReasonNotAllowed,
			"169.254.169.254:80":              events.ReasonNotAllowed,
			"lo.test:" + otherPort:            events.ReasonPrivateAddress,
		}
		if own != "" {
			refused[own+":"+otherPort] = events.ReasonNotAllowed
			refused[own+":"+w.port] = events.ReasonNotAllowed
		}
		for target, reason := range refused {
			o := w.run(t, flags, nil, probe, "connect", target)
			if !strings.Contains(o.stdout, " 403 ") {
				t.Errorf("CONNECT %s: %q, want 403", target, o.stdout)
			}
			if len(o.net) != 1 || o.net[0].Allowed || o.net[0].Reason == nil || *o.net[0].Reason != reason {
				t.Errorf("CONNECT %s: events %+v, want one refusal %s", target, o.net, reason)
			}
		}
		// Directly, the loopback is the sandbox's own: empty.
		for _, target := range []string{"127.0.0.1:" + w.port, "127.0.0.1:" + otherPort} {
			if o := w.run(t, flags, nil, probe, "tcp", target); !strings.HasPrefix(o.stdout, "denied:") {
				t.Errorf("a direct connection to %s: %q", target, o.stdout)
			}
		}
		// Without the entry, the full network reaches no loopback port.
		for _, target := range []string{"127.0.0.1:" + w.port, "localhost:" + w.port} {
			o := w.run(t, []string{"--network", "full"}, nil, probe, "connect", target)
			if !strings.Contains(o.stdout, " 403 ") || len(o.net) != 1 || o.net[0].Reason == nil || *o.net[0].Reason != events.ReasonPrivateAddress {
				t.Errorf("CONNECT %s under --network full: %q, events %+v, want a private_address refusal", target, o.stdout, o.net)
			}
		}
	})
}
