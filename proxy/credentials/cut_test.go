package credentials

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/proxy/meter"
)

// A model stream that breaks off, through the credential path (CONNECT,
// the interceptor's TLS, the meter, the scrubber): the upstream cuts it,
// goes quiet, or the agent leaves halfway.

const (
	sseHead    = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	startEvent = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n"
)

func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// breakWorld is a TLS model API whose handler writes raw answers, behind
// a proxy whose interceptor holds its key and meters its calls.
type breakWorld struct {
	proxyAddr string
	upstream  string
	cred      *Credential
	authority *Authority
	logs      *syncBuffer
	upDone    chan string // how each upstream connection ended

	mu     sync.Mutex
	calls  []meter.Call
	unread []string
}

func newBreakWorld(t *testing.T, idle time.Duration, serve func(c net.Conn) string) *breakWorld {
	t.Helper()
	w := &breakWorld{logs: &syncBuffer{}, upDone: make(chan string, 16)}
	ca := newLeakCA(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	_, port, _ := net.SplitHostPort(l.Addr().String())
	w.upstream = leakHost + ":" + port
	if w.cred, err = Parse("KEY="+w.upstream, lookup(map[string]string{"KEY": leakKeys[0]})); err != nil {
		t.Fatal(err)
	}
	set, _ := NewSet([]*Credential{w.cred})
	if w.authority, err = NewAuthority(set.Dests(), time.Now()); err != nil {
		t.Fatal(err)
	}
	cert := ca.leaf(t, leakHost, leakHost)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{*cert}})
				if tc.Handshake() != nil {
					return
				}
				req, err := http.ReadRequest(bufio.NewReader(tc))
				if err != nil {
					return
				}
				// Read whole: a close with the request's bytes unread
				// would reset the connection, and the proxy could lose
				// the end of an answer it had not read yet.
				if _, err := io.Copy(io.Discard, req.Body); err != nil {
					return
				}
				w.upDone <- serve(tc)
			}()
		}
	}()
	prev := log.Writer()
	log.SetOutput(w.logs)
	t.Cleanup(func() { log.SetOutput(prev) })
	// As with --max-tokens: answers without streaming are read ahead.
	m := &meter.Meter{
		OnCall:       func(c meter.Call, _ meter.Usage) { w.mu.Lock(); w.calls = append(w.calls, c); w.mu.Unlock() },
		OnUnreadable: func(why string) { w.mu.Lock(); w.unread = append(w.unread, why); w.mu.Unlock() },
		ReadAhead:    true,
	}
	icpt := &Interceptor{Set: set, Authority: w.authority, RootCAs: ca.pool, Meter: m}
	w.proxyAddr = serveProxy(t, icpt, idle, w.upstream, l.Addr().String())
	return w
}

// call sends a model call through CONNECT and the interceptor's TLS, as
// an agent does, and returns the raw answer; stopAfter > 0 leaves after
// that many bytes.
func (w *breakWorld) call(t *testing.T, stopAfter int) string {
	t.Helper()
	tc := w.send(t)
	defer tc.Close()
	var all bytes.Buffer
	if stopAfter > 0 {
		_, _ = io.CopyN(&all, tc, int64(stopAfter))
	} else {
		_, _ = io.Copy(&all, tc)
	}
	return all.String()
}

// send sends a model call through CONNECT and the interceptor's TLS, as
// an agent does, and returns the connection, its answer unread.
func (w *breakWorld) send(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", w.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", w.upstream, w.upstream)
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		c.Close()
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tlsToProxy(t, &readerConn{Conn: c, r: br}, w.authority)
	fmt.Fprintf(tc, "POST /v1/messages HTTP/1.1\r\nHost: %s\r\nX-Api-Key: %s\r\nContent-Length: 2\r\n\r\n{}", w.upstream, w.cred.StandIn)
	return tc
}

// metered is what the meter recorded once it counted a call and called
// one unreadable (or 5 s passed), and a moment more: a second record of
// the same call would show.
func (w *breakWorld) metered(t *testing.T) ([]meter.Call, []string) {
	t.Helper()
	snapshot := func() ([]meter.Call, []string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return append([]meter.Call{}, w.calls...), append([]string{}, w.unread...)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if calls, unread := snapshot(); len(calls) > 0 && len(unread) > 0 {
			break
		}
	}
	time.Sleep(100 * time.Millisecond)
	return snapshot()
}

// upstreamEnded waits for the upstream's connection to end.
func (w *breakWorld) upstreamEnded(t *testing.T) {
	t.Helper()
	select {
	case <-w.upDone:
	case <-time.After(5 * time.Second):
		t.Errorf("the upstream connection was still open 5 s after the answer broke off")
	}
}

// TestCutStreamStaysCutAndMetered: a stream the upstream cuts reaches the
// agent with what came before and then broken (no last chunk); a part of
// the key the scrubber held back at the cut comes out as the stand-in's;
// the meter counts the call as cut short; nothing is logged.
func TestCutStreamStaysCutAndMetered(t *testing.T) {
	key := leakKeys[0]
	w := newBreakWorld(t, 5*time.Second, func(c net.Conn) string {
		io.WriteString(c, sseHead+chunk(startEvent)+chunk("data: {\"t\":\""+key[:12]))
		return "cut"
	})
	got := w.call(t, 0)
	if !strings.Contains(got, "message_start") || strings.HasSuffix(got, "0\r\n\r\n") {
		t.Errorf("the agent did not get the events before the cut, then a broken answer:\n%s", got)
	}
	if strings.Contains(got, key[:12]) || !strings.Contains(got, w.cred.StandIn[:12]) {
		t.Errorf("the part of the key held back at the cut: want the stand-in's:\n%s", got)
	}
	calls, unread := w.metered(t)
	if len(calls) != 1 || calls[0].Complete || len(unread) != 1 {
		t.Errorf("meter: calls %+v, unreadable %q; want one call cut short", calls, unread)
	}
	w.upstreamEnded(t)
	if s := w.logs.String(); s != "" {
		t.Errorf("logged: %q", s)
	}
}

// TestQuietStreamEndsCutAndMetered: a stream whose upstream goes quiet
// past the idle timeout ends broken for the agent, its upstream closed,
// and the meter counts the call as cut short.
func TestQuietStreamEndsCutAndMetered(t *testing.T) {
	w := newBreakWorld(t, 300*time.Millisecond, func(c net.Conn) string {
		io.WriteString(c, sseHead+chunk(startEvent))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.Copy(io.Discard, c) // until the proxy closes it
		return fmt.Sprint(err)
	})
	got := w.call(t, 0)
	if !strings.Contains(got, "message_start") || strings.HasSuffix(got, "0\r\n\r\n") {
		t.Errorf("the quiet stream did not end broken:\n%s", got)
	}
	w.upstreamEnded(t)
	if calls, unread := w.metered(t); len(calls) != 1 || calls[0].Complete || len(unread) != 1 {
		t.Errorf("meter: calls %+v, unreadable %q; want one call cut short", calls, unread)
	}
}

// TestAgentThatLeavesMidStreamIsMetered: an agent that reads what it wants
// of a stream and closes the connection before the final usage does not
// make the call vanish from the meter (with --max-tokens, a way around
// the cap): it is counted as cut short, and the upstream is closed.
func TestAgentThatLeavesMidStreamIsMetered(t *testing.T) {
	w := newBreakWorld(t, 5*time.Second, func(c net.Conn) string {
		io.WriteString(c, sseHead+chunk(startEvent))
		for i := 0; ; i++ {
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(c, chunk(fmt.Sprintf("data: {\"i\":%d,\"pad\":%q}\n\n", i, strings.Repeat("x", 4000)))); err != nil {
				return fmt.Sprint(err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	w.call(t, 2000)
	w.upstreamEnded(t)
	if calls, unread := w.metered(t); len(calls) != 1 || calls[0].Complete || len(unread) != 1 {
		t.Errorf("meter: calls %+v, unreadable %q; want one call cut short", calls, unread)
	}
}
