package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
)

// combinedPEM writes a certificate followed by its private key, readable
// by the runner's user only (a server's cert-and-key file), and returns the
// path and a line of each block's base64.
func combinedPEM(t *testing.T, dir string) (path, certLine, keyLine string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "gateway.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	path = filepath.Join(dir, "combined.pem")
	body := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, base64.StdEncoding.EncodeToString(der)[:64], base64.StdEncoding.EncodeToString(keyDER)[:40]
}

// TestCredentialCAMergeTakesOnlyCertificates: an --env-file in the
// workspace, which an earlier run's agent may have edited, names a PEM file
// holding a certificate and its private key, readable only by the runner.
// The runner merges the user's CA files into the bundle the CLIs (and so
// the agent) read: the certificate must arrive there, the key must not.
// A name in the workspace that is a symbolic link is refused, not followed.
func TestCredentialCAMergeTakesOnlyCertificates(t *testing.T) {
	const real = "sk-real-ca-merge-0123456789"
	combined, certLine, keyLine := combinedPEM(t, t.TempDir())
	bin := fakeCLI(t, []byte(`{"type":"result","subtype":"success","is_error":false,"result":"ok","usage":{"input_tokens":1,"output_tokens":1}}`+"\n"),
		`cat "$SSL_CERT_FILE" "$NODE_EXTRA_CA_CERTS" "$CURL_CA_BUNDLE" "$REQUESTS_CA_BUNDLE" >&2`)
	for _, v := range []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"} {
		t.Run(v, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.WriteFile(filepath.Join(ws, ".env"), []byte(v+"="+combined+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--cwd", ws, "--env-file", filepath.Join(ws, ".env"),
				"--credential", "KEY=api.test:443"}, prompt: "hi", env: []string{"AGENTRUN_CLAUDE_BIN=" + bin, "KEY=" + real}})
			if end := r.end(); end == nil || end.Status != events.StatusFinished {
				t.Fatalf("end %+v\nstderr %s", end, r.stderr)
			}
			if strings.Contains(string(r.stderr), "PRIVATE KEY") || strings.Contains(string(r.stderr), keyLine) {
				t.Errorf("the private key of %s reached the agent's CA bundle", combined)
			}
			if !strings.Contains(string(r.stderr), certLine) {
				t.Errorf("the certificate of %s is not in the agent's CA bundle", combined)
			}
		})
	}
	t.Run("link in the workspace", func(t *testing.T) {
		ws := t.TempDir()
		if err := os.Symlink(combined, filepath.Join(ws, "ca.pem")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, ".env"), []byte("SSL_CERT_FILE="+filepath.Join(ws, "ca.pem")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runAgentrun(t, invocation{args: []string{"--runtime", "claude-code", "--cwd", ws, "--env-file", filepath.Join(ws, ".env"),
			"--credential", "KEY=api.test:443"}, prompt: "hi", env: []string{"AGENTRUN_CLAUDE_BIN=" + bin, "KEY=" + real}})
		if end := r.end(); end == nil || end.Status != events.StatusRejected || !strings.Contains(end.Detail, "symbolic link") {
			t.Errorf("a CA path through a link in the workspace: end %+v", end)
		}
	})
}
