// Package gitserver is a real git server for tests: Debian's `git
// http-backend` (smart HTTP, fetch and push) behind a Go server on
// loopback, over TLS or plain HTTP, that asks for a token as a forge does
// and records every request. Repositories are bare repositories in a
// temporary directory, made from a tree of files.
package gitserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Options of a server.
type Options struct {
	// Token is the credential every request must carry (HTTP Basic with
	// any user, or Bearer); "" serves without one.
	Token string
	// PlainHTTP serves plain HTTP instead of TLS.
	PlainHTTP bool
	// Addr is where to listen (default 127.0.0.1:0).
	Addr string
	// Names are the DNS names the TLS certificate is for, beside
	// 127.0.0.1 (a test maps them to the server, as --add-host does).
	Names []string
}

// Request is one request the server answered.
type Request struct {
	Method, Path, Query string
	// Authorized: it carried the token.
	Authorized bool
	// Authorization is the header as sent.
	Authorization string
	Status        int
}

// Server is a running git server.
type Server struct {
	opts    Options
	root    string
	srv     *httptest.Server
	backend string
	mu      sync.Mutex
	log     []Request
}

// Start starts a server. Close it when done.
func Start(opts Options) (*Server, error) {
	backend := "/usr/lib/git-core/git-http-backend"
	if p, err := exec.Command("git", "--exec-path").Output(); err == nil {
		backend = filepath.Join(strings.TrimSpace(string(p)), "git-http-backend")
	}
	if _, err := os.Stat(backend); err != nil {
		return nil, fmt.Errorf("git http-backend not found (%v): install git", err)
	}
	root, err := os.MkdirTemp("", "agentrun-gitserver-")
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, root: root, backend: backend}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if opts.Addr != "" {
		ln, err := net.Listen("tcp", opts.Addr)
		if err != nil {
			os.RemoveAll(root)
			return nil, err
		}
		s.srv.Listener.Close()
		s.srv.Listener = ln
	}
	if opts.PlainHTTP {
		s.srv.Start()
	} else {
		cert, err := selfSigned(append([]string{"localhost"}, opts.Names...))
		if err != nil {
			os.RemoveAll(root)
			return nil, err
		}
		s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		s.srv.StartTLS()
	}
	return s, nil
}

// Close stops the server and removes its repositories.
func (s *Server) Close() {
	s.srv.Close()
	os.RemoveAll(s.root)
}

// URL is the base URL: repositories are URL()+"/NAME.git".
func (s *Server) URL() string { return s.srv.URL }

// Repo is the URL of repository name.
func (s *Server) Repo(name string) string { return s.srv.URL + "/" + name + ".git" }

// Dir is repository name's bare directory on disk.
func (s *Server) Dir(name string) string { return filepath.Join(s.root, name+".git") }

// CAPEM is the PEM of the TLS certificate (nil for plain HTTP): clients
// trust it as their CA.
func (s *Server) CAPEM() []byte {
	if s.opts.PlainHTTP {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// CertPool trusts the server's certificate.
func (s *Server) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	if c := s.srv.Certificate(); c != nil {
		p.AddCert(c)
	}
	return p
}

// TLSConfig is a client configuration that trusts the server.
func (s *Server) TLSConfig() *tls.Config { return &tls.Config{RootCAs: s.CertPool()} }

// Requests is what the server answered so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request{}, s.log...)
}

// Create makes the bare repository name with one commit per entry of
// commits (each a map of path to content, on branch "main"), and returns
// the last commit's id.
func (s *Server) Create(name string, commits ...map[string]string) (string, error) {
	work, err := os.MkdirTemp("", "agentrun-gitserver-work-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	git := func(dir string, args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main", "-c", "commit.gpgSign=false"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	if _, err := git(work, "init", "-q"); err != nil {
		return "", err
	}
	for i, files := range commits {
		for p, content := range files {
			full := filepath.Join(work, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				return "", err
			}
			if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
				return "", err
			}
		}
		if _, err := git(work, "add", "-A"); err != nil {
			return "", err
		}
		if _, err := git(work, "commit", "-q", "--allow-empty", "-m", fmt.Sprintf("commit %d", i+1)); err != nil {
			return "", err
		}
	}
	head, err := git(work, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	if _, err := git(s.root, "clone", "-q", "--bare", work, s.Dir(name)); err != nil {
		return "", err
	}
	// Pushes are the server's to take (http-backend refuses them without
	// an authenticated user unless told to take them).
	if _, err := git(s.Dir(name), "config", "http.receivepack", "true"); err != nil {
		return "", err
	}
	return head, nil
}

// Git runs git in repository name's bare directory (a test's look at what
// was pushed).
func (s *Server) Git(name string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"--git-dir", s.Dir(name)}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=server", "GIT_AUTHOR_EMAIL=server@example.com", "GIT_COMMITTER_NAME=server", "GIT_COMMITTER_EMAIL=server@example.com")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	req := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Authorization: r.Header.Get("Authorization")}
	req.Authorized = s.opts.Token == "" || authorized(req.Authorization, s.opts.Token)
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		req.Status = rec.status
		s.mu.Lock()
		s.log = append(s.log, req)
		s.mu.Unlock()
	}()
	if !req.Authorized {
		rec.Header().Set("WWW-Authenticate", `Basic realm="gitserver"`)
		http.Error(rec, "gitserver: a token is required", http.StatusUnauthorized)
		return
	}
	h := &cgi.Handler{
		Path: s.backend,
		Dir:  s.root,
		Env: []string{"GIT_PROJECT_ROOT=" + s.root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=agentrun-test",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + s.root},
	}
	h.ServeHTTP(rec, r)
}

// authorized: Basic with the token as the password, or Bearer token.
func authorized(h, token string) bool {
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return t == token
	}
	enc, ok := strings.CutPrefix(h, "Basic ")
	if !ok {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return false
	}
	_, pass, ok := strings.Cut(string(raw), ":")
	return ok && pass == token
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// selfSigned is a certificate for names and the loopback addresses that
// is its own CA (clients trust it as a root).
func selfSigned(names []string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "agentrun test git server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    names, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
