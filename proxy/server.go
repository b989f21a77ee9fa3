package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ReasonHeader carries the refusal reason on a 403, 502 or 503.
const ReasonHeader = "X-Agentrun-Deny-Reason"

// Access is one proxy decision, reported once per (host, port, allowed,
// reason): a destination refused for a full connection table and later
// for its address is reported both times. Past MaxReported distinct
// decisions of one kind (allowed, refused) the proxy reports the new ones
// of that kind only in summaries (see Suppressed).
type Access struct {
	Host    string
	Port    int
	Allowed bool
	Reason  string
	// Suppressed is 0 for a decision reported on its own. On a summary it
	// is how many decisions of this kind (this one, the latest, included)
	// went unreported one by one since the previous summary of the kind:
	// every connection or request counts, a repeated destination each
	// time.
	Suppressed int
}

// MaxReported bounds the distinct decisions of each kind (allowed,
// refused) the proxy reports one by one and remembers: an agent's work
// reaches a few dozen destinations, while one that tries hundreds of
// thousands of names or ports (a scan, a flood) would otherwise grow the
// runner's memory and the event stream without end (docs/events.md,
// "network"). 1,024 entries of at most a 253-byte name stay well under
// 1 MiB.
const MaxReported = 1024

// SummaryEvery spaces the summaries of decisions past MaxReported: one
// per kind at most this often while they go on, and the rest when the
// proxy closes, so a flood adds a few lines a minute to the stream.
const SummaryEvery = 10 * time.Second

// Server is the filter proxy.
type Server struct {
	Policy   *Policy
	Resolver Resolver
	// OnAccess receives each new (host, port, allowed, reason) once. Calls
	// come one at a time, and none after Close returned: the run's events
	// end there.
	OnAccess func(Access)
	// DialTimeout bounds each dial; 0 means 30 s.
	DialTimeout time.Duration
	// MaxConns caps the client connections open at once over all
	// listeners; 0 means DefaultMaxConns.
	MaxConns int
	// IdleTimeout closes a kept-alive client connection without a request
	// for this long; 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// TunnelIdleTimeout closes a CONNECT tunnel that moved no byte either
	// way for this long, and ends a forwarded request whose upstream did
	// not answer or send for as long; 0 means DefaultTunnelIdleTimeout.
	TunnelIdleTimeout time.Duration
	// Intercept, when set, sees the requests to the destinations it claims
	// (see Interceptor); every other tunnel stays opaque.
	Intercept Interceptor

	once      sync.Once
	transport *http.Transport
	srv       *http.Server
	conns     *tracker
	refusing  chan struct{} // a slot per connection being refused
	mu        sync.Mutex    // serialises OnAccess calls
	seen      map[Access]bool
	reported  [2]int         // distinct decisions reported, by kind (refused, allowed)
	summary   [2]suppression // decisions past MaxReported, by kind
	closed    bool
	// maxReported and summaryEvery replace MaxReported and SummaryEvery
	// when set (tests).
	maxReported  int
	summaryEvery time.Duration

	innerOnce    sync.Once
	innerSrv     *innerServer
	tlsOnce      sync.Once
	tlsTransport *http.Transport
}

type dialKey struct{}

// maxIdleUpstream bounds the upstream connections kept for reuse over all
// hosts, so plain-HTTP requests to many hosts cannot pile up descriptors;
// the client side is bounded by MaxConns.
const maxIdleUpstream = 64

func (s *Server) init() {
	s.once.Do(func() {
		s.seen = map[Access]bool{}
		s.conns = &tracker{max: orInt(s.MaxConns, DefaultMaxConns), conns: map[*trackedConn]struct{}{}}
		s.refusing = make(chan struct{}, maxRefusing)
		// The upstream transport dials only the addresses the policy
		// checked, never uses the environment's proxy and never adds
		// compression the client did not ask for.
		s.transport = &http.Transport{
			Proxy:               nil,
			DialContext:         s.dialChecked,
			DisableCompression:  true,
			MaxIdleConns:        maxIdleUpstream,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   false,
			ReadBufferSize:      copyBuffer,
			WriteBufferSize:     copyBuffer,
		}
		s.srv = &http.Server{
			Handler:           s,
			ReadHeaderTimeout: headerTimeout,
			IdleTimeout:       orDuration(s.IdleTimeout, DefaultIdleTimeout),
			ConnState:         s.conns.connState,
		}
	})
}

func orInt(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func orDuration(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

// Serve accepts connections on l until Close.
func (s *Server) Serve(l net.Listener) error {
	s.init()
	err := s.srv.Serve(limitListener{Listener: l, s: s})
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving and closes open connections, tunnels included.
func (s *Server) Close() error {
	s.init()
	s.mu.Lock()
	if !s.closed {
		// What is still counted goes out before the run's events end.
		for k := range s.summary {
			if t := s.summary[k].timer; t != nil {
				t.Stop()
				s.summary[k].timer = nil
			}
			s.flushSummary(k)
		}
	}
	s.closed = true
	s.mu.Unlock()
	err := s.srv.Close()
	s.conns.closeAll()
	s.transport.CloseIdleConnections()
	if s.innerSrv != nil {
		s.innerSrv.srv.Close()
	}
	if s.tlsTransport != nil {
		s.tlsTransport.CloseIdleConnections()
	}
	return err
}

// suppression counts the decisions of one kind that are not reported one
// by one.
type suppression struct {
	count  int
	latest Access
	last   time.Time   // when the previous summary went out
	timer  *time.Timer // the next summary, while one is due
}

func kind(a Access) int {
	if a.Allowed {
		return 1
	}
	return 0
}

// report hands a new decision to OnAccess: each distinct one once, up to
// MaxReported of its kind; past that it is counted into the kind's next
// summary, which goes out at once when none did for SummaryEvery (the
// first one tells at once that single reports stopped), else when that
// time is up or the proxy closes.
func (s *Server) report(a Access) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.seen[a] {
		return
	}
	k := kind(a)
	if s.reported[k] < orInt(s.maxReported, MaxReported) {
		s.seen[a] = true
		s.reported[k]++
		s.emit(a)
		return
	}
	sp := &s.summary[k]
	sp.count++
	sp.latest = a
	if sp.timer != nil {
		return
	}
	wait := time.Until(sp.last.Add(orDuration(s.summaryEvery, SummaryEvery)))
	if wait <= 0 {
		s.flushSummary(k)
		return
	}
	sp.timer = time.AfterFunc(wait, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		sp.timer = nil
		if !s.closed {
			s.flushSummary(k)
		}
	})
}

// flushSummary reports the kind's pending summary; s.mu is held.
func (s *Server) flushSummary(k int) {
	sp := &s.summary[k]
	if sp.count == 0 {
		return
	}
	a := sp.latest
	a.Suppressed = sp.count
	sp.count, sp.last = 0, time.Now()
	s.emit(a)
}

func (s *Server) emit(a Access) {
	if s.OnAccess != nil {
		s.OnAccess(a)
	}
}

// splitHostPort normalises an authority; the port defaults to def.
func splitHostPort(authority string, def int) (string, int, error) {
	host, port := authority, ""
	if h, p, err := net.SplitHostPort(authority); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(authority, "[") && strings.HasSuffix(authority, "]") {
		host = authority[1 : len(authority)-1]
	}
	n := def
	if port != "" {
		v, err := strconv.Atoi(port)
		if err != nil || v < 1 || v > 65535 {
			return "", 0, fmt.Errorf("bad port in %q", authority)
		}
		n = v
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return "", 0, fmt.Errorf("no host in %q", authority)
	}
	if a, ip := parseIPLiteral(host); ip {
		// One spelling for an address (2130706433, 127.1 and
		// [::ffff:127.0.0.1] are 127.0.0.1): what the policy decides, the
		// interceptor claims and the network event reports is the address
		// the proxy dials, never a spelling that only one of them reads.
		host = a.Unmap().String()
	} else if !validName(host) {
		return "", 0, fmt.Errorf("%q is not a host name", host)
	}
	return host, n, nil
}

// admit decides and reports the destination authority (defPort when it
// names none) and answers the client itself when it is refused or
// malformed (400, not reported: it names no destination); ok is false then.
func (s *Server) admit(w http.ResponseWriter, authority string, defPort int) (port int, d Decision, ok bool) {
	host, port, err := splitHostPort(authority, defPort)
	if err != nil {
		http.Error(w, "agentrun proxy: "+err.Error(), http.StatusBadRequest)
		return 0, d, false
	}
	d = s.Policy.Decide(host, port, s.Resolver)
	var claimed Destination
	if d.Allowed {
		if dst, ok := s.claimedAddress(host, port, d.Addrs); ok {
			claimed, d = dst, Decision{Reason: ReasonCredentialAddress}
		}
	}
	s.report(Access{Host: host, Port: port, Allowed: d.Allowed, Reason: d.Reason})
	if !d.Allowed {
		if d.Reason == ReasonCredentialAddress {
			w.Header().Set(ReasonHeader, d.Reason)
			w.Header().Set("Connection", "close")
			http.Error(w, "agentrun proxy: destination refused ("+d.Reason+"): "+authorityOf(host, port)+" reaches "+
				authorityOf(claimed.Host, claimed.Port)+", whose requests go through the proxy only under that name", http.StatusForbidden)
			return 0, d, false
		}
		deny(w, d.Reason)
		return 0, d, false
	}
	return port, d, true
}

// pinner is a resolver that knows which names the user mapped to chosen
// addresses (HostResolver: --add-host).
type pinner interface {
	Pinned(host string) []netip.Addr
}

// claimedAddress reports the intercepted destination whose service the
// unclaimed host:port reaches at one of addrs (the addresses the proxy
// would dial). The interceptor claims its destinations by name (or by the
// IP address they were declared with): the same service asked for under
// another spelling (its address, another name that --add-host, the hosts
// file or DNS maps to it) would be reached past the interceptor, unmetered
// and outside its scope (a push, another repository), so the proxy
// refuses it. An address counts as the destination's when the destination
// was declared with it, when --add-host maps the destination's name to it,
// or when it is private (or the host's own) and the destination's name
// resolves to it: only an --allow-host address entry opens such an
// address, and the runner asks for one exactly when a credential or the
// repository lives there. A public address a destination's name resolves
// to in DNS is not kept: many names share one on a CDN, and in mode full
// every public address is open anyway; what goes there under another name
// carries the stand-in only (docs/credentials.md).
func (s *Server) claimedAddress(host string, port int, addrs []netip.Addr) (Destination, bool) {
	if s.Intercept == nil || s.intercepted(host, port) {
		return Destination{}, false
	}
	var self []netip.Addr
	selfRead := false
	private := func(a netip.Addr) bool {
		if !selfRead {
			self, selfRead = s.Policy.self(), true
		}
		return isPrivate(a, self)
	}
	for _, dst := range s.Intercept.Destinations() {
		if dst.Port != port {
			continue
		}
		var theirs []netip.Addr
		chosen := true // addresses the user named: every one is kept
		if a, ok := parseIPLiteral(dst.Host); ok {
			theirs = []netip.Addr{a}
		} else if p, ok := s.Resolver.(pinner); ok && len(p.Pinned(dst.Host)) > 0 {
			theirs = p.Pinned(dst.Host)
		} else {
			chosen = false
			anyPrivate := false
			for _, a := range addrs {
				anyPrivate = anyPrivate || private(a)
			}
			if !anyPrivate {
				continue
			}
			theirs, _ = s.Resolver.Lookup(dst.Host)
		}
		for _, a := range addrs {
			a = a.Unmap().WithZone("")
			if !chosen && !private(a) {
				continue
			}
			for _, b := range theirs {
				if b.Unmap().WithZone("") == a {
					return dst, true
				}
			}
		}
	}
	return Destination{}, false
}

// deny answers a refusal: 502 for a name without an address (as for one
// whose dial fails), 403 for the policy's refusals.
func deny(w http.ResponseWriter, reason string) {
	status := http.StatusForbidden
	if reason == ReasonUnresolvable {
		status = http.StatusBadGateway
	}
	w.Header().Set(ReasonHeader, reason)
	w.Header().Set("Connection", "close")
	http.Error(w, "agentrun proxy: destination refused ("+reason+")", status)
}

// target is the authority a proxy request names and the port it implies,
// or why it is not a proxy request.
func target(r *http.Request) (authority string, defPort int, problem string) {
	switch {
	case r.Method == http.MethodConnect:
		return r.Host, 443, ""
	case !r.URL.IsAbs() || r.URL.Host == "":
		return "", 0, "only proxy requests (absolute URLs or CONNECT) are served"
	case r.URL.Scheme != "http":
		return "", 0, "use CONNECT for " + r.URL.Scheme
	}
	return r.URL.Host, 80, ""
}

// ServeHTTP handles CONNECT and absolute-form requests.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	authority, defPort, problem := target(r)
	switch {
	case problem != "":
		http.Error(w, "agentrun proxy: "+problem, http.StatusBadRequest)
	case r.Method == http.MethodConnect:
		s.connect(w, authority, defPort)
	default:
		s.forward(w, r, authority, defPort)
	}
}

func (s *Server) dialTimeout() time.Duration {
	if s.DialTimeout > 0 {
		return s.DialTimeout
	}
	return 30 * time.Second
}

// dialAddrs dials the checked addresses in order.
func (s *Server) dialAddrs(ctx context.Context, addrs []netip.Addr, port int) (net.Conn, error) {
	if len(addrs) == 0 {
		return nil, errors.New("the name has no address")
	}
	d := net.Dialer{Timeout: s.dialTimeout()}
	var last error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

type pinned struct {
	addrs []netip.Addr
	port  int
}

func (s *Server) dialChecked(ctx context.Context, _, _ string) (net.Conn, error) {
	p, ok := ctx.Value(dialKey{}).(pinned)
	if !ok {
		return nil, errors.New("agentrun proxy: dial without a policy decision")
	}
	return s.dialAddrs(ctx, p.addrs, p.port)
}

func (s *Server) connect(w http.ResponseWriter, authority string, defPort int) {
	port, d, ok := s.admit(w, authority, defPort)
	if !ok {
		return
	}
	if host, _, _ := splitHostPort(authority, defPort); s.intercepted(host, port) {
		s.connectIntercepted(w, host, port, d)
		return
	}
	// Not r.Context(): the server cancels it when the client half-closes.
	up, err := s.dialAddrs(context.Background(), d.Addrs, port)
	if err != nil {
		http.Error(w, "agentrun proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "agentrun proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	client, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := client.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		client.Close()
		up.Close()
		return
	}
	tunnel(client, buf.Reader, up, s.tunnelIdle())
}

// connectIntercepted answers a CONNECT to an intercepted destination: the
// tunnel ends here, and its requests are relayed one by one.
func (s *Server) connectIntercepted(w http.ResponseWriter, host string, port int, d Decision) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "agentrun proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	client, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	if _, err := client.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		client.Close()
		return
	}
	s.intercept(client, buf.Reader, interceptAddr{host: host, port: port, addrs: pinned{addrs: d.Addrs, port: port},
		server: authorityOf(host, port)})
}

func (s *Server) tunnelIdle() time.Duration {
	return orDuration(s.TunnelIdleTimeout, DefaultTunnelIdleTimeout)
}

// tunnel copies both ways until both directions are done, or until no
// byte moved either way for idle. Bytes the server already buffered from
// the client go first.
func tunnel(client net.Conn, buffered *bufio.Reader, up net.Conn, idle time.Duration) {
	var last atomic.Int64 // UnixNano of the last byte moved
	last.Store(time.Now().UnixNano())
	watchdog := idleWatchdog(&last, idle, func() { client.Close(); up.Close() })
	defer watchdog.Stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if n := buffered.Buffered(); n > 0 {
			b, _ := buffered.Peek(n)
			if _, err := up.Write(b); err != nil {
				return
			}
		}
		pump(up, client, &last)
		closeWrite(up)
	}()
	pump(client, up, &last)
	closeWrite(client)
	<-done
	client.Close()
	up.Close()
}

// idleWatchdog calls expire once no byte moved for idle; last is the time
// of the latest one. One timer per tunnel, re-armed only when it fires.
func idleWatchdog(last *atomic.Int64, idle time.Duration, expire func()) *time.Timer {
	var t *time.Timer
	t = time.AfterFunc(idle, func() {
		quiet := time.Since(time.Unix(0, last.Load()))
		if quiet >= idle {
			expire()
			return
		}
		t.Reset(idle - quiet)
	})
	return t
}

// tunnelBuffer is the block a tunnel moves per read and direction: large
// enough for bulk transfers, small enough that a full table of tunnels
// (2 x DefaultMaxConns buffers) stays at a few tens of MiB.
const tunnelBuffer = 64 << 10

var tunnelBuffers = sync.Pool{New: func() any { b := make([]byte, tunnelBuffer); return &b }}

// pump copies src to dst until either fails, recording when bytes moved.
func pump(dst, src net.Conn, last *atomic.Int64) {
	bp := tunnelBuffers.Get().(*[]byte)
	defer tunnelBuffers.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			last.Store(time.Now().UnixNano())
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// hopHeaders are connection-scoped and never forwarded.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func stripHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

func (s *Server) forward(w http.ResponseWriter, r *http.Request, authority string, defPort int) {
	port, d, ok := s.admit(w, authority, defPort)
	if !ok {
		return
	}
	host, _, _ := splitHostPort(authority, defPort)
	s.relay(w, r, authority, host, port, pinned{addrs: d.Addrs, port: port})
}

// relay sends r to its checked destination and streams the answer back;
// an intercepted destination's interceptor sees both.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, authority, host string, port int, dial pinned) {
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), dialKey{}, dial))
	defer cancel()
	// As a tunnel: a request whose upstream moves no byte for so long ends,
	// rather than hold the client's slot against the cap forever.
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	defer idleWatchdog(&last, s.tunnelIdle(), cancel).Stop()
	out := r.Clone(ctx)
	out.RequestURI = ""
	// The destination is the checked authority, whatever Host header the
	// client sent.
	out.Host = authority
	stripHop(out.Header)
	if _, sent := r.Header["User-Agent"]; !sent {
		// An empty value keeps Go from adding its own: the upstream sees
		// the client's headers, not the proxy's.
		out.Header["User-Agent"] = []string{""}
	}
	// uploaded: the transport read the client's body to its end. Until
	// then, whatever the proxy answers closes the connection after it
	// (closeIfUploading): the rest of the body, which the transport may
	// still be sending on, must never be read as the client's next request.
	var uploaded atomic.Bool
	if r.ContentLength == 0 {
		out.Body = nil
		uploaded.Store(true)
	} else {
		out.Body = uploadEnd{activity{out.Body, &last}, &uploaded}
	}
	closeIfUploading := func() {
		if !uploaded.Load() {
			w.Header().Set("Connection", "close")
		}
	}
	intercepted := s.intercepted(host, port)
	if intercepted {
		if out.URL.Scheme != "https" && !s.Intercept.PlainHTTP(host, port) {
			s.refusePlain(w, host, port)
			return
		}
		if ref := s.Intercept.Request(host, port, out); ref != nil {
			s.refuseIntercepted(w, host, port, out, ref, http.StatusForbidden)
			return
		}
	}
	transport := s.transport
	if out.URL.Scheme == "https" {
		transport = s.tlsUpstream()
	}
	// The transport sends the client's body on while the answer comes
	// back: an upstream may answer before it read all of it (a model
	// stream starts at once). By default net/http's server reads away and
	// closes what is left of the body as the answer's headers go out,
	// under the transport's feet: the request broke, and the answer with
	// it, or the upstream got a body with a hole. In full duplex the
	// server leaves the body alone, and no longer closes the connection
	// after a body left unfinished either: closeIfUploading does.
	_ = http.NewResponseController(w).EnableFullDuplex()
	resp, err := transport.RoundTrip(out)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer for %v", s.tunnelIdle())
		}
		msg := "agentrun proxy: " + err.Error()
		if intercepted {
			// The transport's error may quote the answer it could not
			// read, and the answer may echo the real value.
			msg = s.Intercept.RedactText(host, port, out, upstreamFailure(authority, err))
		}
		closeIfUploading()
		http.Error(w, msg, http.StatusBadGateway)
		return
	}
	// The body as it is at the end: the interceptor wraps it (its meter
	// counts a call when its body is closed, the client gone or not).
	defer func() { resp.Body.Close() }()
	// Bytes from upstream are activity, also those the interceptor reads
	// ahead (its meter may read a whole answer without streaming). An
	// answer without a body keeps http.NoBody, which says so.
	if resp.Body != http.NoBody {
		resp.Body = activity{resp.Body, &last}
	}
	if intercepted {
		if ref := s.Intercept.Response(host, port, out, resp); ref != nil {
			closeIfUploading()
			s.refuseIntercepted(w, host, port, out, ref, http.StatusBadGateway)
			return
		}
	}
	body := resp.Body
	stripHop(resp.Header)
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	closeIfUploading()
	w.WriteHeader(resp.StatusCode)
	if resp.ContentLength >= 0 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A body of known length: copy in large blocks, no flushing. The
		// ResponseWriter's own ReadFrom would copy in 32 KiB pieces (the
		// body is no socket it could splice): hiding it makes CopyBuffer
		// use this buffer: a 100 MiB download through the proxy went from
		// 1.5-1.9 to 1.7-2.2 GiB/s (hack/bench-sandbox.sh).
		// One cut short is cut short for the client too: net/http closes
		// the connection after a body shorter than its Content-Length.
		buf := make([]byte, copyBuffer)
		_, _ = io.CopyBuffer(writerOnly{w}, body, buf)
		return
	}
	// The status goes out now: a stream cut before its first byte reaches
	// the client as an answer cut short, not as a connection that closed
	// before any answer (which a client may send again, upstream).
	_ = http.NewResponseController(w).Flush()
	if intercepted {
		// Decrypted here and encrypted again: gather what arrives within
		// a moment into one record instead of one per server-sent event.
		err = batchedCopy(w, body, streamBatchDelay)
	} else {
		err = flushCopy(w, body)
	}
	if err != nil {
		abortAnswer(r)
	}
}

// abortAnswer ends a streamed answer whose copy failed (the upstream cut
// it or went idle, or the client left) without the end an answer gets:
// net/http closes the client's connection, with no last chunk (the proxy
// speaks HTTP/1.1 to its clients). What arrived before went out with its
// flush. Ended normally, a server-sent event stream cut halfway reads as
// a whole one, and an agent takes a model's half answer for its answer.
// Only under net/http's server, which recovers this panic.
func abortAnswer(r *http.Request) {
	if r.Context().Value(http.ServerContextKey) != nil {
		panic(http.ErrAbortHandler)
	}
}

// uploadEnd notes when the client's body was read to its end.
type uploadEnd struct {
	io.ReadCloser
	done *atomic.Bool
}

func (u uploadEnd) Read(b []byte) (int, error) {
	n, err := u.ReadCloser.Read(b)
	if err == io.EOF {
		u.done.Store(true)
	}
	return n, err
}

// writerOnly hides every method of a writer but Write.
type writerOnly struct{ io.Writer }

// activity records when bytes of a forwarded request or answer moved.
type activity struct {
	io.ReadCloser
	last *atomic.Int64
}

func (a activity) Read(b []byte) (int, error) {
	n, err := a.ReadCloser.Read(b)
	if n > 0 {
		a.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// copyBuffer is the size of the blocks the proxy moves: large enough that
// bulk transfers are not bounded by per-write overhead.
const copyBuffer = 256 << 10

// streamBatchDelay bounds how long an intercepted stream's bytes wait to
// be sent with those that follow: well under the 2 ms a request may gain
// on the credential path, far more than a burst of events takes to arrive.
const streamBatchDelay = time.Millisecond

// batchedCopy streams the body like flushCopy, but writes what arrives
// within delay of the first unsent byte (or a half-full buffer) at once.
// Its error is flushCopy's.
func batchedCopy(w http.ResponseWriter, body io.Reader, delay time.Duration) error {
	f, _ := w.(http.Flusher)
	var mu sync.Mutex
	var timer *time.Timer
	var werr error
	pending := make([]byte, 0, copyBuffer)
	emit := func() { // mu held
		if len(pending) == 0 || werr != nil {
			return
		}
		if _, werr = w.Write(pending); werr == nil && f != nil {
			f.Flush()
		}
		pending = pending[:0]
	}
	chunk := make([]byte, copyBuffer/4)
	var rerr error
	for {
		n, err := body.Read(chunk)
		rerr = err
		mu.Lock()
		if n > 0 {
			pending = append(pending, chunk[:n]...)
			switch {
			case len(pending) >= copyBuffer/2:
				emit()
			case timer == nil:
				timer = time.AfterFunc(delay, func() {
					mu.Lock()
					defer mu.Unlock()
					emit()
					timer = nil
				})
			}
		}
		stop := err != nil || werr != nil
		mu.Unlock()
		if stop {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
	emit()
	if werr != nil {
		return werr
	}
	if rerr == io.EOF {
		return nil
	}
	return rerr
}

// flushCopy streams the body, flushing as data arrives (server-sent events
// from a model API must not wait in a buffer). It returns nil when the
// body ended, else why the copy stopped (a read or a write error).
func flushCopy(w http.ResponseWriter, body io.Reader) error {
	f, _ := w.(http.Flusher)
	buf := make([]byte, copyBuffer)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if f != nil {
				f.Flush()
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
