package credentials

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/proxy"
)

// The tests of this file put a real filter proxy with the credentials'
// interceptor between a client that plays the agent (it holds the
// stand-in) and an upstream on loopback that plays a credential host
// answering in some broken or unusual way with the real key in it (the
// key it was sent: an echo). Whatever the upstream does, no form of the
// key may reach the client: not in the answer's status line, header
// names or values, body or trailers, not in the proxy's own error text,
// and not in the log lines the proxy's HTTP stack writes.

// leakKeys are the real values the tests use: a plain one, and one with
// the characters Go's %q escapes (its parse errors quote what they
// could not read), so that an error that quotes the key is caught too.
var leakKeys = []string{"sk-leak-0123456789abcdef", `sk-leak-"quoted"\back-0123456789`}

// leakForm is one answer of the upstream, made from the key it got.
type leakForm struct {
	name   string
	answer func(key string) string
	// status is what the client must get: 502 where the answer is not
	// HTTP the proxy can pass on, the upstream's own status otherwise.
	status int
}

const okBody = "Content-Length: 2\r\n\r\nok"

var leakForms = []leakForm{
	{"a header line without a colon", func(k string) string { return "HTTP/1.1 200 OK\r\n" + k + "\r\n" + okBody }, 502},
	{"a status line that is the key", func(k string) string { return k + "\r\n\r\n" }, 502},
	{"the key as the HTTP version", func(k string) string { return k + " 200 OK\r\n" + okBody }, 502},
	{"the key as the status code", func(k string) string { return "HTTP/1.1 " + k + "\r\n" + okBody }, 502},
	{"the key as the reason phrase", func(k string) string { return "HTTP/1.1 200 " + k + "\r\n" + okBody }, 200},
	{"the key as Content-Length", func(k string) string { return "HTTP/1.1 200 OK\r\nContent-Length: " + k + "\r\n\r\nok" }, 502},
	{"two Content-Lengths, one the key", func(k string) string {
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: " + k + "\r\n\r\nok"
	}, 502},
	{"the key as Transfer-Encoding", func(k string) string { return "HTTP/1.1 200 OK\r\nTransfer-Encoding: " + k + "\r\n\r\nok" }, 502},
	{"two Transfer-Encodings, one the key", func(k string) string {
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: " + k + ", chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
	}, 502},
	// A key that a header name can hold comes through as a header (the
	// answer is passed on), another one as a malformed line (refused).
	{"the key as a header name", func(k string) string { return "HTTP/1.1 200 OK\r\n" + k + ": x\r\n" + okBody }, 0},
	{"the key in a header name", func(k string) string { return "HTTP/1.1 200 OK\r\nX-" + k + "-Echo: x\r\n" + okBody }, 0},
	{"the key as a header value", func(k string) string { return "HTTP/1.1 200 OK\r\nX-Echo: " + k + "\r\n" + okBody }, 200},
	{"the key in a trailer", func(k string) string {
		return "HTTP/1.1 200 OK\r\nTrailer: X-Echo\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Echo: " + k + "\r\n\r\n"
	}, 200},
	{"the key as a trailer's name", func(k string) string {
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n" + k + ": x\r\n\r\n"
	}, 200},
	{"a trailer line without a colon", func(k string) string {
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n" + k + "\r\n\r\n"
	}, 200},
	// The body breaks at its first chunk: the agent gets the status, then
	// the answer broken off too, never one that ended.
	{"a chunk size that is the key", func(k string) string {
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + k + "\r\nok\r\n0\r\n\r\n"
	}, 200},
	{"a 1xx answer carrying the key", func(k string) string {
		return "HTTP/1.1 103 Early Hints\r\nLink: <https://x.test/" + url.PathEscape(k) + ">\r\nX-Echo: " + k + "\r\n\r\nHTTP/1.1 200 OK\r\n" + okBody
	}, 200},
	{"a malformed 1xx answer", func(k string) string { return "HTTP/1.1 100 Continue\r\n" + k + "\r\n\r\nHTTP/1.1 200 OK\r\n" + okBody }, 502},
	{"a 101 nobody asked for", func(k string) string {
		return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + k + "\r\nConnection: Upgrade\r\nX-Echo: " + k + "\r\n\r\n" + k
	}, 0},
	{"a redirect to the key", func(k string) string {
		return "HTTP/1.1 302 Found\r\nLocation: https://evil.test/cb?k=" + url.QueryEscape(k) + "&raw=" + k + "\r\n" + okBody
	}, 302},
}

// leakHost is the credential host's name; it resolves to 127.0.0.1.
const leakHost = "api.leak.test"

// leakWorld is the proxy, an upstream whose answer a test picks, and the
// credential.
type leakWorld struct {
	proxyAddr string
	upstream  string // leakHost:PORT
	cred      *Credential
	authority *Authority
	tls       bool

	mu     sync.Mutex
	answer func(key string) string
	keys   []string // the keys the upstream received
	logs   *syncBuffer
}

// setAnswer sets what the upstream answers from now on (its connections
// read it under mu).
func (w *leakWorld) setAnswer(answer func(key string) string) {
	w.mu.Lock()
	w.answer = answer
	w.mu.Unlock()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newLeakWorld starts the upstream (TLS when useTLS, with a certificate
// from upstreamCert, else plain HTTP, declared so in the credential) and
// the proxy, with the process's log going to the world's buffer through
// the credentials' log redaction, as the runner sets it up.
func newLeakWorld(t *testing.T, key string, useTLS bool, upstreamCert func(key string) (*tls.Certificate, *x509.CertPool)) *leakWorld {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	_, port, _ := net.SplitHostPort(l.Addr().String())
	w := &leakWorld{upstream: leakHost + ":" + port, tls: useTLS, logs: &syncBuffer{}}
	dest := "http://" + w.upstream
	if useTLS {
		dest = w.upstream
	}
	w.cred, err = Parse("KEY="+dest, lookup(map[string]string{"KEY": key}))
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewSet([]*Credential{w.cred})
	if err != nil {
		t.Fatal(err)
	}
	var roots *x509.CertPool
	var cert *tls.Certificate
	if useTLS {
		cert, roots = upstreamCert(key)
		if w.authority, err = NewAuthority(set.Dests(), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	go w.serveUpstream(l, cert)

	prev := log.Writer()
	log.SetOutput(w.logs)
	release := set.RedactLogs()
	t.Cleanup(func() { release(); log.SetOutput(prev) })

	icpt := &Interceptor{Set: set, Authority: w.authority, RootCAs: roots}
	w.proxyAddr = serveProxy(t, icpt, 5*time.Second, w.upstream, l.Addr().String())
	return w
}

// serveProxy runs a filter proxy with icpt that allows the destinations
// (leakHost resolving to loopback) and returns its address.
func serveProxy(t *testing.T, icpt *Interceptor, idle time.Duration, allow ...string) string {
	t.Helper()
	p, err := proxy.NewPolicy(proxy.ModeCustom, allow)
	if err != nil {
		t.Fatal(err)
	}
	res := &proxy.HostResolver{Static: map[string][]netip.Addr{leakHost: {netip.MustParseAddr("127.0.0.1")}}}
	srv := &proxy.Server{Policy: p, Resolver: res, Intercept: icpt, TunnelIdleTimeout: idle}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(pl)
	t.Cleanup(func() { srv.Close() })
	return pl.Addr().String()
}

// tlsToProxy is TLS over a CONNECT tunnel to leakHost, the proxy's side
// verified against the run's authority, as the agent's CLI has it.
func tlsToProxy(t *testing.T, conn net.Conn, authority *Authority) *tls.Conn {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(authority.CertPEM())
	tc := tls.Client(conn, &tls.Config{ServerName: leakHost, RootCAs: pool})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS to the proxy: %v", err)
	}
	return tc
}

// serveUpstream answers each request with the world's current answer made
// from the key it carries, then closes the connection (most answers leave
// no way to find the next request).
func (w *leakWorld) serveUpstream(l net.Listener, cert *tls.Certificate) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			if w.tls && cert == nil {
				// A TLS destination that does not speak TLS: it answers
				// the handshake with the text, made from the key it
				// knows (from an earlier request).
				w.mu.Lock()
				answer := w.answer
				w.mu.Unlock()
				io.WriteString(c, answer(w.cred.value))
				return
			}
			if cert != nil {
				tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{*cert}})
				if tc.Handshake() != nil {
					return
				}
				c = tc
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err != nil {
				return
			}
			key := req.Header.Get("X-Api-Key")
			w.mu.Lock()
			w.keys = append(w.keys, key)
			answer := w.answer
			w.mu.Unlock()
			io.WriteString(c, answer(key))
			if cw, ok := c.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			// Let the proxy read everything before the connection goes.
			io.Copy(io.Discard, c)
		}()
	}
}

// ask sends one request as the agent does (through a CONNECT tunnel, in
// TLS to the run's authority for a TLS destination; or in absolute form)
// and returns every byte the proxy sent back, the CONNECT reply included.
func (w *leakWorld) ask(t *testing.T, absolute bool) string {
	return w.askWith(t, absolute, "Connection: close\r\n")
}

// askWith sends the request with extra header lines, reading what comes
// back until the proxy closes the connection or a few seconds passed.
func (w *leakWorld) askWith(t *testing.T, absolute bool, extra string) string {
	t.Helper()
	c, err := net.Dial("tcp", w.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	var all bytes.Buffer
	conn := c
	path := "/v1/models"
	if absolute {
		path = "http://" + w.upstream + path
	} else {
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", w.upstream, w.upstream)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("CONNECT: %v", err)
		}
		fmt.Fprintf(&all, "%s %s\r\n", resp.Proto, resp.Status)
		_ = resp.Header.Write(&all) // a bytes.Buffer does not fail
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %s", all.String())
		}
		conn = &readerConn{Conn: c, r: br}
		if w.tls {
			conn = tlsToProxy(t, conn, w.authority)
		}
	}
	if extra == "" {
		c.SetDeadline(time.Now().Add(2 * time.Second))
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nX-Api-Key: %s\r\n%s\r\n", path, w.upstream, w.cred.StandIn, extra)
	_, _ = io.Copy(&all, conn)
	return all.String()
}

type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// leaks names each form of the key found in text: the key itself in any
// letter case (header names are canonicalised), as Go's %q quotes it, and
// each encoded form the scrubbing knows.
func leaks(text string, c *Credential) []string {
	var out []string
	lower := strings.ToLower(text)
	if strings.Contains(lower, strings.ToLower(c.value)) {
		out = append(out, "the key")
	}
	if q := strconv.Quote(c.value); strings.Contains(text, q[1:len(q)-1]) {
		out = append(out, "the key quoted")
	}
	for _, f := range c.forms {
		if strings.Contains(text, f.Value) {
			out = append(out, "the key encoded as "+f.Value)
		}
	}
	return out
}

// TestProxyNeverWritesTheKey: each malformed or unusual answer of a
// credential host that carries the key reaches the agent without it,
// whether the proxy passes it on or refuses it with an error of its own,
// over plain HTTP and TLS, through a CONNECT tunnel and in absolute form;
// and the proxy's log lines hold no key either.
func TestProxyNeverWritesTheKey(t *testing.T) {
	ca := newLeakCA(t)
	for _, key := range leakKeys {
		for _, useTLS := range []bool{false, true} {
			w := newLeakWorld(t, key, useTLS, func(string) (*tls.Certificate, *x509.CertPool) { return ca.leaf(t, leakHost, leakHost), ca.pool })
			for _, f := range leakForms {
				for _, absolute := range []bool{false, true} {
					if absolute && useTLS {
						continue // absolute form is plain HTTP only
					}
					name := fmt.Sprintf("%s, key %q, tls %v, absolute %v", f.name, key, useTLS, absolute)
					w.mu.Lock()
					w.answer, w.keys = f.answer, nil
					w.mu.Unlock()
					got := w.ask(t, absolute)
					w.mu.Lock()
					sent := w.keys
					w.mu.Unlock()
					if len(sent) == 0 || sent[0] != key {
						t.Errorf("%s: the upstream did not get the real key (%q): the test proves nothing", name, sent)
						continue
					}
					if l := leaks(got, w.cred); len(l) > 0 {
						t.Errorf("%s: the agent got %s:\n%.600s", name, strings.Join(l, ", "), got)
					}
					if f.status != 0 && !strings.Contains(got, fmt.Sprintf("HTTP/1.1 %d ", f.status)) {
						t.Errorf("%s: want status %d:\n%.600s", name, f.status, got)
					}
					if f.status == 502 && !strings.Contains(got, "agentrun proxy: ") {
						t.Errorf("%s: the refusal does not say it is the proxy's:\n%.600s", name, got)
					}
				}
			}
			if l := leaks(w.logs.String(), w.cred); len(l) > 0 {
				t.Errorf("key %q, tls %v: the log holds %s:\n%s", key, useTLS, strings.Join(l, ", "), w.logs.String())
			}
		}
	}
}

// TestProxyErrorsStayUseful: scrubbing does not make the proxy's own
// refusals say nothing: a malformed answer is named as such, with the
// upstream, and the key's place shows the stand-in.
func TestProxyErrorsStayUseful(t *testing.T) {
	w := newLeakWorld(t, leakKeys[0], false, nil)
	w.setAnswer(leakForms[0].answer)
	got := w.ask(t, false)
	if !strings.Contains(got, "HTTP/1.1 502 ") || !strings.Contains(got, "agentrun proxy: the answer of "+w.upstream+" could not be read") ||
		!strings.Contains(got, "malformed MIME header: missing colon: \""+w.cred.StandIn) {
		t.Errorf("the refusal of a malformed answer:\n%s", got)
	}
}

// TestUnsolicitedBytesAreNotLogged: bytes an upstream sends on a kept-alive
// connection after its answer make Go's HTTP client log them (the process's
// log, the runner's stderr); with the key in them, the line shows the
// stand-in.
func TestUnsolicitedBytesAreNotLogged(t *testing.T) {
	for _, key := range leakKeys {
		w := newLeakWorld(t, key, false, nil)
		w.setAnswer(func(k string) string { return "HTTP/1.1 200 OK\r\n" + okBody + "HTTP/1.1 200 " + k + "\r\n\r\n" })
		// Kept alive: the proxy's connection upstream goes idle after
		// the answer, and then reads the rest.
		got := w.askWith(t, false, "")
		if l := leaks(got, w.cred); len(l) > 0 {
			t.Errorf("key %q: the agent got %s:\n%s", key, strings.Join(l, ", "), got)
		}
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(w.logs.String(), "Unsolicited") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		logs := w.logs.String()
		if !strings.Contains(logs, "Unsolicited") {
			t.Errorf("key %q: Go's client did not log the unsolicited answer, so this test proves nothing: %q", key, logs)
		}
		if l := leaks(logs, w.cred); len(l) > 0 {
			t.Errorf("key %q: the log holds %s:\n%s", key, strings.Join(l, ", "), logs)
		}
	}
}

// TestTLSErrorsHideTheKey: what the upstream's TLS says about itself
// reaches the agent only through the proxy's error: a certificate whose
// names carry the key (a host that learned it on an earlier request), not
// trusted or not for the host, and an upstream that answers TLS with
// plain text.
func TestTLSErrorsHideTheKey(t *testing.T) {
	ca := newLeakCA(t)
	key := leakKeys[0] // a DNS name can hold it
	dns := key + ".test"
	for _, tt := range []struct {
		name string
		cert func(key string) (*tls.Certificate, *x509.CertPool)
	}{
		{"a certificate for another name, the key's", func(k string) (*tls.Certificate, *x509.CertPool) {
			return ca.leaf(t, k, dns), ca.pool
		}},
		{"a certificate from an authority named the key", func(k string) (*tls.Certificate, *x509.CertPool) {
			other := newLeakCA(t, k)
			return other.leaf(t, k, leakHost), ca.pool
		}},
	} {
		w := newLeakWorld(t, key, true, tt.cert)
		w.setAnswer(func(k string) string { return "HTTP/1.1 200 OK\r\n" + okBody })
		got := w.ask(t, false)
		if !strings.Contains(got, "HTTP/1.1 502 ") {
			t.Errorf("%s: want 502:\n%s", tt.name, got)
		}
		if l := leaks(got, w.cred); len(l) > 0 || strings.Contains(strings.ToLower(got), dns) {
			t.Errorf("%s: the agent got %s:\n%s", tt.name, strings.Join(l, ", "), got)
		}
		if !strings.Contains(got, "TLS") {
			t.Errorf("%s: the refusal should say the upstream's TLS failed:\n%s", tt.name, got)
		}
	}
	// A TLS destination that answers the handshake with plain text: the
	// first bytes of its answer must not come back in an error.
	w := newLeakWorld(t, key, true, func(string) (*tls.Certificate, *x509.CertPool) { return nil, ca.pool })
	w.setAnswer(func(k string) string { return "HTTP/1.1 400 " + k + "\r\n\r\n" + k })
	got := w.ask(t, false)
	if !strings.Contains(got, "HTTP/1.1 502 ") {
		t.Errorf("plain text for TLS: want 502:\n%s", got)
	}
	if l := leaks(got, w.cred); len(l) > 0 {
		t.Errorf("plain text for TLS: the agent got %s:\n%s", strings.Join(l, ", "), got)
	}
}

// leakCA issues the upstream's certificates.
type leakCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newLeakCA(t *testing.T, name ...string) *leakCA {
	t.Helper()
	cn := "leak test CA"
	if len(name) > 0 {
		cn = name[0]
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &leakCA{cert: cert, key: key, pool: pool}
}

// leaf is a certificate named cn, for dns (an IP address or a name).
func (c *leakCA) leaf(t *testing.T, cn, dns string) *tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if ip := net.ParseIP(dns); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{dns}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
