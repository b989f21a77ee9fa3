package credentials

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

const real = "sk-real-0123456789"

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestParse(t *testing.T) {
	env := lookup(map[string]string{"ANTHROPIC_API_KEY": real, "EMPTY": " ", "NL": "line one\nline two", "SHORT": "k"})
	c, err := Parse("ANTHROPIC_API_KEY=api.anthropic.com:443,[::1]:8080,Gateway.Test.:80", env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "ANTHROPIC_API_KEY" || len(c.Dests) != 3 || c.Dests[0] != (Dest{Host: "api.anthropic.com", Port: 443}) ||
		c.Dests[1] != (Dest{Host: "::1", Port: 8080}) || c.Dests[2] != (Dest{Host: "gateway.test", Port: 80}) {
		t.Errorf("parsed %+v", c)
	}
	if !strings.HasPrefix(c.StandIn, StandInPrefix) || strings.Contains(c.StandIn, real) || c.String() != "ANTHROPIC_API_KEY" {
		t.Errorf("stand-in %q", c.StandIn)
	}
	if c2, _ := Parse("ANTHROPIC_API_KEY=api.anthropic.com:443", env); c2.StandIn == c.StandIn {
		t.Errorf("stand-ins must differ from run to run")
	}
	for flag, want := range map[string]string{
		"ANTHROPIC_API_KEY":                   "expected NAME=HOST:PORT",
		"1X=h:1":                              "expected NAME=HOST:PORT",
		"ANTHROPIC_API_KEY=api.anthropic.com": "is not HOST:PORT",
		"ANTHROPIC_API_KEY=h:0":               "port must be 1-65535",
		"ANTHROPIC_API_KEY=bad_host!:443":     "is not a host name",
		"ANTHROPIC_API_KEY=..x:443":           "is not a host name",
		"MISSING=h:443":                       "is not set in agentrun's environment",
		"EMPTY=h:443":                         "is empty",
		"NL=h:443":                            "line break",
		"SHORT=h:443":                         "is 1 bytes; a credential needs at least 8",
		"ANTHROPIC_API_KEY=ftp://h:21":        "only http://",
		"ANTHROPIC_API_KEY=http://h:80/v1":    "without a path",
		"ANTHROPIC_API_KEY=http://h":          "is not HOST:PORT",
	} {
		if _, err := Parse(flag, env); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", flag, err, want)
		}
		if err != nil && strings.Contains(err.Error(), real) {
			t.Errorf("an error shows the value: %v", err)
		}
	}
	if _, err := NewSet([]*Credential{c, c}); err == nil {
		t.Errorf("a name given twice must be refused")
	}
}

func TestInjectOnlyForItsDestinations(t *testing.T) {
	c, _ := Parse("KEY=api.example.com:443", lookup(map[string]string{"KEY": real}))
	set, _ := NewSet([]*Credential{c})
	if got := set.For("API.example.com.", 443); len(got) != 1 {
		t.Errorf("For matches names case-insensitively")
	}
	if got := set.For("api.example.com", 80); len(got) != 0 {
		t.Errorf("another port is another destination")
	}
	basic := base64.StdEncoding.EncodeToString([]byte("user:" + c.StandIn))
	h := http.Header{"X-Api-Key": {c.StandIn}, "Authorization": {"Bearer " + c.StandIn}, "X-Other": {"a " + c.StandIn + " b"}}
	Inject(h, set.For("api.example.com", 443))
	if h.Get("X-Api-Key") != real || h.Get("Authorization") != "Bearer "+real || h.Get("X-Other") != "a "+c.StandIn+" b" {
		t.Errorf("injected %v", h)
	}
	h = http.Header{"Authorization": {"Basic " + basic}}
	Inject(h, set.For("api.example.com", 443))
	if dec, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(h.Get("Authorization"), "Basic ")); string(dec) != "user:"+real {
		t.Errorf("Basic: %q", dec)
	}
	h = http.Header{"X-Api-Key": {c.StandIn}}
	Inject(h, set.For("elsewhere.example.com", 443))
	if h.Get("X-Api-Key") != c.StandIn {
		t.Errorf("elsewhere the stand-in passes unchanged")
	}
	if env := set.Env(); len(env) != 1 || env[0] != "KEY="+c.StandIn || strings.Contains(env[0], real) {
		t.Errorf("Env = %v", env)
	}
	resp := http.Header{"X-Echo": {"your key " + real}}
	Scrub(resp, SecretsOf(nil, set.For("api.example.com", 443)))
	if resp.Get("X-Echo") != "your key "+c.StandIn {
		t.Errorf("Scrub: %v", resp)
	}
	if got := string(set.Redact([]byte("detail " + real))); got != "detail "+c.StandIn {
		t.Errorf("Redact: %q", got)
	}
}

func TestScrubBodyAcrossReads(t *testing.T) {
	c, _ := Parse("KEY=h:1", lookup(map[string]string{"KEY": real}))
	body := "data: start\n\ndata: echo " + real + " and " + real[:5] + "\n\ndata: end " + real
	for _, name := range []string{"whole", "one byte at a time"} {
		var r io.Reader = strings.NewReader(body)
		if name != "whole" {
			r = iotest.OneByteReader(r)
		}
		got, err := io.ReadAll(ScrubBody(io.NopCloser(r), SecretsOf(nil, []*Credential{c})))
		want := strings.ReplaceAll(body, real, c.StandIn)
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	// Nothing that cannot begin the value is held back: an event is
	// passed on as soon as it is read.
	pr, pw := io.Pipe()
	sb := ScrubBody(pr, SecretsOf(nil, []*Credential{c}))
	go pw.Write([]byte("data: delta\n\n"))
	buf := make([]byte, 64)
	n, _ := sb.Read(buf)
	if string(buf[:n]) != "data: delta\n\n" {
		t.Errorf("first read %q", buf[:n])
	}
	pw.Close()
}

func TestAuthority(t *testing.T) {
	a, err := NewAuthority([]Dest{{Host: "api.example.com", Port: 443}, {Host: "10.0.0.7", Port: 8443}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(a.CertPEM()) || bytes.Contains(a.CertPEM(), []byte("PRIVATE")) {
		t.Fatalf("the authority's PEM")
	}
	for _, host := range []string{"api.example.com", "10.0.0.7"} {
		leaf, err := a.Certificate(&tls.ClientHelloInfo{ServerName: host})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("%s: %v", host, err)
		}
		if again, _ := a.Leaf(host); again != leaf {
			t.Errorf("leaves are made once")
		}
	}
	if _, err := a.Leaf("www.example.org"); err == nil {
		t.Errorf("a leaf for a host that is not a credential host")
	}
	// Name constraints: even with the key, nothing else verifies.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, other := range []string{"www.example.org", "bank.test"} {
		tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: other}, DNSNames: []string{other},
			NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
		if err != nil {
			t.Fatal(err)
		}
		forged, _ := x509.ParseCertificate(der)
		if _, err := forged.Verify(x509.VerifyOptions{Roots: pool, DNSName: other}); err == nil {
			t.Errorf("the authority could sign for %s", other)
		}
	}
}

// TestPlainHTTPDestinations: only a destination written http://HOST:PORT
// takes the real value in plain HTTP; https:// and no scheme are TLS, and
// loopback is not exempt. One destination cannot be both.
func TestPlainHTTPDestinations(t *testing.T) {
	env := lookup(map[string]string{"A": real, "B": real})
	a, err := Parse("A=http://Mock.Test:8080,https://api.test:443,127.0.0.1:9000,HTTP://[::1]:80", env)
	if err != nil {
		t.Fatal(err)
	}
	want := []Dest{{Host: "mock.test", Port: 8080, Plain: true}, {Host: "api.test", Port: 443}, {Host: "127.0.0.1", Port: 9000}, {Host: "::1", Port: 80, Plain: true}}
	if fmt.Sprint(a.Dests) != fmt.Sprint(want) {
		t.Errorf("parsed %+v, want %+v", a.Dests, want)
	}
	set, err := NewSet([]*Credential{a})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		host  string
		port  int
		plain bool
	}{{"mock.test.", 8080, true}, {"MOCK.test", 8080, true}, {"api.test", 443, false}, {"127.0.0.1", 9000, false}, {"[::1]", 80, true}, {"mock.test", 443, false}} {
		if got := set.PlainHTTP(tt.host, tt.port); got != tt.plain {
			t.Errorf("PlainHTTP(%s, %d) = %v", tt.host, tt.port, got)
		}
	}
	b, _ := Parse("B=mock.test:8080", env)
	if _, err := NewSet([]*Credential{a, b}); err == nil || !strings.Contains(err.Error(), "both as http://mock.test:8080") {
		t.Errorf("one destination as plain and TLS: %v", err)
	}
}
