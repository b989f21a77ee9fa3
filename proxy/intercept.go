package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Interceptor sees the requests to the destinations it claims (a run's
// credential destinations) one by one, which every other destination's
// CONNECT tunnel keeps opaque. For those the proxy terminates the client's
// TLS with the interceptor's certificate (or reads plain HTTP, which pi
// sends even inside CONNECT, to a destination declared as speaking it),
// lets the interceptor change each request (put the real key in) and each
// response (take it out, meter the usage), and talks to the upstream
// itself, over TLS verified against Roots when the client spoke TLS.
type Interceptor interface {
	// Claims reports whether requests to host:port are intercepted.
	Claims(host string, port int) bool
	// PlainHTTP reports whether a claimed host:port may be sent requests
	// in plain HTTP; the proxy refuses plain HTTP to any other (see
	// refusePlain).
	PlainHTTP(host string, port int) bool
	// Certificate is what the proxy presents to the client for host.
	Certificate(host string) (*tls.Certificate, error)
	// Request changes an intercepted request before it goes upstream; a
	// non-nil Refusal answers the client instead (403 unless it says
	// otherwise: a request the interceptor cannot account for, a spend
	// limit reached), and nothing goes upstream.
	Request(host string, port int, r *http.Request) *Refusal
	// Response changes the upstream's response before the client reads it;
	// a non-nil Refusal answers the client instead (502 unless it says
	// otherwise: an answer the interceptor cannot read, so cannot clean).
	Response(host string, port int, r *http.Request, resp *http.Response) *Refusal
	// Roots verify the upstream's certificate (nil: the system's roots).
	Roots() *x509.CertPool
	// RedactText takes what must not reach the client out of text the
	// proxy itself writes about the request r to host:port (its error
	// when the upstream's answer cannot be read, which quotes that
	// answer; a refusal's detail): the same secrets as Response takes
	// out of answers.
	RedactText(host string, port int, r *http.Request, text string) string
}

// Refusal is an interceptor's refusal of a request or of its answer. It is
// reported as a refused decision with its reason, unless Quiet.
type Refusal struct {
	Reason string // for the network event and ReasonHeader
	Detail string // for the client, after "agentrun proxy: "
	// Status is the client's answer; 0 means 403 for a request, 502 for
	// an answer.
	Status int
	// Quiet refusals are not network events: the run's end says why (a
	// spend limit reached).
	Quiet bool
}

// interceptAddr is the checked destination of an intercepted connection.
type interceptAddr struct {
	host   string
	port   int
	addrs  pinned
	tls    bool
	server string // the checked authority, host:port
}

type interceptKey struct{}

// intercept serves a CONNECT tunnel to an intercepted destination: it
// answers the client itself, request by request.
func (s *Server) intercept(client net.Conn, buffered *bufio.Reader, dst interceptAddr) {
	first, err := buffered.Peek(1)
	if err != nil {
		client.Close()
		return
	}
	conn := net.Conn(&bufferedConn{Conn: client, r: buffered})
	// A TLS handshake starts with a handshake record (0x16); anything else
	// is plain HTTP inside the tunnel.
	if first[0] == 0x16 {
		dst.tls = true
		conn = tls.Server(conn, &tls.Config{
			MinVersion: tls.VersionTLS12,
			// One request at a time per connection is what the proxy
			// relays; clients that offer h2 (codex) fall back.
			NextProtos: []string{"http/1.1"},
			GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
				// The name asked for must be the destination checked at
				// CONNECT: a tunnel to one host cannot ask for another's.
				if hello.ServerName != "" && hello.ServerName != dst.host {
					return nil, errors.New("agentrun proxy: TLS name differs from the CONNECT destination")
				}
				return s.Intercept.Certificate(dst.host)
			},
		})
	}
	s.inner().ServeConn(conn, dst)
}

// inner is the HTTP server of intercepted connections.
func (s *Server) inner() *innerServer {
	s.innerOnce.Do(func() {
		is := &innerServer{}
		is.srv = &http.Server{
			Handler:           http.HandlerFunc(s.serveIntercepted),
			ReadHeaderTimeout: headerTimeout,
			IdleTimeout:       orDuration(s.IdleTimeout, DefaultIdleTimeout),
			ConnContext: func(ctx context.Context, c net.Conn) context.Context {
				if ic, ok := c.(interface{ dest() interceptAddr }); ok {
					return context.WithValue(ctx, interceptKey{}, ic.dest())
				}
				return ctx
			},
		}
		s.innerSrv = is
	})
	return s.innerSrv
}

// serveIntercepted relays one request of an intercepted connection to its
// checked destination, whatever Host header it names.
func (s *Server) serveIntercepted(w http.ResponseWriter, r *http.Request) {
	dst, ok := r.Context().Value(interceptKey{}).(interceptAddr)
	if !ok {
		http.Error(w, "agentrun proxy: no destination", http.StatusInternalServerError)
		return
	}
	scheme := "http"
	if dst.tls {
		scheme = "https"
	}
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host = scheme, dst.server
	s.relay(w, out, dst.server, dst.host, dst.port, dst.addrs)
}

// innerServer serves intercepted connections, each on a listener of one.
type innerServer struct {
	srv *http.Server
}

// ServeConn serves one connection until it closes.
func (is *innerServer) ServeConn(c net.Conn, dst interceptAddr) {
	l := &oneConnListener{conn: &destConn{Conn: c, d: dst}, done: make(chan struct{})}
	_ = is.srv.Serve(l)
	<-l.done // Serve returns at once; the connection is served until closed
}

// destConn carries its destination to the inner server's handler.
type destConn struct {
	net.Conn
	d    interceptAddr
	once sync.Once
	done chan struct{}
}

func (c *destConn) dest() interceptAddr { return c.d }

func (c *destConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if c.done != nil {
			close(c.done)
		}
	})
	return err
}

// oneConnListener hands out one connection, then reports itself closed.
type oneConnListener struct {
	conn *destConn
	mu   sync.Mutex
	used bool
	done chan struct{}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used {
		return nil, net.ErrClosed
	}
	l.used = true
	l.conn.done = l.done
	return l.conn, nil
}

func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }

// bufferedConn reads first what the CONNECT handler already buffered.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// tlsTransport is the upstream transport of intercepted TLS destinations:
// it verifies the upstream's real certificate against the interceptor's
// roots and, like the plain one, dials only checked addresses.
func (s *Server) tlsUpstream() *http.Transport {
	s.tlsOnce.Do(func() {
		s.tlsTransport = &http.Transport{
			Proxy:               nil,
			DialContext:         s.dialChecked,
			DisableCompression:  true,
			MaxIdleConns:        maxIdleUpstream,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   false,
			ReadBufferSize:      copyBuffer,
			WriteBufferSize:     copyBuffer,
			TLSClientConfig:     &tls.Config{RootCAs: s.Intercept.Roots(), NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12},
		}
	})
	return s.tlsTransport
}

// intercepted reports whether host:port is an intercepted destination.
func (s *Server) intercepted(host string, port int) bool {
	return s.Intercept != nil && s.Intercept.Claims(host, port)
}

func authorityOf(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// refusePlain answers a plain-HTTP request to an intercepted destination
// that was not declared as speaking plain HTTP: the interceptor would put
// the real value into a request that travels upstream unencrypted (a
// CONNECT tunnel carries whatever the client sends, to port 443 too).
//
// The proxy refuses (403, tls_required) rather than speak TLS upstream on
// the agent's behalf: an http:// URL that silently became https:// would
// make what the agent's configuration says and what happens differ, and a
// service that does speak plain HTTP would fail with an obscure handshake
// error; the refusal names the fix, and the rule stays one sentence: the
// real value leaves over verified TLS, or over plain HTTP only where the
// user declared it (docs/credentials.md).
func (s *Server) refusePlain(w http.ResponseWriter, host string, port int) {
	s.report(Access{Host: host, Port: port, Reason: ReasonTLSRequired})
	w.Header().Set(ReasonHeader, ReasonTLSRequired)
	a := authorityOf(host, port)
	http.Error(w, "agentrun proxy: "+a+" receives a credential over TLS only ("+ReasonTLSRequired+"): use https://"+a+
		", or, if it speaks only plain HTTP, declare it as http://"+a+" in --credential", http.StatusForbidden)
}

// refuseIntercepted answers an interceptor's refusal of r, def its status
// unless it names one, and reports it unless it is quiet. The detail is
// redacted like every text the proxy writes about an intercepted request.
func (s *Server) refuseIntercepted(w http.ResponseWriter, host string, port int, r *http.Request, ref *Refusal, def int) {
	if !ref.Quiet {
		s.report(Access{Host: host, Port: port, Reason: ref.Reason})
	}
	status := ref.Status
	if status == 0 {
		status = def
	}
	w.Header().Set(ReasonHeader, ref.Reason)
	http.Error(w, s.Intercept.RedactText(host, port, r, "agentrun proxy: "+ref.Detail), status)
}

// upstreamFailure is the proxy's answer text when the upstream of an
// intercepted request to authority could not be reached or its answer
// not read (err, from the transport). A failed certificate check is told
// in the proxy's own words: the upstream's certificate names and
// authority are the upstream's text, chosen before any answer. Every
// other error is the transport's own text (it quotes a line it could not
// parse), which the caller redacts.
func upstreamFailure(authority string, err error) string {
	var (
		host    x509.HostnameError
		unknown x509.UnknownAuthorityError
		invalid x509.CertificateInvalidError
		verify  *tls.CertificateVerificationError
	)
	tlsFailed := "agentrun proxy: the TLS certificate of " + authority + " "
	switch {
	case errors.As(err, &host):
		return tlsFailed + "is not valid for " + authority + " (x509: wrong name)"
	case errors.As(err, &unknown):
		return tlsFailed + "is signed by an authority the proxy does not trust (x509: unknown authority; --upstream-ca names more)"
	case errors.As(err, &invalid):
		return tlsFailed + "is not valid (x509: " + certificateProblem(invalid.Reason) + ")"
	case errors.As(err, &verify):
		return tlsFailed + "could not be verified"
	}
	return "agentrun proxy: the answer of " + authority + " could not be read: " + err.Error()
}

// certificateProblem names an x509 invalid reason in fixed words.
func certificateProblem(r x509.InvalidReason) string {
	switch r {
	case x509.Expired:
		return "expired or not yet valid"
	case x509.NotAuthorizedToSign:
		return "signed by a certificate that is no authority"
	case x509.CANotAuthorizedForThisName:
		return "signed by an authority not allowed this name"
	case x509.IncompatibleUsage:
		return "not for server authentication"
	}
	return "invalid"
}

// Interceptors is several interceptors as one: each destination goes to
// the first that claims it (a run's credential destinations, its git
// repository). An interceptor claims destinations no other one does (the
// runner refuses a run whose git host is also a credential destination).
type Interceptors []Interceptor

func (is Interceptors) of(host string, port int) Interceptor {
	for _, i := range is {
		if i.Claims(host, port) {
			return i
		}
	}
	return nil
}

// Claims reports whether one of them claims host:port.
func (is Interceptors) Claims(host string, port int) bool { return is.of(host, port) != nil }

// PlainHTTP is the claiming interceptor's.
func (is Interceptors) PlainHTTP(host string, port int) bool {
	i := is.of(host, port)
	return i != nil && i.PlainHTTP(host, port)
}

// Certificate is the certificate of the first that claims host on any
// port (the TLS handshake names the host only).
func (is Interceptors) Certificate(host string) (*tls.Certificate, error) {
	for _, i := range is {
		if c, err := i.Certificate(host); err == nil {
			return c, nil
		}
	}
	return nil, errors.New("no interceptor has a certificate for " + host)
}

// Request is the claiming interceptor's.
func (is Interceptors) Request(host string, port int, r *http.Request) *Refusal {
	if i := is.of(host, port); i != nil {
		return i.Request(host, port, r)
	}
	return nil
}

// Response is the claiming interceptor's.
func (is Interceptors) Response(host string, port int, r *http.Request, resp *http.Response) *Refusal {
	if i := is.of(host, port); i != nil {
		return i.Response(host, port, r, resp)
	}
	return nil
}

// Roots are the first interceptor's: the runner gives them all the same.
func (is Interceptors) Roots() *x509.CertPool {
	if len(is) > 0 {
		return is[0].Roots()
	}
	return nil
}

// RedactText passes text through every interceptor: each takes out what
// it knows must not reach the client.
func (is Interceptors) RedactText(host string, port int, r *http.Request, text string) string {
	for _, i := range is {
		text = i.RedactText(host, port, r, text)
	}
	return text
}
