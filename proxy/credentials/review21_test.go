package credentials

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/proxy"
)

// TestReviewCredentialAddressSpellings (review of issue 21): the proxy's
// policy reads an IP literal in every form a C resolver accepts
// (2130706433, 127.1, 0x7f000001) as the address it is, and dials it; the
// interceptor must then see the request too, as it sees one to
// 127.0.0.1, or the agent reaches a credential destination past the
// interceptor: no meter (and so no --max-tokens refusal of an unmetered
// call), no scrubbing, whatever the destination answers. Each spelling
// must reach the upstream with the real key put in (intercepted), or not
// reach it at all.
func TestReviewCredentialAddressSpellings(t *testing.T) {
	const key = "sk-review-0123456789abcdef"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	var mu sync.Mutex
	var got []string // the X-Api-Key values the upstream received
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				mu.Lock()
				got = append(got, req.Header.Get("X-Api-Key"))
				mu.Unlock()
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			}()
		}
	}()
	cred, err := Parse("KEY=http://127.0.0.1:"+port, lookup(map[string]string{"KEY": key}))
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewSet([]*Credential{cred})
	if err != nil {
		t.Fatal(err)
	}
	p, err := proxy.NewPolicy(proxy.ModeCustom, []string{"127.0.0.1:" + port})
	if err != nil {
		t.Fatal(err)
	}
	srv := &proxy.Server{Policy: p, Resolver: &proxy.HostResolver{}, Intercept: &Interceptor{Set: set}, TunnelIdleTimeout: 5 * time.Second}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(pl)
	defer srv.Close()

	for _, host := range []string{"127.0.0.1", "2130706433", "127.1", "0x7f000001", "0177.0.0.1", "[::ffff:127.0.0.1]"} {
		mu.Lock()
		got = nil
		mu.Unlock()
		c, err := net.Dial("tcp", pl.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET http://%s:%s/v1/models HTTP/1.1\r\nHost: %s:%s\r\nX-Api-Key: %s\r\nConnection: close\r\n\r\n", host, port, host, port, cred.StandIn)
		resp, _ := io.ReadAll(c)
		c.Close()
		mu.Lock()
		sent := append([]string{}, got...)
		mu.Unlock()
		status, _, _ := strings.Cut(string(resp), "\r\n")
		if len(sent) > 0 && sent[0] != key {
			t.Errorf("%s: the upstream was reached past the interceptor (it got %q, not the real key; the proxy answered %q)", host, sent[0], status)
		}
		if host == "127.0.0.1" && (len(sent) == 0 || sent[0] != key) {
			t.Fatalf("the plain spelling is not intercepted (%q, %q): the test proves nothing", sent, status)
		}
	}
}

// TestReviewCredentialDestinationByAddress (review of issue 21; not fixed):
// a credential destination named by a name that --add-host maps to a
// private address needs an --allow-host IP:PORT entry for that address
// (the runner refuses the run otherwise), and that entry lets the agent
// reach the same service by its address, which the interceptor does not
// claim: unmetered, unscrubbed, past --max-tokens. A request to the
// address of a credential destination on its port must be intercepted as
// that destination, or refused.
func TestReviewCredentialDestinationByAddress(t *testing.T) {
	const key = "sk-review-0123456789abcdef"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	reached := make(chan string, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				reached <- req.Header.Get("X-Api-Key")
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			}()
		}
	}()
	cred, err := Parse("KEY=http://gw.test:"+port, lookup(map[string]string{"KEY": key}))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := NewSet([]*Credential{cred})
	p, err := proxy.NewPolicy(proxy.ModeCustom, []string{"gw.test:" + port, "127.0.0.1:" + port})
	if err != nil {
		t.Fatal(err)
	}
	res := &proxy.HostResolver{Static: map[string][]netip.Addr{"gw.test": {netip.MustParseAddr("127.0.0.1")}}}
	srv := &proxy.Server{Policy: p, Resolver: res, Intercept: &Interceptor{Set: set}, TunnelIdleTimeout: 5 * time.Second}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(pl)
	defer srv.Close()
	for _, host := range []string{"gw.test", "127.0.0.1"} {
		c, err := net.Dial("tcp", pl.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET http://%s:%s/v1/models HTTP/1.1\r\nHost: %s:%s\r\nX-Api-Key: %s\r\nConnection: close\r\n\r\n", host, port, host, port, cred.StandIn)
		_, _ = io.ReadAll(c) // the answer does not matter: what reached the upstream does
		c.Close()
		select {
		case got := <-reached:
			if got != key {
				t.Errorf("%s: the credential destination was reached past the interceptor (it got %q)", host, got)
			}
		case <-time.After(time.Second):
			if host == "gw.test" {
				t.Fatal("the credential's own name did not reach the upstream: the test proves nothing")
			}
		}
	}
}

// TestReviewCredentialDestinationAliases (review of issue 21): every other
// way to name a credential destination's service (its address in any
// spelling, by CONNECT or in an absolute URL whatever the Host header
// says, another --add-host name, a hosts-file name, a DNS name that
// resolves to it) is refused, for a destination declared by a name that
// --add-host maps, by a name the hosts file maps, and by its address; its
// own name still gets the real key.
func TestReviewCredentialDestinationAliases(t *testing.T) {
	const key = "sk-review-0123456789abcdef"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	reached := make(chan string, 64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				reached <- req.Header.Get("X-Api-Key")
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			}()
		}
	}()
	hosts := t.TempDir() + "/hosts"
	if err := os.WriteFile(hosts, []byte("127.0.0.1 hosts.test alias-in-hosts.test\n::ffff:127.0.0.1 mapped6.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	local := netip.MustParseAddr("127.0.0.1")
	res := &proxy.HostResolver{HostsFile: hosts, Static: map[string][]netip.Addr{"gw.test": {local}, "other.test": {local}}}
	aliases := []string{"127.0.0.1", "2130706433", "127.1", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "other.test", "alias-in-hosts.test", "mapped6.test", "localhost"}
	for _, own := range []string{"gw.test", "hosts.test", "127.0.0.1"} {
		t.Run(own, func(t *testing.T) {
			cred, err := Parse("KEY=http://"+own+":"+port, lookup(map[string]string{"KEY": key}))
			if err != nil {
				t.Fatal(err)
			}
			set, _ := NewSet([]*Credential{cred})
			allow := []string{"127.0.0.1:" + port, "*.test:" + port, "localhost:" + port}
			p, err := proxy.NewPolicy(proxy.ModeCustom, allow)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var reasons []string
			srv := &proxy.Server{Policy: p, Resolver: res, Intercept: &Interceptor{Set: set}, TunnelIdleTimeout: 5 * time.Second,
				OnAccess: func(a proxy.Access) { mu.Lock(); reasons = append(reasons, a.Host+" "+a.Reason); mu.Unlock() }}
			pl, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(pl)
			defer srv.Close()
			send := func(host, how string) string {
				c, err := net.Dial("tcp", pl.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				switch how {
				case "absolute":
					fmt.Fprintf(c, "GET http://%s:%s/v1/models HTTP/1.1\r\nHost: %s:%s\r\nX-Api-Key: %s\r\nConnection: close\r\n\r\n", host, port, own, port, cred.StandIn)
				case "connect":
					fmt.Fprintf(c, "CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: %s:%s\r\nX-Api-Key: %s\r\nConnection: close\r\n\r\n",
						host, port, host, port, own, port, cred.StandIn)
				}
				b, _ := io.ReadAll(c)
				return string(b)
			}
			for _, how := range []string{"absolute", "connect"} {
				answer := send(own, how)
				select {
				case got := <-reached:
					if got != key {
						t.Fatalf("%s by its own name: the upstream got %q, not the key", how, got)
					}
				case <-time.After(2 * time.Second):
					t.Fatalf("%s by its own name did not reach the upstream: the test proves nothing (%q)", how, answer)
				}
				for _, alias := range aliases {
					if alias == own {
						continue
					}
					answer := send(alias, how)
					if strings.Contains(answer, "403 Forbidden") && strings.Contains(answer, proxy.ReasonCredentialAddress) {
						continue // refused before any dial
					}
					select {
					case got := <-reached:
						if got != key {
							t.Errorf("%s %s: the credential destination was reached past the interceptor (it got %q)", how, alias, got)
						}
					case <-time.After(time.Second):
						t.Errorf("%s %s: answer %q, want 403 %s", how, alias, answer, proxy.ReasonCredentialAddress)
					}
				}
			}
		})
	}
}
