package proxy

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testCA issues certificates for tests: the upstream's, and the
// interceptor's for the client.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

func (c *testCA) leaf(t *testing.T, host string) *tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// fakeInterceptor claims one host:port, swaps a header value, records what
// it saw and can refuse.
type fakeInterceptor struct {
	host    string
	port    int
	certs   *testCA
	roots   *x509.CertPool
	refusal *Refusal
	// plain declares the destination as speaking plain HTTP.
	plain bool
	// refuseAnswer, when set, refuses every upstream answer.
	refuseAnswer *Refusal
	mu           sync.Mutex
	seen         []string // request paths
	t            *testing.T
}

func (f *fakeInterceptor) Claims(host string, port int) bool { return host == f.host && port == f.port }
func (f *fakeInterceptor) Destinations() []Destination {
	return []Destination{{Host: f.host, Port: f.port}}
}
func (f *fakeInterceptor) PlainHTTP(host string, port int) bool {
	return f.plain && f.Claims(host, port)
}
func (f *fakeInterceptor) Certificate(host string) (*tls.Certificate, error) {
	return f.certs.leaf(f.t, host), nil
}
func (f *fakeInterceptor) Roots() *x509.CertPool { return f.roots }
func (f *fakeInterceptor) Request(host string, port int, r *http.Request) *Refusal {
	f.mu.Lock()
	f.seen = append(f.seen, r.URL.Path)
	f.mu.Unlock()
	if f.refusal != nil {
		return f.refusal
	}
	if r.Header.Get("X-Api-Key") == "stand-in" {
		r.Header.Set("X-Api-Key", "real")
	}
	return nil
}
func (f *fakeInterceptor) RedactText(host string, port int, r *http.Request, text string) string {
	return strings.ReplaceAll(text, "real", "stand-in")
}
func (f *fakeInterceptor) Response(host string, port int, r *http.Request, resp *http.Response) *Refusal {
	resp.Header.Set("X-Intercepted", "yes")
	if f.refuseAnswer != nil {
		return f.refuseAnswer
	}
	return nil
}

// interceptWorld is an upstream (TLS or plain) that echoes the key it got,
// a proxy whose interceptor claims it, and a client through the proxy.
type interceptWorld struct {
	proxyURL string
	upstream string // host:port as the client names it
	other    string // another upstream, not intercepted
	port     int
	icpt     *fakeInterceptor
	hits     atomic.Int32 // requests the upstream received
	mu       sync.Mutex
	access   []Access // what the proxy reported
}

func (w *interceptWorld) reported() []Access {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Access{}, w.access...)
}

func newInterceptWorld(t *testing.T, useTLS bool) *interceptWorld {
	return newInterceptWorldServing(t, useTLS, func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, "key=%s host=%s", r.Header.Get("X-Api-Key"), r.Host)
	})
}

// newInterceptWorldServing is an interceptWorld whose upstreams (the
// intercepted one and the other) answer with serve.
func newInterceptWorldServing(t *testing.T, useTLS bool, serve http.HandlerFunc) *interceptWorld {
	t.Helper()
	upstreamCA := newTestCA(t)
	w := &interceptWorld{}
	h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.hits.Add(1)
		serve(rw, r)
	})
	var up *httptest.Server
	if useTLS {
		up = httptest.NewUnstartedServer(h)
		up.TLS = &tls.Config{Certificates: []tls.Certificate{*upstreamCA.leaf(t, "api.test")}}
		up.StartTLS()
	} else {
		up = httptest.NewServer(h)
	}
	t.Cleanup(up.Close)
	_, portStr, _ := net.SplitHostPort(up.Listener.Addr().String())
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatal(err)
	}
	icpt := &fakeInterceptor{host: "api.test", port: port, certs: newTestCA(t), roots: upstreamCA.pool, plain: !useTLS, t: t}
	// other.test is another service on the same machine, and also a name
	// for api.test's address.
	other := httptest.NewServer(h)
	t.Cleanup(other.Close)
	_, otherPort, _ := net.SplitHostPort(other.Listener.Addr().String())
	p, _ := NewPolicy(ModeCustom, []string{"api.test:" + portStr, "127.0.0.1:" + portStr, "other.test:" + portStr,
		"other.test:" + otherPort, "127.0.0.1:" + otherPort})
	res := &HostResolver{Static: map[string][]netip.Addr{"api.test": {netip.MustParseAddr("127.0.0.1")}, "other.test": {netip.MustParseAddr("127.0.0.1")}}}
	w.upstream, w.port, w.icpt, w.other = "api.test:"+portStr, port, icpt, "other.test:"+otherPort
	srv := &Server{Policy: p, Resolver: res, Intercept: icpt, OnAccess: func(a Access) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.access = append(w.access, a)
	}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	w.proxyURL = "http://" + l.Addr().String()
	return w
}

// connect opens a CONNECT tunnel to target through the proxy.
func (w *interceptWorld) connect(t *testing.T, target string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(w.proxyURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %v %v", target, resp, err)
	}
	return c
}

func getVia(t *testing.T, c net.Conn, host string) string {
	t.Helper()
	fmt.Fprintf(c, "GET /v1/x HTTP/1.1\r\nHost: %s\r\nX-Api-Key: stand-in\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s %s", resp.StatusCode, resp.Header.Get("X-Intercepted"), b)
}

func TestInterceptTLSInsideConnect(t *testing.T) {
	w := newInterceptWorld(t, true)
	c := w.connect(t, w.upstream)
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: "api.test", RootCAs: w.icpt.certs.pool, NextProtos: []string{"h2", "http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake with the interceptor's certificate: %v", err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Errorf("ALPN %q: the proxy relays HTTP/1.1", p)
	}
	// Two requests on one connection, the key swapped in both; the Host
	// header cannot steer the request elsewhere.
	for _, host := range []string{"api.test", "metadata.google.internal"} {
		if got := getVia(t, tc, host); got != "200 yes key=real host="+w.upstream {
			t.Errorf("Host %s: %q", host, got)
		}
	}
}

func TestInterceptPlainHTTPInsideConnect(t *testing.T) {
	w := newInterceptWorld(t, false)
	c := w.connect(t, w.upstream)
	defer c.Close()
	if got := getVia(t, c, "api.test"); got != "200 yes key=real host="+w.upstream {
		t.Errorf("plain HTTP inside CONNECT (as pi sends it): %q", got)
	}
}

func TestInterceptAbsoluteForm(t *testing.T) {
	w := newInterceptWorld(t, false)
	proxyURL, _ := neturl.Parse(w.proxyURL)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	req, _ := http.NewRequest("GET", "http://"+w.upstream+"/v1/x", nil)
	req.Header.Set("X-Api-Key", "stand-in")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "key=real host="+w.upstream || resp.Header.Get("X-Intercepted") != "yes" {
		t.Errorf("absolute-form: %s %v", b, resp.Header)
	}
	// Another allowed host is not intercepted: the stand-in passes.
	req, _ = http.NewRequest("GET", "http://"+w.other+"/v1/x", nil)
	req.Header.Set("X-Api-Key", "stand-in")
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(b), "key=stand-in") || resp.Header.Get("X-Intercepted") != "" {
		t.Errorf("a host that is not claimed was intercepted: %s", b)
	}
	// Another name of the intercepted destination's address and port is
	// refused: it would reach the same service past the interceptor.
	hits := w.hits.Load()
	for _, alias := range []string{"other.test", "127.0.0.1", "[::ffff:127.0.0.1]"} {
		req, _ = http.NewRequest("GET", fmt.Sprintf("http://%s:%d/v1/x", alias, w.port), nil)
		resp, err = client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(ReasonHeader) != ReasonCredentialAddress {
			t.Errorf("%s, the intercepted destination's address: %d %q", alias, resp.StatusCode, resp.Header.Get(ReasonHeader))
		}
	}
	if w.hits.Load() != hits {
		t.Errorf("the upstream was reached under another name")
	}
}

func TestInterceptRefusesOtherTLSNames(t *testing.T) {
	w := newInterceptWorld(t, true)
	c := w.connect(t, w.upstream)
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: "bank.test", RootCAs: w.icpt.certs.pool})
	if err := tc.Handshake(); err == nil {
		t.Errorf("a tunnel to api.test got a certificate for bank.test")
	}
}

func TestInterceptVerifiesTheUpstream(t *testing.T) {
	w := newInterceptWorld(t, true)
	w.icpt.roots = newTestCA(t).pool // not the upstream's CA
	c := w.connect(t, w.upstream)
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: "api.test", RootCAs: w.icpt.certs.pool})
	if got := getVia(t, tc, "api.test"); !strings.HasPrefix(got, "502") || strings.Contains(got, "key=") {
		t.Errorf("an upstream with an unknown certificate: %q", got)
	}
}

// TestInterceptRefusal: a request the interceptor refuses never goes
// upstream; the client gets the refusal's status (403 unless it names
// one), and the refusal is reported unless it is quiet.
func TestInterceptRefusal(t *testing.T) {
	for _, tt := range []struct {
		name   string
		ref    Refusal
		status string
	}{
		{"spend limit", Refusal{Reason: "token_limit", Detail: "token_limit: --max-tokens 10 reached", Status: 429, Quiet: true}, "429"},
		{"unmetered", Refusal{Reason: ReasonUnmetered, Detail: "the meter cannot count it"}, "403"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newInterceptWorld(t, false)
			w.icpt.refusal = &tt.ref
			c := w.connect(t, w.upstream)
			defer c.Close()
			if got := getVia(t, c, "api.test"); !strings.HasPrefix(got, tt.status) || !strings.Contains(got, tt.ref.Detail) || strings.Contains(got, "key=") {
				t.Errorf("refused request: %q", got)
			}
			if n := w.hits.Load(); n != 0 {
				t.Errorf("a refused request went upstream")
			}
			reported := false
			for _, a := range w.reported() {
				reported = reported || a == (Access{Host: "api.test", Port: w.port, Reason: tt.ref.Reason})
			}
			if reported == tt.ref.Quiet {
				t.Errorf("reported %v (quiet %v)", w.reported(), tt.ref.Quiet)
			}
		})
	}
}

// TestInterceptAnswerRefusal: an answer the interceptor refuses (one it
// cannot read to take the key out) never reaches the client: 502 with the
// reason, reported as a refused decision.
func TestInterceptAnswerRefusal(t *testing.T) {
	w := newInterceptWorld(t, true)
	w.icpt.refuseAnswer = &Refusal{Reason: ReasonUnsupportedEncoding, Detail: "cannot read it"}
	c := w.connect(t, w.upstream)
	defer c.Close()
	tc := tls.Client(c, &tls.Config{ServerName: "api.test", RootCAs: w.icpt.certs.pool})
	fmt.Fprintf(tc, "GET /v1/x HTTP/1.1\r\nHost: api.test\r\nX-Api-Key: stand-in\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || resp.Header.Get(ReasonHeader) != ReasonUnsupportedEncoding || strings.Contains(string(b), "key=") ||
		!strings.Contains(string(b), "cannot read it") {
		t.Errorf("refused answer: %d %v %q", resp.StatusCode, resp.Header, b)
	}
	want := Access{Host: "api.test", Port: w.port, Reason: ReasonUnsupportedEncoding}
	if got := w.reported(); len(got) != 2 || got[1] != want {
		t.Errorf("reported %+v, want the allowed CONNECT and %+v", got, want)
	}
}

// TestInterceptRefusesPlainHTTPWithoutOptIn: plain HTTP to a claimed
// destination that was not declared as speaking it (absolute-form, or
// inside a CONNECT tunnel) never goes upstream: the key would travel
// unencrypted. 403 tls_required, reported.
func TestInterceptRefusesPlainHTTPWithoutOptIn(t *testing.T) {
	w := newInterceptWorld(t, false)
	w.icpt.plain = false
	c := w.connect(t, w.upstream)
	defer c.Close()
	if got := getVia(t, c, "api.test"); !strings.HasPrefix(got, "403") || !strings.Contains(got, "tls_required") {
		t.Errorf("plain HTTP inside CONNECT: %q", got)
	}
	proxyURL, _ := neturl.Parse(w.proxyURL)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	req, _ := http.NewRequest("GET", "http://"+w.upstream+"/v1/x", nil)
	req.Header.Set("X-Api-Key", "stand-in")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get(ReasonHeader) != ReasonTLSRequired {
		t.Errorf("absolute-form: %d %v", resp.StatusCode, resp.Header)
	}
	if n := w.hits.Load(); n != 0 {
		t.Errorf("the upstream received %d plain-HTTP requests", n)
	}
	w.icpt.mu.Lock()
	if len(w.icpt.seen) != 0 {
		t.Errorf("the interceptor put the key into %v", w.icpt.seen)
	}
	w.icpt.mu.Unlock()
	refused := 0
	for _, a := range w.reported() {
		if a == (Access{Host: "api.test", Port: w.port, Reason: ReasonTLSRequired}) {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("reported %v: want one tls_required", w.reported())
	}
}
