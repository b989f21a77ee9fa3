package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxConns is the cap on a run's client connections. A CLI uses a
// handful at once (model calls, tool fetches); 256 leaves ample room for
// that, while 256 tunnels (two descriptors each, client and upstream) stay
// within half of the descriptor limit common in containers (1024), leaving
// the runner room for its own files.
const DefaultMaxConns = 256

// DefaultIdleTimeout closes a kept-alive client connection that carried no
// request for this long. Clients reopen one cheaply; Go's own client keeps
// them 90 s, Node's a few seconds.
const DefaultIdleTimeout = 60 * time.Second

// DefaultTunnelIdleTimeout closes a CONNECT tunnel that moved no byte
// either way for this long (and ends a forwarded request as quiet). Longer
// than the 10 minutes the model SDKs wait for an answer that is not
// streamed, during which the connection is silent.
const DefaultTunnelIdleTimeout = 15 * time.Minute

const (
	// headerTimeout bounds the wait for a request head: clients send it
	// in one piece right after connecting or reusing a connection.
	headerTimeout = 10 * time.Second
	// quietGrace is how long a connection may be connected, or part-way
	// through a request head, before it counts as quiet and may be closed
	// at the cap: a real client's head follows its connect within
	// milliseconds.
	quietGrace = time.Second
	// refuseDeadline bounds everything done with a connection over the
	// cap: read which host it wanted, answer 503, close.
	refuseDeadline = 2 * time.Second
	// maxRefusing bounds the connections over the cap held for that
	// answer at once; beyond it they are closed at once without one.
	maxRefusing = 16
	// maxRefusedHead bounds what is read of a refused request.
	maxRefusedHead = 16 << 10
)

// connPhase is where a client connection is, as far as the cap cares.
type connPhase int

const (
	phaseNew  connPhase = iota // accepted, no request yet
	phaseIdle                  // kept alive between requests
	phaseBusy                  // a request in flight, or a tunnel
)

// trackedConn is a client connection counted against the cap. Its slot is
// freed when it is closed, by whoever closes it: the HTTP server, the
// tunnel, or the cap itself.
type trackedConn struct {
	net.Conn
	t    *tracker
	once sync.Once

	// Guarded by t.mu.
	phase connPhase
	since time.Time // when phase began

	// headStart is when the first byte after phase began was read
	// (UnixNano), 0 if none: a request head is arriving.
	headStart atomic.Int64
}

func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.headStart.Load() == 0 {
		c.headStart.CompareAndSwap(0, time.Now().UnixNano())
	}
	return n, err
}

// CloseWrite half-closes, as the TCP connection underneath does: a tunnel
// passes the upstream's end of data on without cutting the client off.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

func (c *trackedConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		c.t.release(c)
		err = c.Conn.Close()
	})
	return err
}

// tracker holds the client connections of one Server.
type tracker struct {
	max   int
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

// admit takes a slot for c. At the cap it closes the quietest connection
// to make room; when every connection is busy it returns nil and c is not
// counted.
func (t *tracker) admit(c net.Conn, now time.Time) *trackedConn {
	t.mu.Lock()
	var victim *trackedConn
	if len(t.conns) >= t.max {
		if victim = t.quietest(now); victim == nil {
			t.mu.Unlock()
			return nil
		}
		delete(t.conns, victim)
	}
	tc := &trackedConn{Conn: c, t: t, phase: phaseNew, since: now}
	t.conns[tc] = struct{}{}
	t.mu.Unlock()
	if victim != nil {
		victim.Close()
	}
	return tc
}

// quietest is the connection quiet for longest that may be closed: one
// kept alive with nothing read since, or one that has been connected, or
// part-way through a request head, for more than quietGrace. Busy ones
// never are. Called with t.mu held.
func (t *tracker) quietest(now time.Time) *trackedConn {
	var best *trackedConn
	var bestQuiet time.Time
	for c := range t.conns {
		quiet, ok := c.quietSince(now)
		if ok && (best == nil || quiet.Before(bestQuiet)) {
			best, bestQuiet = c, quiet
		}
	}
	return best
}

// quietSince says since when c has been quiet, and whether it may be
// closed for a newcomer.
func (c *trackedConn) quietSince(now time.Time) (time.Time, bool) {
	if c.phase == phaseBusy {
		return time.Time{}, false
	}
	if h := c.headStart.Load(); h != 0 {
		// A head is arriving: only a stalled one is quiet.
		start := time.Unix(0, h)
		return start, now.Sub(start) >= quietGrace
	}
	if c.phase == phaseIdle {
		return c.since, true
	}
	return c.since, now.Sub(c.since) >= quietGrace
}

// connState follows the HTTP server's view of each connection.
func (t *tracker) connState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*trackedConn)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch st {
	case http.StateNew:
		c.phase = phaseNew
	case http.StateIdle:
		c.phase = phaseIdle
	case http.StateActive, http.StateHijacked:
		c.phase = phaseBusy
	default:
		return
	}
	c.since = time.Now()
	c.headStart.Store(0)
}

func (t *tracker) release(c *trackedConn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

// closeAll closes every connection, tunnels included (the HTTP server
// forgets a connection once it is hijacked).
func (t *tracker) closeAll() {
	t.mu.Lock()
	all := make([]*trackedConn, 0, len(t.conns))
	for c := range t.conns {
		all = append(all, c)
	}
	t.mu.Unlock()
	for _, c := range all {
		c.Close()
	}
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

// limitListener counts accepted connections against the cap and answers
// those over it itself, so the HTTP server never sees them.
type limitListener struct {
	net.Listener
	s *Server
}

func (l limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := l.s.conns.admit(c, time.Now()); tc != nil {
			return tc, nil
		}
		l.s.refuse(c)
	}
}

// refuse answers a connection over the cap: it reads the request head for
// at most refuseDeadline, reports a connection_limit refusal for the
// destination it names, answers 503 and closes. When maxRefusing are
// already being answered it closes c at once.
func (s *Server) refuse(c net.Conn) {
	select {
	case s.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-s.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refuseDeadline))
		req, err := http.ReadRequest(bufio.NewReader(io.LimitReader(c, maxRefusedHead)))
		if err == nil {
			if authority, def, problem := target(req); problem == "" {
				if host, port, err := splitHostPort(authority, def); err == nil {
					s.report(Access{Host: host, Port: port, Reason: ReasonConnectionLimit})
				}
			}
		}
		body := "agentrun proxy: too many connections (" + ReasonConnectionLimit + ")\n"
		_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\n"+
			ReasonHeader+": "+ReasonConnectionLimit+"\r\n"+
			"Connection: close\r\nContent-Type: text/plain; charset=utf-8\r\n"+
			"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		// Let the client read the answer before the close: closing with
		// its unread request body pending would reset the connection.
		closeWrite(c)
		_, _ = io.Copy(io.Discard, c)
	}()
}
