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
	"time"
)

// ReasonHeader carries the refusal reason on a 403.
const ReasonHeader = "X-Agentrun-Deny-Reason"

// Access is one proxy decision, reported once per (host, port, allowed).
type Access struct {
	Host    string
	Port    int
	Allowed bool
	Reason  string
}

// Server is the filter proxy.
type Server struct {
	Policy   *Policy
	Resolver Resolver
	// OnAccess receives each new (host, port, allowed) once. It is called
	// from the connection's goroutine.
	OnAccess func(Access)
	// DialTimeout bounds each dial; 0 means 30 s.
	DialTimeout time.Duration

	once      sync.Once
	transport *http.Transport
	srv       *http.Server
	mu        sync.Mutex
	seen      map[Access]bool
}

type dialKey struct{}

func (s *Server) init() {
	s.once.Do(func() {
		s.seen = map[Access]bool{}
		// The upstream transport dials only the addresses the policy
		// checked, never uses the environment's proxy and never adds
		// compression the client did not ask for.
		s.transport = &http.Transport{
			Proxy:               nil,
			DialContext:         s.dialChecked,
			DisableCompression:  true,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   false,
			ReadBufferSize:      copyBuffer,
			WriteBufferSize:     copyBuffer,
		}
		s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second}
	})
}

// Serve accepts connections on l until Close.
func (s *Server) Serve(l net.Listener) error {
	s.init()
	err := s.srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving and closes open connections.
func (s *Server) Close() error {
	s.init()
	s.transport.CloseIdleConnections()
	return s.srv.Close()
}

func (s *Server) report(a Access) {
	s.mu.Lock()
	key := Access{Host: a.Host, Port: a.Port, Allowed: a.Allowed}
	dup := s.seen[key]
	s.seen[key] = true
	s.mu.Unlock()
	if !dup && s.OnAccess != nil {
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
	return host, n, nil
}

// admit decides and reports the destination authority (defPort when it
// names none) and answers the client itself when it is refused or
// malformed; ok is false then.
func (s *Server) admit(w http.ResponseWriter, authority string, defPort int) (port int, d Decision, ok bool) {
	host, port, err := splitHostPort(authority, defPort)
	if err != nil {
		http.Error(w, "agentrun proxy: "+err.Error(), http.StatusBadRequest)
		return 0, d, false
	}
	d = s.Policy.Decide(host, port, s.Resolver)
	s.report(Access{Host: host, Port: port, Allowed: d.Allowed, Reason: d.Reason})
	if !d.Allowed {
		deny(w, d.Reason)
		return 0, d, false
	}
	return port, d, true
}

func deny(w http.ResponseWriter, reason string) {
	w.Header().Set(ReasonHeader, reason)
	w.Header().Set("Connection", "close")
	http.Error(w, "agentrun proxy: destination refused ("+reason+")", http.StatusForbidden)
}

// ServeHTTP handles CONNECT and absolute-form requests.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		s.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Host == "" {
		http.Error(w, "agentrun proxy: only proxy requests (absolute URLs or CONNECT) are served", http.StatusBadRequest)
		return
	}
	if r.URL.Scheme != "http" {
		http.Error(w, "agentrun proxy: use CONNECT for "+r.URL.Scheme, http.StatusBadRequest)
		return
	}
	s.forward(w, r)
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

func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	port, d, ok := s.admit(w, r.Host, 443)
	if !ok {
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
	tunnel(client, buf.Reader, up)
}

// tunnel copies both ways until both directions are done. Bytes the
// server already buffered from the client go first.
func tunnel(client net.Conn, buffered *bufio.Reader, up net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if n := buffered.Buffered(); n > 0 {
			b, _ := buffered.Peek(n)
			if _, err := up.Write(b); err != nil {
				return
			}
		}
		_, _ = io.Copy(up, client)
		closeWrite(up)
	}()
	_, _ = io.Copy(client, up)
	closeWrite(client)
	<-done
	client.Close()
	up.Close()
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

func (s *Server) forward(w http.ResponseWriter, r *http.Request) {
	port, d, ok := s.admit(w, r.URL.Host, 80)
	if !ok {
		return
	}
	ctx := context.WithValue(context.Background(), dialKey{}, pinned{addrs: d.Addrs, port: port})
	out := r.Clone(ctx)
	out.RequestURI = ""
	// The destination is the request URI's authority, whatever Host header
	// the client sent.
	out.Host = r.URL.Host
	stripHop(out.Header)
	if r.ContentLength == 0 {
		out.Body = nil
	}
	resp, err := s.transport.RoundTrip(out)
	if err != nil {
		http.Error(w, "agentrun proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	stripHop(resp.Header)
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if resp.ContentLength >= 0 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A body of known length: copy in large blocks, no flushing.
		buf := make([]byte, copyBuffer)
		_, _ = io.CopyBuffer(w, resp.Body, buf)
		return
	}
	flushCopy(w, resp.Body)
}

// copyBuffer is the size of the blocks the proxy moves: large enough that
// bulk transfers are not bounded by per-write overhead.
const copyBuffer = 256 << 10

// flushCopy streams the body, flushing as data arrives (server-sent events
// from a model API must not wait in a buffer).
func flushCopy(w http.ResponseWriter, body io.Reader) {
	f, _ := w.(http.Flusher)
	buf := make([]byte, copyBuffer)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}
