package runner

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/internal/safefile"
	"github.com/agentrun-dev/agentrun/proxy/credentials"
)

func testCertAndKey(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// TestReadCertificates: only parsed certificates come out of a CA file the
// agent's bundle is made from; what is not a regular file, too large, a
// link in the workspace or certificate-free is an error.
func TestReadCertificates(t *testing.T) {
	cert, key := testCertAndKey(t)
	dir, ws := t.TempDir(), t.TempDir()
	files := safefile.Guard{Untrusted: []string{ws}}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bogus := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")})
	mixed := write("mixed.pem", append(append(append(append([]byte("text before\n"), key...), bogus...), cert...), key...))
	got, err := readCertificates(files, mixed)
	if err != nil || string(got) != string(cert) {
		t.Errorf("mixed file: %q, %v; want the certificate alone", got, err)
	}
	if _, err := readCertificates(files, write("key.pem", key)); err == nil {
		t.Errorf("a file with only a key was accepted")
	}
	big := write("big.pem", append(cert, make([]byte, maxCAFile)...))
	if _, err := readCertificates(files, big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("an oversize file: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := readCertificates(files, fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, safefile.ErrNotRegular) {
			t.Errorf("a FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
	if _, err := readCertificates(files, "/dev/zero"); !errors.Is(err, safefile.ErrNotRegular) {
		t.Errorf("/dev/zero: %v", err)
	}
	link := filepath.Join(ws, "ca.pem")
	if err := os.Symlink(mixed, link); err != nil {
		t.Fatal(err)
	}
	if _, err := readCertificates(files, link); !errors.Is(err, safefile.ErrLink) {
		t.Errorf("a link in the workspace: %v", err)
	}
}

// TestCredentialsRedactTheLog: from the moment the credentials are built
// until the run's cleanup, the process's log (where Go's HTTP stack quotes
// what an upstream sent unasked, key included) shows the stand-in.
func TestCredentialsRedactTheLog(t *testing.T) {
	const value = "sk-log-0123456789"
	t.Setenv("LOGKEY", value)
	c, err := credentials.Parse("LOGKEY=api.test:443", os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := credentials.NewSet([]*credentials.Credential{c})
	var buf strings.Builder
	prev := log.Writer()
	log.SetOutput(&buf)
	defer log.SetOutput(prev)
	cr := &creds{set: set}
	if err := cr.build(t.TempDir(), nil, 0); err != nil {
		t.Fatal(err)
	}
	log.Printf("Unsolicited response received on idle HTTP channel starting with %q", "HTTP/1.1 200 "+value)
	cr.close()
	if got := buf.String(); strings.Contains(got, value) || !strings.Contains(got, c.StandIn) {
		t.Errorf("the log during the run: %q", got)
	}
}
