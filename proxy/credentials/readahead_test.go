package credentials

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/proxy/meter"
)

const (
	jsonHead   = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
	jsonAnswer = `{"type":"message","model":"m","content":[],"usage":{"input_tokens":100,"output_tokens":40}}`
)

// TestAnUnreadAnswerIsCounted: an answer without streaming that the agent
// never reads a byte of (larger than the buffers between the proxy and the
// agent, so that the proxy could not pass it on) is counted when it
// arrives, not when the agent lets go of the connection.
func TestAnUnreadAnswerIsCounted(t *testing.T) {
	// Near the meter's 8 MiB: more than the buffers between the proxy and
	// an agent that reads nothing, where the send buffer may grow to 4 MiB.
	big := strings.Repeat("x", 7<<20+512<<10)
	w := newBreakWorld(t, 5*time.Second, func(c net.Conn) string {
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, jsonHead+chunk(`{"x":"`+big+`",`)+chunk(`"usage":{"input_tokens":100,"output_tokens":40}}`)+"0\r\n\r\n")
		return "sent"
	})
	tc := w.send(t)
	defer tc.Close()
	calls := w.counted(1)
	if len(calls) != 1 {
		t.Fatalf("%d calls counted while the agent read nothing; want 1", len(calls))
	}
	if c := calls[0]; c.Usage.InputTokens != 100 || c.Usage.OutputTokens != 40 || !c.Complete {
		t.Errorf("the call %+v", c)
	}
}

// counted waits up to 5 s for n calls counted, and returns those counted.
func (w *breakWorld) counted(n int) []meter.Call {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		w.mu.Lock()
		calls := append([]meter.Call{}, w.calls...)
		w.mu.Unlock()
		if len(calls) >= n || time.Now().After(deadline) {
			return calls
		}
	}
}

// answer sends a model call and reads its answer, which stays open for
// the next request (a whole answer does not end the connection).
func (w *breakWorld) answer(t *testing.T) *http.Response {
	t.Helper()
	tc := w.send(t)
	t.Cleanup(func() { tc.Close() })
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestATrickledAnswerIsNotIdle: an answer that comes in pieces, each within
// the idle limit but all together past it, is read ahead whole: the bytes
// the meter reads are the call's activity.
func TestATrickledAnswerIsNotIdle(t *testing.T) {
	w := newBreakWorld(t, 300*time.Millisecond, func(c net.Conn) string {
		io.WriteString(c, jsonHead)
		for i := 0; i < len(jsonAnswer); i += 10 {
			time.Sleep(100 * time.Millisecond)
			io.WriteString(c, chunk(jsonAnswer[i:min(i+10, len(jsonAnswer))]))
		}
		io.WriteString(c, "0\r\n\r\n")
		return "whole"
	})
	resp := w.answer(t)
	if body, err := io.ReadAll(resp.Body); err != nil || string(body) != jsonAnswer {
		t.Errorf("the agent read %q, %v; want the whole answer", body, err)
	}
	w.mu.Lock()
	unread := w.unread
	w.mu.Unlock()
	if calls := w.counted(1); len(calls) != 1 || !calls[0].Complete || len(unread) != 0 {
		t.Errorf("metered %+v, unreadable %q", calls, unread)
	}
}

// TestAnEmptyEncodedAnswerPasses: an answer without a body that names a
// content encoding (an upstream that marks whatever it sends) passes as it
// is: there is nothing to decode, and nothing to refuse.
func TestAnEmptyEncodedAnswerPasses(t *testing.T) {
	for _, head := range []string{
		"HTTP/1.1 204 No Content\r\nContent-Encoding: br\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n",
	} {
		w := newBreakWorld(t, 5*time.Second, func(c net.Conn) string {
			io.WriteString(c, head)
			time.Sleep(200 * time.Millisecond)
			return "empty"
		})
		resp := w.answer(t)
		body, err := io.ReadAll(resp.Body)
		if want, _, _ := strings.Cut(strings.TrimPrefix(head, "HTTP/1.1 "), "\r\n"); resp.Status != want || err != nil || len(body) != 0 {
			t.Errorf("%q reached the agent as %s, %q, %v", head, resp.Status, body, err)
		}
	}
}
