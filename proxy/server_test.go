package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startProxy serves a policy on a loopback listener and records accesses.
func startProxy(t *testing.T, mode string, allow []string, static map[string][]netip.Addr) (string, func() []Access) {
	t.Helper()
	return serve(t, &Server{Policy: policy(t, mode, allow), Resolver: &HostResolver{Static: static, HostsFile: "/nonexistent"}})
}

func policy(t *testing.T, mode string, allow []string) *Policy {
	t.Helper()
	p, err := NewPolicy(mode, allow)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// serve runs s on a loopback listener, recording its accesses.
func serve(t *testing.T, s *Server) (string, func() []Access) {
	t.Helper()
	var mu sync.Mutex
	var seen []Access
	s.OnAccess = func(a Access) { mu.Lock(); seen = append(seen, a); mu.Unlock() }
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	return l.Addr().String(), func() []Access { mu.Lock(); defer mu.Unlock(); return append([]Access(nil), seen...) }
}

func backend(t *testing.T) (*httptest.Server, int) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host=%s path=%s", r.Host, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return srv, n
}

func viaProxy(proxyAddr string) *http.Client {
	u, _ := url.Parse("http://" + proxyAddr)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
}

// connect opens a CONNECT tunnel by hand and returns the status line.
func connect(t *testing.T, proxyAddr, target string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	status, _ := br.ReadString('\n')
	for {
		l, err := br.ReadString('\n')
		if err != nil || l == "\r\n" {
			break
		}
	}
	return c, br, strings.TrimSpace(status)
}

func TestProxyAllowsListedHostOverHTTPAndConnect(t *testing.T) {
	_, port := backend(t)
	static := map[string][]netip.Addr{"mock-model.test": addrs("127.0.0.1")}
	allow := []string{fmt.Sprintf("mock-model.test:%d", port), fmt.Sprintf("127.0.0.1:%d", port)}
	addr, accesses := startProxy(t, "", allow, static)

	resp, err := viaProxy(addr).Get(fmt.Sprintf("http://mock-model.test:%d/hello", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != fmt.Sprintf("host=mock-model.test:%d path=/hello", port) {
		t.Errorf("absolute-form: %d %q", resp.StatusCode, body)
	}

	c, br, status := connect(t, addr, fmt.Sprintf("mock-model.test:%d", port))
	defer c.Close()
	if !strings.Contains(status, "200") {
		t.Fatalf("CONNECT status %q", status)
	}
	fmt.Fprintf(c, "GET /tunnel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	out, _ := io.ReadAll(br)
	if !strings.Contains(string(out), "path=/tunnel") {
		t.Errorf("tunnel answer %q", out)
	}
	if got := accesses(); len(got) != 1 || !got[0].Allowed || got[0].Host != "mock-model.test" {
		t.Errorf("accesses = %+v, want one allowed mock-model.test (reported once)", got)
	}
}

func TestProxyRefusals(t *testing.T) {
	_, port := backend(t)
	static := map[string][]netip.Addr{"evil.test": addrs("127.0.0.1"), "ok.test": addrs("127.0.0.1")}
	allow := []string{"evil.test", fmt.Sprintf("evil.test:%d", port)}
	addr, accesses := startProxy(t, "", allow, static)
	tests := []struct {
		target, reason string
	}{
		{"other.test:443", "not_allowed"},
		{fmt.Sprintf("evil.test:%d", port), "private_address"},
		{fmt.Sprintf("127.0.0.1:%d", port), "not_allowed"},
	}
	for _, tt := range tests {
		c, _, status := connect(t, addr, tt.target)
		c.Close()
		if !strings.Contains(status, "403") {
			t.Errorf("CONNECT %s: %q, want 403", tt.target, status)
		}
	}
	resp, err := viaProxy(addr).Get("http://other.test/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get(ReasonHeader) != "not_allowed" {
		t.Errorf("absolute-form refusal: %d %q", resp.StatusCode, resp.Header.Get(ReasonHeader))
	}
	got := accesses()
	reasons := map[string]string{}
	for _, a := range got {
		if a.Allowed {
			t.Errorf("unexpected allowed access %+v", a)
		}
		reasons[fmt.Sprintf("%s:%d", a.Host, a.Port)] = a.Reason
	}
	for _, tt := range tests {
		if reasons[tt.target] != tt.reason {
			t.Errorf("%s reported %q, want %q", tt.target, reasons[tt.target], tt.reason)
		}
	}
}

func TestProxyIgnoresSpoofedHostHeader(t *testing.T) {
	_, port := backend(t)
	static := map[string][]netip.Addr{"good.test": addrs("127.0.0.1")}
	allow := []string{fmt.Sprintf("good.test:%d", port), fmt.Sprintf("127.0.0.1:%d", port)}
	addr, _ := startProxy(t, "", allow, static)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The request line names the allowed host; the Host header names a
	// refused one. The proxy must go where the request line says and send
	// that authority upstream.
	fmt.Fprintf(c, "GET http://good.test:%d/x HTTP/1.1\r\nHost: metadata.google.internal\r\nConnection: close\r\n\r\n", port)
	out, _ := io.ReadAll(c)
	if !strings.Contains(string(out), fmt.Sprintf("host=good.test:%d", port)) {
		t.Errorf("upstream saw %q", out)
	}
}

func TestProxyRejectsOriginForm(t *testing.T) {
	addr, _ := startProxy(t, "full", nil, nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /latest/meta-data HTTP/1.1\r\nHost: 169.254.169.254\r\nConnection: close\r\n\r\n")
	out, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(out), "HTTP/1.1 400") {
		t.Errorf("origin-form request answered %q", strings.SplitN(string(out), "\n", 2)[0])
	}
}

// roundTrip sends one raw request on a new connection and reads the answer
// (not for a successful CONNECT, whose answer has no end).
func roundTrip(t *testing.T, proxyAddr, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

func TestProxyRefusesMalformedNamesWith400AndNoEvent(t *testing.T) {
	// Each would match *.example.com by suffix, and each is in the static
	// table, so only the name check stands between it and a dial.
	names := []string{"..example.com", "evil.com;.example.com", "a..example.com", "-lead.example.com",
		"trail-.example.com", "a=b.example.com", "a!b.example.com", "bücher.example.com",
		strings.Repeat("x", 64) + ".example.com", strings.Repeat("abcdefghi.", 25) + "example.com"}
	_, port := backend(t)
	static := map[string][]netip.Addr{}
	for _, n := range names {
		static[n] = addrs("127.0.0.1")
	}
	addr, accesses := startProxy(t, "", []string{fmt.Sprintf("*.example.com:%d", port), fmt.Sprintf("127.0.0.1:%d", port)}, static)
	for _, name := range names {
		target := fmt.Sprintf("%s:%d", name, port)
		for _, raw := range []string{
			fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", target),
			fmt.Sprintf("GET http://%s/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", target),
		} {
			if resp, body := roundTrip(t, addr, raw); resp.StatusCode != 400 || !strings.HasPrefix(body, "agentrun proxy:") {
				t.Errorf("%q: %d %q, want the proxy's 400", raw, resp.StatusCode, body)
			}
		}
	}
	if got := accesses(); len(got) != 0 {
		t.Errorf("malformed names were reported: %+v", got)
	}
	// A well-formed name under the same rule still works.
	static["ok_1.example.com"] = addrs("127.0.0.1")
	if resp, body := roundTrip(t, addr, fmt.Sprintf("GET http://ok_1.example.com:%d/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", port)); resp.StatusCode != 200 {
		t.Errorf("a valid name: %d %q", resp.StatusCode, body)
	}
}

func TestProxyReportsUnresolvableNamesTruthfully(t *testing.T) {
	for _, mode := range []string{"full", "custom"} {
		t.Run(mode, func(t *testing.T) {
			var allow []string
			if mode == "custom" {
				allow = []string{"*.example.com"}
			}
			// No system DNS: the static resolver knows no name at all.
			addr, accesses := serve(t, &Server{Policy: policy(t, "", allow), Resolver: staticResolver{}})
			for _, raw := range []string{
				"CONNECT nowhere.example.com:443 HTTP/1.1\r\nHost: nowhere.example.com:443\r\n\r\n",
				"GET http://nowhere.example.com/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			} {
				resp, body := roundTrip(t, addr, raw)
				if resp.StatusCode != 502 || resp.Header.Get(ReasonHeader) != ReasonUnresolvable {
					t.Errorf("%q: %d %s=%q %q, want 502 unresolvable", raw, resp.StatusCode, ReasonHeader, resp.Header.Get(ReasonHeader), body)
				}
			}
			want := []Access{
				{Host: "nowhere.example.com", Port: 443, Reason: ReasonUnresolvable},
				{Host: "nowhere.example.com", Port: 80, Reason: ReasonUnresolvable},
			}
			if got := accesses(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("accesses %+v, want %+v", got, want)
			}
		})
	}
}

func TestProxyRefusesEmbeddedPrivateAddresses(t *testing.T) {
	_, port := backend(t)
	static := map[string][]netip.Addr{"translated.test": addrs("::ffff:0:7f00:1")}
	addr, accesses := startProxy(t, "full", nil, static)
	targets := []string{"[::ffff:0:7f00:1]", "[::ffff:0:a9fe:a9fe]", "[::ffff:0:a00:1]", "[64:ff9b:1::7f00:1]", "translated.test"}
	for _, host := range targets {
		target := fmt.Sprintf("%s:%d", host, port)
		c, _, status := connect(t, addr, target)
		c.Close()
		if !strings.Contains(status, " 403 ") {
			t.Errorf("CONNECT %s: %q, want 403", target, status)
		}
	}
	got := accesses()
	if len(got) != len(targets) {
		t.Fatalf("accesses %+v, want one per target", got)
	}
	for _, a := range got {
		if a.Allowed || a.Reason != "private_address" {
			t.Errorf("%+v, want a private_address refusal", a)
		}
	}
}

func TestProxyAddsNoUserAgent(t *testing.T) {
	seen := make(chan []string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Values("User-Agent")
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	addr, _ := startProxy(t, "", []string{"ua.test:" + port, "127.0.0.1:" + port}, map[string][]netip.Addr{"ua.test": addrs("127.0.0.1")})
	tests := []struct {
		header string
		want   string
	}{
		{"", "[]"},
		{"User-Agent: claude-cli/2.1\r\n", "[claude-cli/2.1]"},
	}
	for _, tt := range tests {
		resp, _ := roundTrip(t, addr, fmt.Sprintf("GET http://ua.test:%s/ HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n", port, tt.header))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if got := fmt.Sprint(<-seen); got != tt.want {
			t.Errorf("client sent %q: upstream saw User-Agent %s, want %s", tt.header, got, tt.want)
		}
	}
}
