package cli

import (
	"bytes"
	"compress/gzip"
	"compress/lzw"
	"compress/zlib"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/proxy/credentials"
)

// tlsServer serves h over HTTPS for name on 127.0.0.1 with a certificate of
// a fresh CA, written to caFile; it returns the port.
func tlsServer(t *testing.T, h http.Handler, name, caFile string) string {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agentrun test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

// compressingUpstream answers /MODE/v1/messages with a model call of
// 10,000 tokens and /MODE/echo with the request's headers, compressed by
// MODE: honour (gzip when the client accepts it, as real APIs do), gzip and
// deflate (always, whatever was asked), compress (always LZW, which the
// proxy cannot read).
func compressingUpstream(t *testing.T, caFile string) string {
	t.Helper()
	return tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mode, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		var body []byte
		if rest == "v1/messages" {
			body = []byte(`{"id":"m","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":5000,"output_tokens":5000}}`)
			w.Header().Set("Content-Type", "application/json")
		} else {
			var lines []string
			for k, v := range r.Header {
				lines = append(lines, k+": "+strings.Join(v, ", "))
			}
			sort.Strings(lines)
			body = []byte(strings.Join(lines, "\n") + "\n")
		}
		var buf bytes.Buffer
		switch {
		case mode == "gzip" || mode == "honour" && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip"):
			zw := gzip.NewWriter(&buf)
			zw.Write(body)
			zw.Close()
			w.Header().Set("Content-Encoding", "gzip")
		case mode == "deflate":
			zw := zlib.NewWriter(&buf)
			zw.Write(body)
			zw.Close()
			w.Header().Set("Content-Encoding", "deflate")
		case mode == "compress":
			zw := lzw.NewWriter(&buf, lzw.MSB, 8)
			zw.Write(body)
			zw.Close()
			w.Header().Set("Content-Encoding", "compress")
		default:
			buf.Write(body)
		}
		w.Write(buf.Bytes())
	}), "api.test", caFile)
}

// TestCredentialCompressedResponses: the agent chooses Accept-Encoding
// (curl --compressed), but neither the meter nor the scrubbing may be
// blinded by a compressed answer. The proxy asks the upstream for none;
// an upstream that compresses anyway with gzip or deflate is decoded, and
// one that uses an encoding the proxy cannot read is refused (502, a
// network event, and with --max-tokens the run ends: the tokens of that
// call are unknown).
func TestCredentialCompressedResponses(t *testing.T) {
	const real = "sk-real-compressed-0123456789abcdef"
	caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
	port := compressingUpstream(t, caFile)
	base := "https://api.test:" + port
	args := func(ws string) []string {
		return []string{"--runtime", "claude-code", "--cwd", ws, "--credential", "KEY=api.test:" + port, "--upstream-ca", caFile,
			"--add-host", "api.test=127.0.0.1", "--allow-host", "127.0.0.1:" + port}
	}
	for _, mode := range []string{"honour", "gzip", "deflate", "compress"} {
		t.Run("meter "+mode, func(t *testing.T) {
			// Three calls of 10,000 tokens each against --max-tokens 100;
			// the CLI reports nothing and ignores the stop.
			script := fmt.Sprintf(`trap '' INT
for i in 1 2 3; do
  curl -s --compressed -o /dev/null -w "call %%{http_code}\n" -X POST -H "x-api-key: $KEY" -d '{}' %s/%s/v1/messages >&2
done`, base, mode)
			bin := fakeCLI(t, nil, script)
			r := runAgentrun(t, invocation{args: append(args(t.TempDir()), "--max-tokens", "100"), prompt: "hi",
				env: []string{"AGENTRUN_CLAUDE_BIN=" + bin, "KEY=" + real}})
			end := r.end()
			if end == nil || end.Status != events.StatusLimit || !strings.Contains(end.Detail, "--max-tokens 100") {
				t.Fatalf("three calls of 10,000 tokens against --max-tokens 100 ended %+v\nstderr %s", end, r.stderr)
			}
			if strings.Contains(string(r.stderr), "call 200\ncall 200") {
				t.Errorf("a call was served after the limit: %s", r.stderr)
			}
			if mode == "compress" {
				if !strings.Contains(end.Detail, "compress") || !strings.Contains(string(r.stderr), "call 502") {
					t.Errorf("an unreadable answer: detail %q, stderr %s", end.Detail, r.stderr)
				}
			} else if end.Meter == nil || end.Meter.Calls < 1 || end.Meter.InputTokens < 5000 {
				t.Errorf("end.meter %+v: the call was not metered", end.Meter)
			}
		})
	}
	t.Run("scrub", func(t *testing.T) {
		script := fmt.Sprintf(`for m in honour gzip deflate compress; do
  echo "== $m"
  curl -s --compressed -D - -H "X-Api-Key: $KEY" %[1]s/$m/echo
  echo
done >&2
curl -s -H "X-Api-Key: $KEY" %[1]s/honour/echo >&2`, base)
		bin := fakeCLI(t, []byte(`{"type":"result","subtype":"success","is_error":false,"result":"ok","usage":{"input_tokens":1,"output_tokens":1}}`+"\n"), script)
		r := runAgentrun(t, invocation{args: args(t.TempDir()), prompt: "hi", env: []string{"AGENTRUN_CLAUDE_BIN=" + bin, "KEY=" + real}})
		out := string(r.stderr)
		if strings.Contains(out, real) {
			t.Errorf("the real key reached the agent: %s", out)
		}
		for _, m := range []string{"honour", "gzip", "deflate"} {
			_, after, _ := strings.Cut(out, "== "+m)
			after, _, _ = strings.Cut(after, "== ")
			if !strings.Contains(after, "X-Api-Key: "+credentials.StandInPrefix) {
				t.Errorf("%s: the echoed header did not come back scrubbed: %s", m, out)
			}
		}
		if _, after, _ := strings.Cut(out, "== compress"); !strings.Contains(after, "502") || !strings.Contains(after, "unsupported_encoding") {
			t.Errorf("an answer in an encoding the proxy cannot read was passed on: %s", after)
		}
		refused := false
		for _, e := range r.events {
			if n, ok := e.(*events.NetworkAccess); ok && !n.Allowed && *n.Reason == "unsupported_encoding" && n.Host == "api.test" {
				refused = true
			}
		}
		if !refused {
			t.Errorf("no network event with reason unsupported_encoding")
		}
	})
}
