// Command connflood attacks the sandbox's filter proxy with idle
// connections, then makes one ordinary request through it, for the proxy
// resource-limit test:
//
//	connflood N WAIT URL [GATE]
//
// opens N connections to the proxy named by HTTP_PROXY and sends nothing
// on them, waits WAIT (a Go duration), then GETs URL through the proxy
// with the connections still open. With GATE it first creates GATE.ready
// and waits for GATE to exist, so the test can act on the runner once the
// sandbox is up. It prints
//
//	ok status=CODE ms=ELAPSED opened=N closed=K
//
// where closed counts the flood connections the proxy had closed a
// moment after the request, or "denied: ERROR" when the request failed.
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) != 4 && len(os.Args) != 5 {
		fmt.Println("usage: connflood N WAIT URL [GATE]")
		os.Exit(2)
	}
	n, err1 := strconv.Atoi(os.Args[1])
	wait, err2 := time.ParseDuration(os.Args[2])
	proxy, err3 := url.Parse(os.Getenv("HTTP_PROXY"))
	if err1 != nil || err2 != nil || err3 != nil || proxy.Host == "" {
		fmt.Println("usage: connflood N WAIT URL [GATE], with HTTP_PROXY set")
		os.Exit(2)
	}
	if len(os.Args) == 5 {
		if err := gate(os.Args[4]); err != nil {
			fmt.Println("denied:", err)
			return
		}
	}
	var closed atomic.Int64
	opened := flood(proxy.Host, n, &closed)
	time.Sleep(wait)

	client := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{Proxy: http.ProxyURL(proxy), DisableKeepAlives: true}}
	start := time.Now()
	resp, err := client.Get(os.Args[3])
	if err != nil {
		fmt.Printf("denied: %v (after %v, opened=%d closed=%d)\n", err, time.Since(start), opened, closed.Load())
		return
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		fmt.Printf("reading the answer: %v\n", err)
	}
	resp.Body.Close()
	elapsed := time.Since(start)
	// The proxy closes refused connections within a few seconds at most.
	time.Sleep(3 * time.Second)
	fmt.Printf("ok status=%d ms=%d opened=%d closed=%d\n", resp.StatusCode, elapsed.Milliseconds(), opened, closed.Load())
}

// flood opens up to n idle connections to addr; each one counts in closed
// once the proxy closes it. It returns how many it opened.
func flood(addr string, n int, closed *atomic.Int64) int {
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			fmt.Fprintf(os.Stderr, "connection %d: %v\n", i, err)
			return i
		}
		go func() {
			_, _ = io.Copy(io.Discard, c) // returns when the proxy closes it (how does not matter)
			closed.Add(1)
		}()
	}
	return n
}

// gate announces GATE.ready and waits for GATE.
func gate(path string) error {
	if err := os.WriteFile(path+".ready", nil, 0o644); err != nil {
		return err
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s did not appear", path)
}
