package credentials

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/proxy"
	"github.com/agentrun-dev/agentrun/proxy/meter"
)

// BenchmarkInterception compares, in one run, a streamed model response
// through the credential path (TLS terminated at the proxy, the key put
// in, the body metered and scrubbed, TLS again to the upstream) with the
// same response through an opaque CONNECT tunnel: throughput of a 32 MiB
// server-sent event stream, and the median latency of small requests on a
// kept-alive connection. Targets: >= 50% of the tunnel's throughput and
// <= 2 ms added per request (hack/bench-credentials.sh).
func BenchmarkInterception(b *testing.B) {
	const streamBytes, chunk, small = 32 << 20, 4 << 10, 300
	upCA := benchCA(b)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" {
			fmt.Fprint(w, "ok")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		line := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"" +
			padding(chunk-100) + "\"}}\n\n")
		for sent := 0; sent < streamBytes; sent += len(line) {
			w.Write(line)
			f.Flush()
		}
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{benchLeaf(b, upCA, "api.bench")}}
	up.StartTLS()
	defer up.Close()
	_, portStr, _ := net.SplitHostPort(up.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	c, _ := Parse("KEY=api.bench:"+portStr, func(string) (string, bool) { return "sk-real-bench", true })
	set, _ := NewSet([]*Credential{c})
	ca, err := NewAuthority(set.Dests(), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	run := func(intercept bool) (mibs float64, median time.Duration) {
		policy, _ := proxy.NewPolicy(proxy.ModeCustom, []string{"api.bench:" + portStr, "127.0.0.1:" + portStr})
		srv := &proxy.Server{Policy: policy, Resolver: &proxy.HostResolver{Static: map[string][]netip.Addr{"api.bench": {netip.MustParseAddr("127.0.0.1")}}}}
		roots := upCA.pool
		if intercept {
			srv.Intercept = &Interceptor{Set: set, Authority: ca, Meter: &meter.Meter{}, RootCAs: upCA.pool}
			roots = x509.NewCertPool()
			roots.AppendCertsFromPEM(ca.CertPEM())
		}
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		go srv.Serve(l)
		defer srv.Close()
		conn, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "CONNECT api.bench:%d HTTP/1.1\r\nHost: api.bench:%d\r\n\r\n", port, port)
		br := bufio.NewReader(conn)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			b.Fatalf("CONNECT: %v %v", resp, err)
		}
		tc := tls.Client(conn, &tls.Config{ServerName: "api.bench", RootCAs: roots})
		rd := bufio.NewReader(tc)
		do := func(path string) int64 {
			fmt.Fprintf(tc, "POST %s HTTP/1.1\r\nHost: api.bench\r\nX-Api-Key: %s\r\nContent-Length: 2\r\n\r\n{}", path, c.StandIn)
			resp, err := http.ReadResponse(rd, nil)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return n
		}
		do("/small") // the handshake, outside the measurement
		start := time.Now()
		n := do("/v1/messages")
		mibs = float64(n) / (1 << 20) / time.Since(start).Seconds()
		lat := make([]time.Duration, small)
		for i := range lat {
			t0 := time.Now()
			do("/small")
			lat[i] = time.Since(t0)
		}
		slices.Sort(lat)
		return mibs, lat[len(lat)/2]
	}
	for i := 0; i < b.N; i++ {
		tunnelMiBs, tunnelLat := run(false)
		icptMiBs, icptLat := run(true)
		b.ReportMetric(tunnelMiBs, "tunnel-MiB/s")
		b.ReportMetric(icptMiBs, "intercept-MiB/s")
		b.ReportMetric(100*icptMiBs/tunnelMiBs, "%-of-tunnel")
		b.ReportMetric(float64(tunnelLat.Microseconds())/1000, "tunnel-latency-ms")
		b.ReportMetric(float64(icptLat.Microseconds())/1000, "intercept-latency-ms")
		b.ReportMetric(float64((icptLat-tunnelLat).Microseconds())/1000, "latency-added-ms")
	}
}

func padding(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}

type benchAuthority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func benchCA(b *testing.B) *benchAuthority {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench upstream CA"}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		b.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &benchAuthority{cert: cert, key: key, pool: pool}
}

func benchLeaf(b *testing.B, ca *benchAuthority, host string) tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		b.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
