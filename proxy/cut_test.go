package proxy

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"
)

// cutAnswer writes the headers and the first part of an answer (none for
// /headers-only), then drops the connection: an upstream that crashed or
// was cut off.
func cutAnswer(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/sized" {
		rw.Header().Set("Content-Length", "1000")
	} else {
		rw.Header().Set("Content-Type", "text/event-stream")
	}
	rw.WriteHeader(http.StatusOK)
	if r.URL.Path != "/headers-only" {
		_, _ = io.WriteString(rw, "data: {\"delta\":\"half an ans\"}\n\n")
	}
	rw.(http.Flusher).Flush()
	conn, _, err := http.NewResponseController(rw).Hijack()
	if err != nil {
		panic(err)
	}
	conn.Close()
}

// TestCutAnswerReachesTheClientCut: an answer the upstream cuts halfway
// reaches the client with what came before the cut and then broken, on
// each of the proxy's copy paths, never as an answer that ended: an agent
// would take a model's half answer (a server-sent event stream without its
// last events) for the whole.
func TestCutAnswerReachesTheClientCut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tls    bool // the intercepted destination speaks TLS: a CONNECT tunnel to the proxy's inner server
		target func(w *interceptWorld) string
		path   string
	}{
		{"event stream, intercepted in a CONNECT tunnel (batched copy)", true, func(w *interceptWorld) string { return "https://" + w.upstream }, "/v1/stream"},
		{"event stream, intercepted in absolute form (batched copy)", false, func(w *interceptWorld) string { return "http://" + w.upstream }, "/v1/stream"},
		{"event stream, not intercepted (flushed copy)", false, func(w *interceptWorld) string { return "http://" + w.other }, "/v1/stream"},
		{"body of a given length (block copy)", false, func(w *interceptWorld) string { return "http://" + w.other }, "/sized"},
		// Cut before the first byte of the body: the agent still gets
		// the status, then the answer broken off, not a connection that
		// closed before any answer (which a client may send again).
		{"event stream cut before its body, in a CONNECT tunnel", true, func(w *interceptWorld) string { return "https://" + w.upstream }, "/headers-only"},
		{"event stream cut before its body, not intercepted", false, func(w *interceptWorld) string { return "http://" + w.other }, "/headers-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newInterceptWorldServing(t, tc.tls, cutAnswer)
			proxyURL, _ := neturl.Parse(w.proxyURL)
			client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL),
				TLSClientConfig: &tls.Config{RootCAs: w.icpt.certs.pool}}}
			resp, err := client.Get(tc.target(w) + tc.path)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err == nil || errors.Is(err, io.EOF) {
				t.Errorf("the cut answer read as whole (%q, %v)", got, err)
			}
			if tc.path != "/headers-only" && !strings.Contains(string(got), "half an ans") {
				t.Errorf("what arrived before the cut did not reach the client: %q", got)
			}
		})
	}
}
