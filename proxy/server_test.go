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
	"strings"
	"sync"
	"testing"
)

// startProxy serves a policy on a loopback listener and records accesses.
func startProxy(t *testing.T, mode string, allow []string, static map[string][]netip.Addr) (string, func() []Access) {
	t.Helper()
	p, err := NewPolicy(mode, allow)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []Access
	s := &Server{Policy: p, Resolver: &HostResolver{Static: static, HostsFile: "/nonexistent"},
		OnAccess: func(a Access) { mu.Lock(); seen = append(seen, a); mu.Unlock() }}
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
	var n int
	fmt.Sscan(port, &n)
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
