package proxy

import (
	"io"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"
	"time"
)

// TestAnswerWhileTheRequestStillArrives: an upstream may answer before the
// whole request body reached it (a stream starts as soon as the request's
// start is read). The proxy sends the body on while it relays the answer:
// net/http's server would otherwise read away and close what is left of
// the body as the answer's headers go out, under the transport that is
// still sending it, and the answer broke off (a flaky credentials test:
// pi's "terminated").
func TestAnswerWhileTheRequestStillArrives(t *testing.T) {
	got := make(chan string, 1)
	w := newInterceptWorldServing(t, false, func(rw http.ResponseWriter, r *http.Request) {
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
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	// The breakage was a race (the transport and the server's discard both
	// reading the rest of the body): tried often enough to show.
	for i := 0; i < 20; i++ {
		target := []string{w.upstream, w.other}[i%2] // intercepted, and not
		pr, pw := io.Pipe()
		go func() {
			_, _ = io.WriteString(pw, "first half, ")
			time.Sleep(50 * time.Millisecond) // the answer's headers are out by now
			_, _ = io.WriteString(pw, "second half")
			pw.Close()
		}()
		resp, err := client.Post("http://"+target+"/v1/stream", "text/plain", pr)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !strings.HasSuffix(string(answer), "data: done\n\n") {
			t.Errorf("%s: the answer broke off: %q, %v", target, answer, err)
		}
		select {
		case body := <-got:
			if body != "first half, second half" {
				t.Errorf("%s: the upstream got the body %q", target, body)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: the upstream never got the whole body", target)
		}
	}
}
