package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// limitedProxy serves a custom policy allowing limit.test (and
// 127.0.0.1) on port with the given settings.
func limitedProxy(t *testing.T, s *Server, port int) (string, func() []Access) {
	t.Helper()
	s.Policy = policy(t, "", []string{fmt.Sprintf("limit.test:%d", port), fmt.Sprintf("127.0.0.1:%d", port)})
	s.Resolver = staticResolver{"limit.test": addrs("127.0.0.1")}
	return serve(t, s)
}

// closedWithin reports whether the peer closes c within d (reading and
// discarding anything it sends first).
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// keptAlive makes one request on a new connection and leaves it open.
func keptAlive(t *testing.T, proxyAddr string, port int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET http://limit.test:%d/ HTTP/1.1\r\nHost: limit.test\r\n\r\n", port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("keep-alive request: %d", resp.StatusCode)
	}
	return c
}

// silent opens a connection that sends nothing.
func silent(t *testing.T, proxyAddr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// tunnelTo opens an established CONNECT tunnel through the proxy.
func tunnelTo(t *testing.T, proxyAddr, target string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, br, status := connect(t, proxyAddr, target)
	t.Cleanup(func() { c.Close() })
	if !strings.Contains(status, " 200 ") {
		t.Fatalf("CONNECT %s: %q", target, status)
	}
	return c, br
}

// waitCount waits for the proxy to count n client connections.
func waitCount(t *testing.T, s *Server, n int) {
	t.Helper()
	for end := time.Now().Add(2 * time.Second); s.conns.count() != n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d connections counted, want %d", s.conns.count(), n)
		}
	}
}

func get(t *testing.T, proxyAddr string, port int) *http.Response {
	t.Helper()
	resp, _ := roundTrip(t, proxyAddr, fmt.Sprintf("GET http://limit.test:%d/x HTTP/1.1\r\nHost: limit.test\r\nConnection: close\r\n\r\n", port))
	return resp
}

func TestCapClosesTheQuietestConnectionForANewcomer(t *testing.T) {
	t.Parallel() // mostly waiting out the proxy's timers
	const max = 4
	_, port := backend(t)
	tests := []struct {
		name string
		open func(t *testing.T, addr string) net.Conn
		wait time.Duration
	}{
		{"kept alive after a request", func(t *testing.T, addr string) net.Conn { return keptAlive(t, addr, port) }, 0},
		{"connected, no request", func(t *testing.T, addr string) net.Conn { return silent(t, addr) }, quietGrace + 100*time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{MaxConns: max}
			addr, _ := limitedProxy(t, s, port)
			var idle []net.Conn
			for i := 0; i < max; i++ {
				idle = append(idle, tt.open(t, addr))
				time.Sleep(10 * time.Millisecond) // a clear order of quietness
			}
			time.Sleep(tt.wait)
			if resp := get(t, addr, port); resp.StatusCode != 200 {
				t.Fatalf("a request at the cap: %d, want 200", resp.StatusCode)
			}
			if !closedWithin(idle[0], 2*time.Second) {
				t.Error("the connection quiet for longest was not closed")
			}
			for i, c := range idle[1:] {
				if closedWithin(c, 100*time.Millisecond) {
					t.Errorf("connection %d closed too; one was enough", i+1)
				}
			}
			if n := s.conns.count(); n > max {
				t.Errorf("%d connections held, cap %d", n, max)
			}
		})
	}
}

func TestCapDoesNotCloseAFreshConnection(t *testing.T) {
	const max = 2
	_, port := backend(t)
	s := &Server{MaxConns: max}
	addr, _ := limitedProxy(t, s, port)
	fresh := []net.Conn{silent(t, addr), silent(t, addr)}
	// Both connected a moment ago: a client is about to send its request
	// on each, so the newcomer is the one refused.
	if resp := get(t, addr, port); resp.StatusCode != 503 {
		t.Errorf("a request while every connection is fresh: %d, want 503", resp.StatusCode)
	}
	for i, c := range fresh {
		fmt.Fprintf(c, "GET http://limit.test:%d/ HTTP/1.1\r\nHost: limit.test\r\nConnection: close\r\n\r\n", port)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("fresh connection %d: %v %v", i, resp, err)
		}
	}
}

func TestCapRefusesWhenEveryConnectionIsBusy(t *testing.T) {
	t.Parallel() // mostly waiting out the proxy's timers
	const max = 2
	_, port := backend(t)
	s := &Server{MaxConns: max}
	addr, accesses := limitedProxy(t, s, port)
	// Refused by the policy first: the later connection_limit refusal of
	// the same destination is reported all the same.
	if resp, _ := roundTrip(t, addr, "GET http://other.example.com/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); resp.StatusCode != 403 {
		t.Fatalf("a host not on the list: %d", resp.StatusCode)
	}
	waitCount(t, s, 0) // that connection's end frees its slot
	target := fmt.Sprintf("limit.test:%d", port)
	first, _ := tunnelTo(t, addr, target)
	tunnelTo(t, addr, target)
	time.Sleep(quietGrace) // tunnels stay busy however long they are quiet

	tests := []struct {
		raw  string
		host string
		port int
	}{
		{"CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n", "api.example.com", 443},
		{"GET http://other.example.com/ HTTP/1.1\r\nHost: x\r\n\r\n", "other.example.com", 80},
		{"POST http://other.example.com:8080/ HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", "other.example.com", 8080},
	}
	for _, tt := range tests {
		resp, body := roundTrip(t, addr, tt.raw)
		if resp.StatusCode != 503 || resp.Header.Get(ReasonHeader) != ReasonConnectionLimit {
			t.Errorf("%q: %d %q %q, want 503 connection_limit", tt.raw, resp.StatusCode, resp.Header.Get(ReasonHeader), body)
		}
	}
	var want []Access
	for _, tt := range tests {
		want = append(want, Access{Host: tt.host, Port: tt.port, Reason: ReasonConnectionLimit})
	}
	if got := accesses(); fmt.Sprint(got[len(got)-len(tests):]) != fmt.Sprint(want) {
		t.Errorf("accesses %+v, want them to end with %+v", got, want)
	}
	// A tunnel's end frees its slot.
	first.Close()
	waitCount(t, s, max-1)
	if resp := get(t, addr, port); resp.StatusCode != 200 {
		t.Errorf("after a tunnel closed: %d, want 200", resp.StatusCode)
	}
}

func TestConnectionsOverTheCapAreClosedPromptly(t *testing.T) {
	t.Parallel() // mostly waiting out the proxy's timers
	const max = 1
	_, port := backend(t)
	s := &Server{MaxConns: max}
	addr, accesses := limitedProxy(t, s, port)
	tunnelTo(t, addr, fmt.Sprintf("limit.test:%d", port))

	// Over the cap and silent: closed within refuseDeadline.
	if c := silent(t, addr); !closedWithin(c, refuseDeadline+time.Second) {
		t.Errorf("a silent connection over the cap was held past %v", refuseDeadline+time.Second)
	}
	for deadline := time.Now().Add(time.Second); len(s.refusing) > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	// With maxRefusing already waiting, the next one is closed at once.
	var waiting []net.Conn
	for i := 0; i < maxRefusing; i++ {
		waiting = append(waiting, silent(t, addr))
	}
	time.Sleep(100 * time.Millisecond) // let the proxy take them all
	if c := silent(t, addr); !closedWithin(c, refuseDeadline/2) {
		t.Errorf("a connection beyond %d being refused was not closed at once", maxRefusing)
	}
	for _, c := range waiting {
		if !closedWithin(c, refuseDeadline+time.Second) {
			t.Error("a connection waiting for its refusal was held too long")
		}
	}
	if n := s.conns.count(); n != max {
		t.Errorf("%d connections counted, want the one tunnel", n)
	}
	for _, a := range accesses() {
		if a.Reason == ReasonConnectionLimit {
			t.Errorf("a connection that named no destination was reported: %+v", a)
		}
	}
}

func TestIdleKeepAliveConnectionsAreClosed(t *testing.T) {
	_, port := backend(t)
	addr, _ := limitedProxy(t, &Server{IdleTimeout: 200 * time.Millisecond}, port)
	c := keptAlive(t, addr, port)
	if !closedWithin(c, 2*time.Second) {
		t.Error("an idle kept-alive connection stayed open past the idle timeout")
	}
}

// echoServer echoes each connection, and with stream set also writes a
// byte every tick for the given time without being asked.
func echoServer(t *testing.T, stream time.Duration, tick time.Duration) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for end := time.Now().Add(stream); time.Now().Before(end); time.Sleep(tick) {
					if _, err := c.Write([]byte(".")); err != nil {
						return
					}
				}
				io.Copy(c, c)
			}()
		}
	}()
	return int(netip.MustParseAddrPort(l.Addr().String()).Port())
}

func TestTunnelIdleTimeout(t *testing.T) {
	t.Parallel() // mostly waiting out the proxy's timers
	const idle = 300 * time.Millisecond
	const tick = 50 * time.Millisecond
	const busyFor = 4 * idle
	tests := []struct {
		name   string
		stream time.Duration // the upstream talks unasked for this long
		talk   bool          // the client talks for busyFor
	}{
		{"client talks", 0, true},
		{"upstream streams to a quiet client", busyFor, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := echoServer(t, tt.stream, tick)
			addr, _ := limitedProxy(t, &Server{TunnelIdleTimeout: idle}, port)
			c, br := tunnelTo(t, addr, fmt.Sprintf("limit.test:%d", port))
			// ended is when the tunnel closed and when its last byte came
			// (the upstream's streaming starts with its connection, before
			// busyEnd is taken, so its quiet counts from that byte).
			ended := make(chan [2]time.Time, 1)
			go func() {
				var last time.Time
				buf := make([]byte, 4096)
				for {
					n, err := br.Read(buf)
					if n > 0 {
						last = time.Now()
					}
					if err != nil {
						ended <- [2]time.Time{time.Now(), last}
						return
					}
				}
			}()
			busyEnd := time.Now().Add(busyFor)
			for time.Now().Before(busyEnd) {
				if tt.talk {
					c.Write([]byte("x"))
				}
				select {
				case at := <-ended:
					t.Fatalf("the tunnel closed while in use, %v before the traffic stopped", busyEnd.Sub(at[0]))
				case <-time.After(tick):
				}
			}
			select {
			case at := <-ended:
				from := busyEnd
				if !tt.talk && !at[1].IsZero() {
					from = at[1]
				}
				if quiet := at[0].Sub(from); quiet < idle-tick {
					t.Errorf("closed after %v of quiet, want at least %v", quiet, idle)
				}
			case <-time.After(3*idle + time.Second):
				t.Errorf("the tunnel was still open %v after the traffic stopped", 3*idle+time.Second)
			}
		})
	}
}

func TestCloseEndsTunnels(t *testing.T) {
	_, port := backend(t)
	s := &Server{}
	addr, _ := limitedProxy(t, s, port)
	c, _ := tunnelTo(t, addr, fmt.Sprintf("limit.test:%d", port))
	s.Close()
	if !closedWithin(c, 2*time.Second) {
		t.Error("a tunnel outlived Server.Close")
	}
}

func TestTunnelPassesHalfCloseOn(t *testing.T) {
	// The upstream answers, ends its side, and still reads what follows.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte("hello"))
		c.(*net.TCPConn).CloseWrite()
		b, _ := io.ReadAll(c)
		got <- string(b)
	}()
	port := int(netip.MustParseAddrPort(l.Addr().String()).Port())
	addr, _ := limitedProxy(t, &Server{}, port)
	c, br := tunnelTo(t, addr, fmt.Sprintf("limit.test:%d", port))
	if b, err := io.ReadAll(br); string(b) != "hello" || err != nil {
		t.Fatalf("read %q %v", b, err)
	}
	c.Write([]byte("after"))
	c.(*net.TCPConn).CloseWrite()
	select {
	case s := <-got:
		if s != "after" {
			t.Errorf("the upstream read %q after its half-close, want %q", s, "after")
		}
	case <-time.After(5 * time.Second):
		t.Error("the upstream never saw the client's end")
	}
}

func TestForwardedRequestToAQuietUpstreamEnds(t *testing.T) {
	t.Parallel() // mostly waiting out the proxy's timers
	const idle = 300 * time.Millisecond
	tests := []struct {
		name   string
		answer string // what the upstream sends before it goes quiet
		status int
		body   string // the start of the body the client gets
	}{
		{"no answer", "", 502, "agentrun proxy: no answer for 300ms"},
		{"part of the body", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nsome", 200, "some"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			t.Cleanup(func() { close(done); l.Close() })
			go func() {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return // the client under test went away; its own check reports why
				}
				io.WriteString(c, tt.answer)
				<-done
			}()
			port := int(netip.MustParseAddrPort(l.Addr().String()).Port())
			s := &Server{TunnelIdleTimeout: idle}
			addr, _ := limitedProxy(t, s, port)
			c := silent(t, addr)
			fmt.Fprintf(c, "GET http://limit.test:%d/ HTTP/1.1\r\nHost: limit.test\r\n\r\n", port)
			c.SetReadDeadline(time.Now().Add(3 * idle))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer within %v: %v", 3*idle, err)
			}
			body, err := io.ReadAll(resp.Body)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the body still open after %v: %q", 3*idle, body)
			}
			if resp.StatusCode != tt.status || !strings.HasPrefix(string(body), tt.body) {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tt.status, tt.body)
			}
		})
	}
}

func TestNoEventAfterClose(t *testing.T) {
	t.Parallel() // mostly waiting out the proxy's timers
	_, port := backend(t)
	s := &Server{MaxConns: 1}
	addr, accesses := limitedProxy(t, s, port)
	tunnelTo(t, addr, fmt.Sprintf("limit.test:%d", port))
	// Over the cap, its head not sent yet when the proxy closes.
	c := silent(t, addr)
	time.Sleep(100 * time.Millisecond)
	s.Close()
	fmt.Fprintf(c, "CONNECT late.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n")
	closedWithin(c, refuseDeadline+time.Second)
	for _, a := range accesses() {
		if a.Host == "late.example.com" {
			t.Errorf("reported after Close: %+v", a)
		}
	}
}
