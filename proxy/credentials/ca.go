package credentials

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"
)

// Authority is a run's own certificate authority, with which the filter
// proxy terminates TLS to the credential destinations (and only those) to
// put the real value in. It is made in memory at start; its private key
// never reaches a file, so nothing in the sandbox can read it. Its
// certificate is name-constrained to the credential hosts: even a copy of
// the key could sign for nothing else.
type Authority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	hosts   map[string]bool
	mu      sync.Mutex
	leaves  map[string]*tls.Certificate
}

// authorityLife bounds the authority's validity: longer than any run may
// last (spec.timeout is at most 168 h), short enough to be worthless later.
const authorityLife = 8 * 24 * time.Hour

// NewAuthority makes the authority for these destinations.
func NewAuthority(dests []Dest, now time.Time) (*Authority, error) {
	if len(dests) == 0 {
		return nil, errors.New("no credential destinations")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	a := &Authority{key: key, hosts: map[string]bool{}, leaves: map[string]*tls.Certificate{}}
	tmpl := &x509.Certificate{
		SerialNumber:                serial(),
		Subject:                     pkix.Name{CommonName: "agentrun run CA " + serial().Text(16)[:12], Organization: []string{"agentrun"}},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(authorityLife),
		IsCA:                        true,
		BasicConstraintsValid:       true,
		MaxPathLenZero:              true,
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		PermittedDNSDomainsCritical: true,
	}
	for _, d := range dests {
		a.hosts[d.Host] = true
		if ip := net.ParseIP(d.Host); ip != nil {
			bits := 8 * len(ip.To16())
			if v4 := ip.To4(); v4 != nil {
				ip, bits = v4, 32
			}
			tmpl.PermittedIPRanges = append(tmpl.PermittedIPRanges, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
		} else {
			// A leading "." would allow subdomains; the exact name is meant.
			tmpl.PermittedDNSDomains = append(tmpl.PermittedDNSDomains, d.Host)
		}
	}
	// A kind of name no destination has is closed off entirely.
	if len(tmpl.PermittedDNSDomains) == 0 {
		tmpl.PermittedDNSDomains = []string{"invalid"}
	}
	if len(tmpl.PermittedIPRanges) == 0 {
		tmpl.PermittedIPRanges = []*net.IPNet{{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(32, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(128, 128)}}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("the run's certificate authority: %w", err)
	}
	if a.cert, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	a.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return a, nil
}

// CertPEM is the authority's certificate, for the CLIs to trust.
func (a *Authority) CertPEM() []byte { return a.certPEM }

// Certificate returns the leaf for a credential host (by SNI), made once.
func (a *Authority) Certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return a.Leaf(hello.ServerName)
}

// Leaf returns a certificate for host, which must be a credential host.
func (a *Authority) Leaf(host string) (*tls.Certificate, error) {
	if !a.hosts[host] {
		return nil, fmt.Errorf("%q is not a credential host", host)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.leaves[host]; c != nil {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    a.cert.NotBefore,
		NotAfter:     a.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, err
	}
	leaf := &tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: key}
	if leaf.Leaf, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	a.leaves[host] = leaf
	return leaf, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}
