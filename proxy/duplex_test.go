package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"
	"time"
)

// TestAnswerWhileTheRequestStillArrives: an upstream may answer before the
// whole request body reached it (a stream starts as soon as the request's
// start is read). The proxy sends the body on, whole, while it relays the
// answer: net/http's server would otherwise read away and close what is
// left of the body as the answer's headers go out, under the transport
// that is still sending it, and the answer broke off or the upstream got
// a body with a hole (a flaky credentials test: pi's "terminated").
func TestAnswerWhileTheRequestStillArrives(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
		url  func(w *interceptWorld) string
	}{
		{"intercepted, in a CONNECT tunnel", true, func(w *interceptWorld) string { return "https://" + w.upstream }},
		{"intercepted, absolute form", false, func(w *interceptWorld) string { return "http://" + w.upstream }},
		{"not intercepted", false, func(w *interceptWorld) string { return "http://" + w.other }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan string, 1)
			w := newInterceptWorldServing(t, tc.tls, func(rw http.ResponseWriter, r *http.Request) {
				rw.Header().Set("Content-Type", "text/event-stream")
				rw.WriteHeader(http.StatusOK)
				_ = http.NewResponseController(rw).EnableFullDuplex()
				_, _ = io.WriteString(rw, "data: started\n\n")
				rw.(http.Flusher).Flush()
				body, _ := io.ReadAll(r.Body)
				got <- string(body)
				_, _ = io.WriteString(rw, "data: done\n\n")
			})
			proxyURL, _ := neturl.Parse(w.proxyURL)
			tr := &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: w.icpt.certs.pool}}
			defer tr.CloseIdleConnections()
			pr, pw := io.Pipe()
			var want strings.Builder
			want.WriteString("first half, ")
			for k := 0; k < 5; k++ {
				fmt.Fprintf(&want, "piece %d, ", k)
			}
			go func() {
				_, _ = io.WriteString(pw, "first half, ")
				time.Sleep(50 * time.Millisecond) // the answer's headers are out by now
				for k := 0; k < 5; k++ {
					fmt.Fprintf(pw, "piece %d, ", k)
					time.Sleep(5 * time.Millisecond)
				}
				pw.Close()
			}()
			resp, err := (&http.Client{Transport: tr}).Post(tc.url(w)+"/v1/stream", "text/plain", pr)
			if err != nil {
				t.Fatal(err)
			}
			answer, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !strings.HasSuffix(string(answer), "data: done\n\n") {
				t.Errorf("the answer broke off: %q, %v", answer, err)
			}
			select {
			case body := <-got:
				if body != want.String() {
					t.Errorf("the upstream got the body %q, want %q", body, want.String())
				}
			case <-time.After(5 * time.Second):
				t.Errorf("the upstream never got the whole body")
			}
		})
	}
}

// TestTheRestOfAnUploadIsNoRequest: when the answer goes out before the
// client's body ended, the proxy closes the connection after the answer:
// the rest of the body, which may hold the text of a request, is never
// read as the client's next request on that connection.
func TestTheRestOfAnUploadIsNoRequest(t *testing.T) {
	paths := make(chan string, 4)
	w := newInterceptWorldServing(t, false, func(rw http.ResponseWriter, r *http.Request) {
		paths <- r.URL.Path
		_ = http.NewResponseController(rw).EnableFullDuplex()
		rw.Header().Set("Content-Length", "2")
		_, _ = io.WriteString(rw, "ok") // before the body ended
	})
	rest := fmt.Sprintf("GET http://%s/from-the-body HTTP/1.1\r\nHost: %s\r\n\r\n", w.other, w.other)
	c, err := net.Dial("tcp", strings.TrimPrefix(w.proxyURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST http://%s/upload HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\nhello", w.other, w.other, len("hello")+len(rest))
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	if !resp.Close {
		t.Errorf("the answer to an upload still under way keeps the connection open")
	}
	_, _ = io.WriteString(c, rest) // the rest of the upload
	if next, err := http.ReadResponse(br, nil); err == nil {
		t.Errorf("the rest of the upload was answered as a request: %s", next.Status)
	}
	close(paths)
	for p := range paths {
		if p != "/upload" {
			t.Errorf("the upstream was sent %s, from the body of an upload", p)
		}
	}
}

// TestAWholeUploadKeepsTheConnection: an answer after the whole body
// reached the upstream leaves the client's connection open for its next
// request (closing is for uploads still under way).
func TestAWholeUploadKeepsTheConnection(t *testing.T) {
	w := newInterceptWorldServing(t, false, func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(rw, "got "+string(body))
	})
	c, err := net.Dial("tcp", strings.TrimPrefix(w.proxyURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	for i := 0; i < 2; i++ {
		fmt.Fprintf(c, "POST http://%s/v1/x HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\n\r\nhello", w.other, w.other)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "got hello" || resp.Close {
			t.Errorf("request %d: %q, connection closed %v", i, b, resp.Close)
		}
	}
}
