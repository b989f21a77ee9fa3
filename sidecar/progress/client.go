package progress

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agentrun-dev/agentrun/podcontract"
)

// NewHTTPClient is the reader's HTTP client for Pod addresses: no proxy
// from the environment (Pod addresses are reached directly), no
// redirects (a document is only ever read from the Pod asked), no
// compression, short connect and header timeouts, and one kept-alive
// connection per Pod for its long polls.
func NewHTTPClient(maxPods int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:           maxPods,
			MaxIdleConnsPerHost:    1,
			IdleConnTimeout:        90 * time.Second,
			ResponseHeaderTimeout:  MaxWait + 5*time.Second,
			DisableCompression:     true,
			MaxResponseHeaderBytes: 8 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// URL is the document's address on a Pod.
func URL(ip string, port int) string {
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(port)) + podcontract.ProgressPath
}

// Fetch reads the document at base (URL's address). With a cursor, it
// waits up to wait for a document that differs from the cursor's. The
// answer is read to at most MaxBytes and validated: a Pod's document is
// untrusted.
func Fetch(ctx context.Context, hc *http.Client, base string, after *Cursor, wait time.Duration) (*Doc, error) {
	u := base
	if after != nil {
		q := url.Values{}
		q.Set("after", strconv.FormatInt(after.Version, 10))
		q.Set("boot", after.Boot)
		q.Set("wait", wait.String())
		u += "?" + q.Encode()
	}
	ctx, cancel := context.WithTimeout(ctx, wait+5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("progress: %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("progress document longer than %d bytes", MaxBytes)
	}
	var d Doc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("progress document: %w", err)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}
