package gitworkspace

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/proxy"
	"github.com/agentrun-dev/agentrun/proxy/credentials"
)

// FetchScope is the filter proxy's view of the run's repository (a
// proxy.Interceptor): the agent's git fetches the repository through the
// proxy with a stand-in token, and the proxy puts the real token into
// exactly the requests of a fetch of that repository (the smart HTTP
// protocol's GET info/refs?service=git-upload-pack and POST
// git-upload-pack under the repository's path). Every push is refused, and
// so is any other request that carries the stand-in, or that goes to the
// git host when the network policy allows that host only for this fetch.
// The token is taken out of every answer, as the credentials' are.
type FetchScope struct {
	remote *remote
	// header is the real Authorization value; standIn the token the
	// agent holds instead.
	header, standIn string
	secrets         []credentials.Secret
	authority       *credentials.Authority
	roots           *x509.CertPool
	// hostAllowed: the network policy allows the git host:port for any
	// request (mode full, or an --allow-host of it), not only for the
	// fetch: other requests then pass, without the token.
	hostAllowed bool
}

// StandInPrefix starts the git credential's stand-in.
const StandInPrefix = "agentrun-git-stand-in-"

// NewFetchScope is the scope of c's repository. The token's stand-in is
// new; authority is the run's (it must name the repository's host), roots
// verify the forge (nil: the system's).
func NewFetchScope(c *Checkout, authority *credentials.Authority, roots *x509.CertPool, hostAllowed bool) *FetchScope {
	var b [24]byte
	_, _ = rand.Read(b[:])
	f := &FetchScope{remote: c.remote, standIn: StandInPrefix + hex.EncodeToString(b[:]), authority: authority, roots: roots, hostAllowed: hostAllowed}
	if tok := c.spec.Token; tok != "" {
		f.header = c.spec.Auth.header(tok)
		agent := c.spec.Auth.header(f.standIn)
		f.secrets = []credentials.Secret{{Value: f.header, StandIn: agent}, {Value: tok, StandIn: f.standIn}}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			f.secrets = append(f.secrets, credentials.Secret{Value: enc.EncodeToString([]byte(tok)), StandIn: enc.EncodeToString([]byte(f.standIn))})
		}
		if v, ok := strings.CutPrefix(f.header, "Basic "); ok {
			f.secrets = append(f.secrets, credentials.Secret{Value: v, StandIn: strings.TrimPrefix(agent, "Basic ")})
		}
	}
	return f
}

// AgentConfig is the git configuration the agent's git reads (its
// GIT_CONFIG_GLOBAL): the stand-in as the repository's Authorization
// header, the CA bundle that trusts the run's authority, and an identity
// for the agent's commits. Nothing in it is a secret.
func (f *FetchScope) AgentConfig(caBundle string) string {
	var b strings.Builder
	b.WriteString("# Written by agentrun for this run (docs/git.md): the token is a stand-in,\n# which the filter proxy replaces for fetches of the repository only.\n")
	fmt.Fprintf(&b, "[user]\n\tname = agent\n\temail = agent@agentrun.invalid\n")
	if caBundle != "" {
		fmt.Fprintf(&b, "[http]\n\tsslCAInfo = %s\n", caBundle)
	}
	if f.header != "" {
		fmt.Fprintf(&b, "[http %q]\n\textraHeader = Authorization: %s\n", f.remote.String(), f.agentHeader())
	}
	return b.String()
}

func (f *FetchScope) agentHeader() string {
	for _, s := range f.secrets {
		if s.Value == f.header {
			return s.StandIn
		}
	}
	return ""
}

// Claims reports whether host:port is the repository's.
func (f *FetchScope) Claims(host string, port int) bool {
	return strings.EqualFold(strings.TrimSuffix(host, "."), f.remote.host) && port == f.remote.port
}

// PlainHTTP: only a repository declared http:// is spoken to in plain HTTP.
func (f *FetchScope) PlainHTTP(host string, port int) bool {
	return f.Claims(host, port) && f.remote.url.Scheme == "http"
}

// Certificate is the run authority's certificate for host.
func (f *FetchScope) Certificate(host string) (*tls.Certificate, error) {
	return f.authority.Leaf(host)
}

// Roots verify the forge.
func (f *FetchScope) Roots() *x509.CertPool { return f.roots }

// Request lets a fetch of the repository through with the real token, and
// refuses pushes and whatever else the scope does not allow.
func (f *FetchScope) Request(host string, port int, r *http.Request) *proxy.Refusal {
	base, op := f.operation(r)
	ours := base == f.remote.path
	switch {
	case ours && (op == "receive-pack"):
		return &proxy.Refusal{Reason: events.ReasonGitPush, Status: http.StatusForbidden,
			Detail: fmt.Sprintf("%s refused (git_push): the agent does not push; agentrun publishes the run's change itself once the agent has exited (docs/git.md)", f.remote)}
	case ours && op == "upload-pack":
		if f.header != "" {
			r.Header.Set("Authorization", f.header)
		}
		r.Header.Set("Accept-Encoding", "identity")
		return nil
	case f.carriesStandIn(r):
		return &proxy.Refusal{Reason: events.ReasonGitScope, Status: http.StatusForbidden,
			Detail: fmt.Sprintf("%s %s refused (git_scope): the run's git credential is for fetching %s only", r.Method, r.URL.Path, f.remote)}
	case !f.hostAllowed:
		return &proxy.Refusal{Reason: events.ReasonGitScope, Status: http.StatusForbidden,
			Detail: fmt.Sprintf("%s %s refused (git_scope): the network policy allows %s only for fetching %s", r.Method, r.URL.Path, f.remote.url.Host, f.remote)}
	}
	return nil
}

// operation reads a smart HTTP request: the repository path it is under,
// without ".git", and "upload-pack" (a fetch), "receive-pack" (a push) or
// "" (anything else).
func (f *FetchScope) operation(r *http.Request) (string, string) {
	p := r.URL.Path
	if strings.Contains(p, "//") || strings.Contains(p, "/./") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
		return "", ""
	}
	service := r.URL.Query().Get("service")
	var base, op string
	switch {
	case strings.HasSuffix(p, "/info/refs") && r.Method == http.MethodGet:
		base = strings.TrimSuffix(p, "/info/refs")
		switch service {
		case "git-upload-pack":
			op = "upload-pack"
		case "git-receive-pack":
			op = "receive-pack"
		}
	case strings.HasSuffix(p, "/git-upload-pack") && r.Method == http.MethodPost:
		base, op = strings.TrimSuffix(p, "/git-upload-pack"), "upload-pack"
	case strings.HasSuffix(p, "/git-receive-pack"):
		base, op = strings.TrimSuffix(p, "/git-receive-pack"), "receive-pack"
	default:
		return "", ""
	}
	if service != "" && op == "" {
		return "", ""
	}
	return strings.TrimSuffix(base, ".git"), op
}

// carriesStandIn: the stand-in is in some header (as it is, or in an
// Authorization: Basic value).
func (f *FetchScope) carriesStandIn(r *http.Request) bool {
	for _, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, f.standIn) {
				return true
			}
			if enc, ok := strings.CutPrefix(v, "Basic "); ok {
				if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc)); err == nil && strings.Contains(string(raw), f.standIn) {
					return true
				}
			}
		}
	}
	return strings.Contains(r.URL.String(), f.standIn)
}

// Response takes the token out of the answer.
func (f *FetchScope) Response(host string, port int, r *http.Request, resp *http.Response) *proxy.Refusal {
	for k := range resp.Header {
		for _, s := range f.secrets {
			if strings.Contains(strings.ToLower(k), strings.ToLower(s.Value)) {
				resp.Header.Del(k)
			}
		}
	}
	credentials.Scrub(resp.Header, f.secrets)
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return &proxy.Refusal{Reason: proxy.ReasonUnsupportedEncoding,
			Detail: fmt.Sprintf("the answer of %s came with %s, which the proxy cannot read to take the token out (it asks for none)", f.remote.url.Host, enc)}
	}
	resp.Body = credentials.ScrubBody(resp.Body, f.secrets)
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return nil
}

// RedactText takes the token out of text the proxy writes.
func (f *FetchScope) RedactText(host string, port int, r *http.Request, text string) string {
	for _, s := range f.secrets {
		text = strings.ReplaceAll(text, s.Value, s.StandIn)
	}
	return text
}
