package runner

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/safefile"
	"github.com/agentrun-dev/agentrun/proxy"
	"github.com/agentrun-dev/agentrun/proxy/credentials"
	"github.com/agentrun-dev/agentrun/proxy/meter"
)

// creds is a run's --credential set up: the stand-ins, the run's
// certificate authority and the files that make the CLIs trust it, the
// proxy's interceptor and the meter.
type creds struct {
	set       *credentials.Set
	roots     *x509.CertPool // --upstream-ca, nil for the system's
	userCAs   []byte         // CA files the user named with --env, merged into ours
	intercept *credentials.Interceptor
	authority *credentials.Authority // the run's, for the credentials and the repository
	env       []string               // NAME=stand-in and the CA variables
	// releaseLogs ends the redaction of the real values in the process's
	// log (see build).
	releaseLogs func()
}

// caVars are the variables through which the CLIs (and the agent's tools)
// learn to trust an extra authority: claude-code and pi read
// NODE_EXTRA_CA_CERTS (added to the built-in roots); codex, curl, Python
// and OpenSSL read a whole bundle from SSL_CERT_FILE, CURL_CA_BUNDLE or
// REQUESTS_CA_BUNDLE.
var caVars = []string{"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE"}

// systemBundles are where distributions keep their root bundle.
var systemBundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"}

// prepareCreds validates the --credential flags of a request: each value
// is set in agentrun's own environment, each destination is reachable
// under the policy (a private address only when an --allow-host names it),
// names clash with no other variable, and the CA files load. A name-only
// allow list gains the credential hosts.
func prepareCreds(o Options, p *prepared) (*creds, error) {
	if len(o.Credentials) == 0 {
		if o.UpstreamCA != "" && o.Repo == "" {
			return nil, reject("--upstream-ca is for the credential destinations and --repo: pass --credential or --repo too, or drop it")
		}
		if o.Repo == "" || !p.iso.sandboxed() || p.iso.policy.Mode == proxy.ModeNone {
			return nil, nil
		}
		// The run's repository alone: no credential, but the run's
		// authority for the proxy's fetch scope (repo.go).
	}
	if !p.iso.sandboxed() {
		return nil, reject("--credential needs the sandbox (its filter proxy puts the real value in): drop --sandbox none")
	}
	if p.iso.policy.Mode == proxy.ModeNone {
		return nil, reject("--credential needs network access to its hosts: drop --network none")
	}
	var list []*credentials.Credential
	for _, f := range o.Credentials {
		c, err := credentials.Parse(f, os.LookupEnv)
		if err != nil {
			return nil, reject("%v", err)
		}
		list = append(list, c)
	}
	set, err := credentials.NewSet(list)
	if err != nil {
		return nil, reject("%v", err)
	}
	for _, kv := range p.env {
		for _, name := range set.Names() {
			if kv[0] == name {
				return nil, reject("--credential %s: %s is also set by --env, --env-file or --pass-env; the agent gets its stand-in, so set it only once", name, name)
			}
		}
	}
	for _, d := range set.Dests() {
		if err := allowCredentialDest(p.iso, d); err != nil {
			return nil, err
		}
	}
	c := &creds{set: set}
	files := p.files()
	if o.UpstreamCA != "" {
		pem, err := readCertificates(files, o.UpstreamCA)
		c.roots = x509.NewCertPool()
		if err != nil || !c.roots.AppendCertsFromPEM(pem) {
			return nil, reject("--upstream-ca %s: not a readable PEM bundle of certificates (%v); pass the CA of your model gateway", o.UpstreamCA, err)
		}
	}
	for _, kv := range p.env {
		if kv[0] == "NODE_EXTRA_CA_CERTS" || kv[0] == "SSL_CERT_FILE" {
			path := kv[1]
			if !filepath.IsAbs(path) {
				// Where the CLI, started in the workspace, would look.
				path = filepath.Join(p.cwd, path)
			}
			pem, err := readCertificates(files, path)
			if err != nil {
				return nil, reject("%s=%s: not a readable PEM file of certificates (%v), which the CLI could not load either; fix the path or drop it", kv[0], kv[1], err)
			}
			c.userCAs = append(c.userCAs, pem...)
		}
	}
	return c, nil
}

// maxCAFile bounds a CA file the runner reads: a distribution's whole root
// bundle is about 200 KiB, and a path an agent-written --env-file names
// (/dev/zero, a huge file) must not make the runner read without end.
const maxCAFile = 4 << 20

// readCertificates returns the certificates of the PEM file at path, each
// parsed as X.509 and encoded again, and nothing else of it. What it
// returns goes into the bundle the agent reads, and the variable that named
// the file may come from an --env-file in the workspace, which an earlier
// run's agent could edit: a file holding a private key beside its
// certificate (a server's combined PEM, readable only by the runner's user)
// must yield the certificate alone (docs/credentials.md). Inside the
// workspace no path component may be a symbolic link (package safefile);
// only a regular file of at most maxCAFile bytes is read, and a file
// without a certificate is an error.
func readCertificates(files safefile.Guard, path string) ([]byte, error) {
	// A FIFO or a device outside the workspace would block the open or
	// never end; a regular file is checked before it is opened (what the
	// agent wrote lies in the workspace, where safefile checks the open
	// file itself).
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", path, safefile.ErrNotRegular)
	}
	f, err := files.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxCAFile+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxCAFile {
		return nil, fmt.Errorf("%s is larger than %d MiB", path, maxCAFile>>20)
	}
	return certificatesOf(raw)
}

// certificatesOf re-encodes the CERTIFICATE blocks of a PEM text that parse
// as X.509; keys, other blocks, PEM headers and text between blocks are
// left out.
func certificatesOf(raw []byte) ([]byte, error) {
	var out []byte
	for {
		var b *pem.Block
		b, raw = pem.Decode(raw)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			continue
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})...)
	}
	if len(out) == 0 {
		return nil, errors.New("no certificate in it")
	}
	return out, nil
}

// allowCredentialDest makes a credential destination an allowed one: a
// name joins a custom allow list (its port only); an address, and a name
// --add-host maps, must pass the policy as it is, so that a credential
// never opens a private address nobody allowed.
func allowCredentialDest(iso *isolation, d credentials.Dest) error {
	_, err := netip.ParseAddr(d.Host)
	isIP := err == nil
	if !isIP && iso.policy.Mode == proxy.ModeCustom {
		rule, err := proxy.ParseRule(d.String())
		if err != nil {
			return reject("--credential host %s: %v", d, err)
		}
		iso.policy.Rules = append(iso.policy.Rules, rule)
	}
	if isIP || iso.resolver.Static[d.Host] != nil {
		if dec := iso.policy.Decide(d.Host, d.Port, iso.resolver); !dec.Allowed {
			return reject("--credential host %s is refused by the network policy (%s): a private address needs an explicit --allow-host %s",
				d, dec.Reason, allowEntry(d, iso))
		}
	}
	return nil
}

// allowEntry is the --allow-host entry that would allow d's address.
func allowEntry(d credentials.Dest, iso *isolation) string {
	host := d.Host
	if a := iso.resolver.Static[d.Host]; len(a) > 0 {
		host = a[0].String()
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		return "[" + host + "]:" + strconv.Itoa(d.Port)
	}
	return host + ":" + strconv.Itoa(d.Port)
}

// build makes the run's authority and writes what the CLIs need to trust
// it into the state directory, which the sandbox sees: the authority's
// certificate, and a bundle of the system's roots, the user's CAs and it.
// The authority's key stays in this process.
func (c *creds) build(stateDir string, m *meter.Meter, maxTokens int64, extra ...credentials.Dest) error {
	ca, err := credentials.NewAuthority(append(c.set.Dests(), extra...), time.Now())
	if err != nil {
		return err
	}
	c.authority = ca
	c.intercept = &credentials.Interceptor{Set: c.set, Authority: ca, Meter: m, RootCAs: c.roots, RefuseUnmetered: maxTokens > 0}
	// Go's HTTP stack logs what an upstream sent on an idle connection,
	// quoted, to the process's log (the runner's stderr): while the run
	// lasts, every log line shows stand-ins in place of real values.
	c.releaseLogs = c.set.RedactLogs()
	caPEM := append(append([]byte{}, ca.CertPEM()...), c.userCAs...)
	bundle := append([]byte{}, c.userCAs...)
	for _, p := range systemBundles {
		if b, err := readCertificates(safefile.Guard{}, p); err == nil {
			bundle = append(bundle, b...)
			break
		}
	}
	bundle = append(bundle, ca.CertPEM()...)
	caFile, bundleFile := filepath.Join(stateDir, "agentrun-ca.pem"), filepath.Join(stateDir, "agentrun-ca-bundle.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(bundleFile, bundle, 0o644); err != nil {
		return err
	}
	c.env = append(c.env, c.set.Env()...)
	for _, v := range caVars {
		f := bundleFile
		if v == "NODE_EXTRA_CA_CERTS" {
			f = caFile
		}
		c.env = append(c.env, v+"="+f)
	}
	return nil
}

// close ends what build started that outlives nothing of the run: the
// log's redaction.
func (c *creds) close() {
	if c != nil && c.releaseLogs != nil {
		c.releaseLogs()
		c.releaseLogs = nil
	}
}

// pairs are c's variables for the agent's environment, after the user's.
func (c *creds) pairs() [][2]string {
	var out [][2]string
	if c != nil {
		for _, kv := range c.env {
			k, v, _ := cutEnv(kv)
			out = append(out, [2]string{k, v})
		}
	}
	return out
}

// names are start.credentials.
func (c *creds) names() []string {
	if c == nil {
		return nil
	}
	return c.set.Names()
}

// meterOf is end.meter from the meter's count.
func meterOf(m *meter.Meter) *events.Meter {
	if m == nil {
		return nil
	}
	t := m.Total()
	return &events.Meter{Calls: len(m.Calls()), InputTokens: t.InputTokens, OutputTokens: t.OutputTokens,
		CacheReadTokens: t.CacheReadTokens, CacheWriteTokens: t.CacheWriteTokens, Unmetered: m.UnreadableCalls()}
}

// tokenLimitRefusal is the proxy's answer to model calls past --max-tokens.
func tokenLimitRefusal(max int64) string {
	return fmt.Sprintf("token_limit: --max-tokens %d reached", max)
}
