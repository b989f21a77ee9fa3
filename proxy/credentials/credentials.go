// Package credentials keeps a run's API keys away from the agent. For each
// --credential NAME=HOST:PORT[,...] the agent's environment holds a
// stand-in for NAME, a random value useless anywhere else; the filter
// proxy puts the real value (read from agentrun's own environment) in
// place of the stand-in in the authentication headers of requests to the
// listed destinations only, and takes it out of their responses. Anywhere else
// the stand-in passes as it is, so nothing real leaves. The real value
// travels upstream over verified TLS only, unless a destination is
// declared as one that speaks plain HTTP (http://HOST:PORT).
package credentials

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// StandInPrefix starts every stand-in, so that people and logs can tell
// one from a real key.
const StandInPrefix = "agentrun-stand-in-"

// Dest is one destination a credential is for.
type Dest struct {
	Host string // lower case, no trailing dot; an IP address without brackets
	Port int
	// Plain marks a destination declared as http://HOST:PORT: it speaks
	// plain HTTP, and only such a destination gets the real value
	// unencrypted (docs/credentials.md).
	Plain bool
}

// String is HOST:PORT, without the scheme.
func (d Dest) String() string { return net.JoinHostPort(d.Host, strconv.Itoa(d.Port)) }

// Credential is one --credential.
type Credential struct {
	Name    string
	Dests   []Dest
	StandIn string
	value   string   // the real value: never printed, never handed to the agent
	forms   []Secret // its encoded forms to scrub (encodedForms), made once
}

// String names the credential without its value.
func (c *Credential) String() string { return c.Name }

// minValueLen is the shortest real value a credential may have. Every
// occurrence of the value in an answer is replaced by the stand-in before
// the agent reads it, so a value as short as "k" would mangle the answer
// (found with a one-letter test key: claude-code could no longer read its
// tool calls). Real API keys are far longer.
const minValueLen = 8

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Parse reads NAME=HOST:PORT[,HOST:PORT...] and the value of NAME from
// lookup (agentrun's own environment). Errors say how to fix the flag.
func Parse(flag string, lookup func(string) (string, bool)) (*Credential, error) {
	name, hosts, ok := strings.Cut(flag, "=")
	if !ok || !envName.MatchString(name) || hosts == "" {
		return nil, fmt.Errorf("--credential %q: expected NAME=HOST:PORT[,HOST:PORT...] (http://HOST:PORT for a destination that speaks plain HTTP), NAME a variable of agentrun's environment", flag)
	}
	c := &Credential{Name: name}
	for _, h := range strings.Split(hosts, ",") {
		d, err := parseDest(h)
		if err != nil {
			return nil, fmt.Errorf("--credential %s: %v", name, err)
		}
		c.Dests = append(c.Dests, d)
	}
	v, ok := lookup(name)
	switch {
	case !ok:
		return nil, fmt.Errorf("--credential %s: the variable %s is not set in agentrun's environment; export it there (its value never appears on the command line)", name, name)
	case strings.TrimSpace(v) == "":
		return nil, fmt.Errorf("--credential %s: the variable %s is empty; set it to the real key in agentrun's environment", name, name)
	case len(v) < minValueLen:
		return nil, fmt.Errorf("--credential %s: the value of %s is %d bytes; a credential needs at least %d, because the proxy replaces every occurrence of it in the answers the agent reads (a shorter value would turn up in ordinary text)", name, name, len(v), minValueLen)
	case strings.ContainsAny(v, "\r\n\x00"):
		return nil, fmt.Errorf("--credential %s: the value of %s holds a line break or NUL, which no header can carry", name, name)
	}
	c.value = v
	c.StandIn = newStandIn()
	c.forms = encodedForms(v, c.StandIn)
	return c, nil
}

// parseDest reads [http://|https://]HOST:PORT, the port required (a
// credential goes to one service, never to whatever a name serves on 80
// and 443). Without a scheme, as with https://, the destination gets the
// real value over verified TLS only; http:// declares one that speaks
// plain HTTP (an in-cluster mock or gateway), the only kind that gets it
// unencrypted. Loopback and private addresses are not exempt: the scheme
// says what the service speaks, not how far away it is.
func parseDest(s string) (Dest, error) {
	spec := strings.TrimSpace(s)
	plain := false
	if scheme, rest, ok := strings.Cut(spec, "://"); ok {
		switch strings.ToLower(scheme) {
		case "http":
			plain = true
		case "https":
		default:
			return Dest{}, fmt.Errorf("%q: only http:// (a destination that speaks plain HTTP) or https:// may come before HOST:PORT", s)
		}
		spec = rest
	}
	if strings.ContainsAny(spec, "/?#") {
		return Dest{}, fmt.Errorf("%q: give HOST:PORT without a path (the credential goes to every path of the destination)", s)
	}
	host, port, err := net.SplitHostPort(spec)
	if err != nil {
		return Dest{}, fmt.Errorf("%q is not HOST:PORT (IPv6 in brackets): %v", s, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return Dest{}, fmt.Errorf("%q: the port must be 1-65535", s)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		return Dest{Host: a.Unmap().String(), Port: p, Plain: plain}, nil
	}
	if !validName(host) {
		return Dest{}, fmt.Errorf("%q: %q is not a host name or an IP address", s, host)
	}
	return Dest{Host: host, Port: p, Plain: plain}, nil
}

// validName accepts letters, digits, hyphens and underscores in labels of
// 1 to 63 characters.
func validName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

func newStandIn() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return StandInPrefix + hex.EncodeToString(b[:])
}

// Set is a run's credentials.
type Set struct {
	list []*Credential
}

// NewSet checks that no two credentials share a name and that no
// destination is declared both as plain HTTP and not: a service on one
// port speaks one of them.
func NewSet(list []*Credential) (*Set, error) {
	seen := map[string]bool{}
	plain := map[string]bool{}
	for _, c := range list {
		if seen[c.Name] {
			return nil, fmt.Errorf("--credential %s is given twice: list all its hosts in one, NAME=HOST:PORT,HOST:PORT", c.Name)
		}
		seen[c.Name] = true
		for _, d := range c.Dests {
			if p, ok := plain[d.String()]; ok && p != d.Plain {
				return nil, fmt.Errorf("--credential %s: %s is listed both as http://%s and without http://; a destination speaks plain HTTP or TLS, so write it the same way everywhere", c.Name, d, d)
			}
			plain[d.String()] = d.Plain
		}
	}
	return &Set{list: list}, nil
}

// Empty reports whether the run has no credentials.
func (s *Set) Empty() bool { return s == nil || len(s.list) == 0 }

// Names are the credentials' variable names, in order (start.credentials).
func (s *Set) Names() []string {
	out := []string{}
	if s != nil {
		for _, c := range s.list {
			out = append(out, c.Name)
		}
	}
	return out
}

// Env is the agent's side: NAME=stand-in for each credential.
func (s *Set) Env() []string {
	var out []string
	if s != nil {
		for _, c := range s.list {
			out = append(out, c.Name+"="+c.StandIn)
		}
	}
	return out
}

// Dests lists every destination of every credential, once.
func (s *Set) Dests() []Dest {
	var out []Dest
	seen := map[Dest]bool{}
	if s != nil {
		for _, c := range s.list {
			for _, d := range c.Dests {
				if !seen[d] {
					seen[d] = true
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// For returns the credentials that go to host:port.
func (s *Set) For(host string, port int) []*Credential {
	var out []*Credential
	if s == nil {
		return nil
	}
	host = normalHost(host)
	for _, c := range s.list {
		for _, d := range c.Dests {
			if d.Host == host && d.Port == port {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// PlainHTTP reports whether host:port was declared as a destination that
// speaks plain HTTP (http://HOST:PORT).
func (s *Set) PlainHTTP(host string, port int) bool {
	if s == nil {
		return false
	}
	host = normalHost(host)
	for _, c := range s.list {
		for _, d := range c.Dests {
			if d.Host == host && d.Port == port && d.Plain {
				return true
			}
		}
	}
	return false
}

// normalHost is host as Dest holds it.
func normalHost(host string) string {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.Unmap().String()
	}
	return host
}

// authHeaders are the headers the model APIs take a key in: Authorization
// (Bearer: OpenAI, Anthropic's auth token, most gateways; Basic), x-api-key
// (Anthropic), api-key (Azure OpenAI) and x-goog-api-key (Google). The real
// value goes into these only: a stand-in anywhere else (a header of the
// agent's choosing, a cookie) reaches the upstream as the stand-in, so an
// upstream that reflects some header cannot be made to carry the value
// somewhere the scrubbing does not expect it.
var authHeaders = map[string]bool{"Authorization": true, "X-Api-Key": true, "Api-Key": true, "X-Goog-Api-Key": true}

// Inject puts the real values of creds in place of their stand-ins in the
// authentication headers of h (authHeaders): as they are, and inside
// Authorization: Basic.
func Inject(h http.Header, creds []*Credential) {
	for k, vs := range h {
		if !authHeaders[http.CanonicalHeaderKey(k)] {
			continue
		}
		for i, v := range vs {
			vs[i] = injectValue(k, v, creds)
		}
	}
}

func injectValue(key, v string, creds []*Credential) string {
	for _, c := range creds {
		v = strings.ReplaceAll(v, c.StandIn, c.value)
	}
	if raw, ok := basic(key, v); ok {
		replaced := raw
		for _, c := range creds {
			replaced = strings.ReplaceAll(replaced, c.StandIn, c.value)
		}
		if replaced != raw {
			scheme, _, _ := strings.Cut(v, " ")
			return scheme + " " + base64.StdEncoding.EncodeToString([]byte(replaced))
		}
	}
	return v
}

// basic decodes the credentials of an Authorization: Basic value.
func basic(key, v string) (string, bool) {
	if http.CanonicalHeaderKey(key) != "Authorization" {
		return "", false
	}
	scheme, enc, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return "", false
	}
	return string(raw), true
}

// A Secret is what an answer must not carry (Value) and what the agent
// gets in its place (StandIn).
type Secret struct{ Value, StandIn string }

// SecretsOf is what the answer to a request with the headers h (after
// Inject) must not carry: each credential's real value, and each form of
// it the proxy made and the literal value does not cover. That is the
// Authorization: Basic credentials encoded again with the real value
// inside, padded and not (an echo may drop the padding); the agent gets
// its own encoding of the stand-in back. Each secret with a slash (the
// base64 alphabet has one) is also looked for as JSON encoders that escape
// slashes write it (\/). Longer secrets come first: where two match at one
// place, the longer one is replaced.
func SecretsOf(h http.Header, creds []*Credential) []Secret {
	var out []Secret
	for _, c := range creds {
		out = append(out, Secret{Value: c.value, StandIn: c.StandIn})
		out = append(out, c.forms...)
	}
	for _, v := range h.Values("Authorization") {
		raw, ok := basic("Authorization", v)
		if !ok {
			continue
		}
		mine := raw
		for _, c := range creds {
			mine = strings.ReplaceAll(mine, c.value, c.StandIn)
		}
		if mine == raw {
			continue
		}
		enc, agent := base64.StdEncoding.EncodeToString([]byte(raw)), base64.StdEncoding.EncodeToString([]byte(mine))
		out = append(out, Secret{Value: enc, StandIn: agent},
			Secret{Value: strings.TrimRight(enc, "="), StandIn: strings.TrimRight(agent, "=")})
	}
	for _, s := range out {
		if strings.Contains(s.Value, "/") {
			out = append(out, Secret{Value: strings.ReplaceAll(s.Value, "/", `\/`), StandIn: strings.ReplaceAll(s.StandIn, "/", `\/`)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].Value) > len(out[j].Value) })
	return out
}

// encodedForms are the forms of a real value that an upstream which
// echoes what it got may hand back without the literal value in them:
// percent-encoded (a redirect's Location, a query string), base64 on its
// own (padded or not, standard or URL alphabet), and quoted as Go's %q and
// JSON write it (a value with a quote or a backslash; Go's HTTP parse
// errors quote the line they could not read), each with the same form of
// the stand-in. Only forms that differ from the value are listed.
// An encoding of a longer text that holds the value (base64 depends on
// where the value starts) is not caught: docs/credentials.md.
func encodedForms(value, standIn string) []Secret {
	forms := []func(string) string{url.QueryEscape, url.PathEscape,
		func(s string) string { return lowerHex(url.QueryEscape(s)) }, func(s string) string { return lowerHex(url.PathEscape(s)) },
		quoted}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		forms = append(forms, func(s string) string { return enc.EncodeToString([]byte(s)) })
	}
	var out []Secret
	seen := map[string]bool{value: true}
	for _, form := range forms {
		if v := form(value); !seen[v] {
			seen[v] = true
			out = append(out, Secret{Value: v, StandIn: form(standIn)})
		}
	}
	return out
}

// quoted is s as strconv.Quote (and so fmt's %q) writes it, without the
// quotes around it.
func quoted(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// lowerHex writes the hex digits of each %XX in lower case (%2f), as some
// servers do.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = toLower(b[i+1]), toLower(b[i+2])
		}
	}
	return string(b)
}

func toLower(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// Scrub puts the stand-ins back in place of the secrets in a header set (a
// response's): an upstream that echoes a request's headers must not hand
// the real value to the agent. A header whose name holds a secret, in any
// letter case (Go writes names in canonical case, so the value could not
// be matched as it was), is dropped: a name is no place for a stand-in
// either, and no answer the agent needs has such a header.
func Scrub(h http.Header, secrets []Secret) {
	for k := range h {
		lower := strings.ToLower(k)
		for _, s := range secrets {
			if strings.Contains(lower, strings.ToLower(s.Value)) {
				delete(h, k)
				break
			}
		}
	}
	for _, vs := range h {
		for i := range vs {
			for _, s := range secrets {
				vs[i] = strings.ReplaceAll(vs[i], s.Value, s.StandIn)
			}
		}
	}
}

// ScrubBody does the same for a body as it streams: a secret split across
// two reads is caught too. Only what could still become a secret is held
// back, so a stream's events are not delayed; and what is still held when
// the body ends (it ends with the start of a secret: an echo cut short)
// is never passed on: the agent gets as many bytes of the secret's
// stand-in instead.
func ScrubBody(body io.ReadCloser, secrets []Secret) io.ReadCloser {
	if len(secrets) == 0 {
		return body
	}
	return &scrubber{body: body, secrets: secrets}
}

type scrubber struct {
	body    io.ReadCloser
	secrets []Secret
	in      []byte // read, not yet passed on
	out     []byte // scrubbed, not yet returned
	buf     []byte // a read buffer for the slow path
	err     error
}

func (s *scrubber) Read(p []byte) (int, error) {
	if len(s.out) == 0 && len(s.in) == 0 && s.err == nil {
		// The common case: read straight into p, and pass it on when it
		// holds no secret and does not end with the start of one.
		n, err := s.body.Read(p)
		if !s.touches(p[:n]) {
			return n, err
		}
		s.in, s.err = append(s.in, p[:n]...), err
		s.process(err != nil)
	}
	for len(s.out) == 0 && s.err == nil {
		if cap(s.buf) == 0 {
			s.buf = make([]byte, 32<<10)
		}
		n, err := s.body.Read(s.buf[:cap(s.buf)])
		s.in = append(s.in, s.buf[:n]...)
		s.err = err
		s.process(err != nil)
	}
	if len(s.out) > 0 {
		n := copy(p, s.out)
		s.out = s.out[n:]
		return n, nil
	}
	return 0, s.err
}

// touches reports whether b holds a secret or ends with the start of one.
func (s *scrubber) touches(b []byte) bool {
	for _, sc := range s.secrets {
		if bytes.Contains(b, []byte(sc.Value)) || partialSuffix(b, []byte(sc.Value)) > 0 {
			return true
		}
	}
	return false
}

func (s *scrubber) Close() error { return s.body.Close() }

// process moves what is safe from in to out: complete secrets become
// stand-ins, and a tail that could begin one waits for more; at the end
// (final) such a tail becomes the start of that secret's stand-in.
func (s *scrubber) process(final bool) {
	for {
		at, which := -1, -1
		for i, sc := range s.secrets {
			if j := bytes.Index(s.in, []byte(sc.Value)); j >= 0 && (at < 0 || j < at) {
				at, which = j, i
			}
		}
		if at < 0 {
			break
		}
		sc := s.secrets[which]
		s.out = append(append(s.out, s.in[:at]...), sc.StandIn...)
		s.in = s.in[at+len(sc.Value):]
	}
	hold, which := 0, -1
	for i, sc := range s.secrets {
		if n := partialSuffix(s.in, []byte(sc.Value)); n > hold {
			hold, which = n, i
		}
	}
	s.out = append(s.out, s.in[:len(s.in)-hold]...)
	s.in = append([]byte{}, s.in[len(s.in)-hold:]...)
	if final && hold > 0 {
		standIn := s.secrets[which].StandIn
		s.out = append(s.out, standIn[:min(hold, len(standIn))]...)
		s.in = s.in[:0]
	}
}

// partialSuffix is the length of the longest end of b that is a proper
// beginning of v.
func partialSuffix(b, v []byte) int {
	for n := min(len(b), len(v)-1); n > 0; n-- {
		if bytes.Equal(b[len(b)-n:], v[:n]) {
			return n
		}
	}
	return 0
}

// Redact replaces every real value in b, and each encoded form of it the
// answers are scrubbed of, with the stand-in's (for text the runner
// itself writes: a detail, a warning, a log line). The literal value is
// matched in any letter case as well.
func (s *Set) Redact(b []byte) []byte {
	if s == nil {
		return b
	}
	for _, c := range s.list {
		b = redact(b, append([]Secret{{Value: c.value, StandIn: c.StandIn}}, c.forms...))
	}
	return b
}

// redact replaces each secret in b, the first one (the literal value) in
// any letter case too.
func redact(b []byte, secrets []Secret) []byte {
	for i, sc := range secrets {
		b = bytes.ReplaceAll(b, []byte(sc.Value), []byte(sc.StandIn))
		if i == 0 {
			b = replaceFold(b, sc.Value, sc.StandIn)
		}
	}
	return b
}

// replaceFold replaces every occurrence of old in b, matched without
// regard to ASCII letter case, with new.
func replaceFold(b []byte, old, new string) []byte {
	lower, o := bytes.ToLower(b), bytes.ToLower([]byte(old))
	if len(lower) != len(b) || !bytes.Contains(lower, o) {
		// No match (or a case mapping that changed lengths, which ASCII
		// never does: then only the exact matches were replaced).
		return b
	}
	var out []byte
	for {
		i := bytes.Index(lower, o)
		if i < 0 {
			return append(out, b...)
		}
		out = append(append(out, b[:i]...), new...)
		b, lower = b[i+len(o):], lower[i+len(o):]
	}
}

// RedactText is Redact for the proxy's own text about a request to
// host:port (an upstream's error, which may quote its answer): the
// secrets of that request (SecretsOf) become their stand-ins.
func (i *Interceptor) RedactText(host string, port int, r *http.Request, text string) string {
	secrets := SecretsOf(r.Header, i.Set.For(host, port))
	if len(secrets) == 0 {
		return text
	}
	// The literal values first, in any letter case.
	for _, c := range i.Set.For(host, port) {
		text = string(replaceFold([]byte(text), c.value, c.StandIn))
	}
	for _, sc := range secrets {
		text = strings.ReplaceAll(text, sc.Value, sc.StandIn)
	}
	return string(i.Set.Redact([]byte(text)))
}

// The process's log (Go's net/http writes there: an answer that arrived on
// an idle connection is quoted in it) carries no real value either while a
// run's credentials are in use: RedactLogs makes the log's output redact
// every registered Set.
var logRedaction struct {
	sync.Mutex
	sets map[*Set]int
	w    *redactingWriter
}

// RedactLogs redacts s's real values in every line of the process's log
// (package log) until release is called. Several sets may be registered
// at once (runs in one process); the log's output at the first call is
// where the redacted lines go.
func (s *Set) RedactLogs() (release func()) {
	logRedaction.Lock()
	defer logRedaction.Unlock()
	if logRedaction.sets == nil {
		logRedaction.sets = map[*Set]int{}
	}
	logRedaction.sets[s]++
	if cur := log.Writer(); logRedaction.w == nil || cur != io.Writer(logRedaction.w) {
		logRedaction.w = &redactingWriter{out: cur}
		log.SetOutput(logRedaction.w)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			logRedaction.Lock()
			defer logRedaction.Unlock()
			if logRedaction.sets[s]--; logRedaction.sets[s] <= 0 {
				delete(logRedaction.sets, s)
			}
		})
	}
}

// redactingWriter is the log's output while RedactLogs is in use. The log
// writes each line with one Write, so a value is never split between two.
type redactingWriter struct{ out io.Writer }

func (w *redactingWriter) Write(p []byte) (int, error) {
	logRedaction.Lock()
	b := p
	for s := range logRedaction.sets {
		b = s.Redact(b)
	}
	logRedaction.Unlock()
	if _, err := w.out.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}
