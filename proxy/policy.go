// Package proxy is the network filter proxy between the sandboxed agent and
// the world: HTTP CONNECT and absolute-form HTTP, a host allow list, and a
// refusal of private addresses unless an allow entry names them. It resolves
// names itself and dials exactly the addresses it checked, so the sandbox
// needs no DNS and a DNS answer cannot be swapped between check and dial.
//
// A request that names no valid destination (an empty label, a character
// outside letters, digits, hyphen and underscore, a name longer than DNS
// allows) is answered 400 and reported nowhere. A name that passes the
// policy but has no address is refused as unresolvable (502).
//
// The proxy holds at most Server.MaxConns client connections for a run, so
// a flood of idle connections cannot take the runner's descriptors: at the
// cap the connection quiet for longest is closed (clients reopen an idle
// keep-alive cheaply), and only when every connection is busy is the
// newcomer refused with 503 and a connection_limit event.
//
// A limit of name-based filtering: a CONNECT tunnel is opaque, so a client
// that tunnels to an allowed name can send TLS SNI and a Host header for
// another name served from the same address (domain fronting on a shared
// CDN). The proxy sees only the name in the CONNECT line and cannot stop
// that; allow-list only names whose addresses you trust as a whole.
package proxy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/agentrun-dev/agentrun/events"
)

// Network modes (start.network.mode).
const (
	ModeNone   = "none"
	ModeFull   = "full"
	ModeCustom = "custom"
)

// Rule is one --allow-host entry.
type Rule struct {
	Raw    string
	Name   string       // exact host name, lower case, no trailing dot
	Suffix string       // for "*.example.com": ".example.com" (subdomains only)
	Prefix netip.Prefix // an IP literal (as /32 or /128) or a CIDR
	Port   int          // 0: the default ports 80 and 443 (names only)
}

// ParseRule parses HOST[:PORT], where HOST is a name, "*.suffix", an IP
// address (IPv6 in brackets) or a CIDR. An address or CIDR needs the port:
// it lifts the private-address refusal, and that should open exactly one
// service, not every port of an internal host.
func ParseRule(s string) (Rule, error) {
	r := Rule{Raw: s}
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return r, fmt.Errorf("--allow-host %q: missing ]", s)
		}
		host, port = s[1:end], strings.TrimPrefix(s[end+1:], ":")
		if rest := s[end+1:]; rest != "" && !strings.HasPrefix(rest, ":") {
			return r, fmt.Errorf("--allow-host %q: expected :PORT after ]", s)
		}
	} else if i := strings.LastIndex(s, ":"); i >= 0 && strings.Count(s, ":") == 1 {
		host, port = s[:i], s[i+1:]
	}
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return r, fmt.Errorf("--allow-host %q: port %q is not 1-65535", s, port)
		}
		r.Port = p
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	switch {
	case host == "":
		return r, fmt.Errorf("--allow-host %q: empty host", s)
	case strings.Contains(host, "/"):
		pfx, err := netip.ParsePrefix(host)
		if err != nil {
			return r, fmt.Errorf("--allow-host %q: bad CIDR: %v", s, err)
		}
		r.Prefix = pfx.Masked()
	case strings.HasPrefix(host, "*."):
		if strings.Contains(host[2:], "*") {
			return r, fmt.Errorf("--allow-host %q: a wildcard is only allowed as the first label, as in *.example.com", s)
		}
		if !validName(host[2:]) {
			return r, fmt.Errorf("--allow-host %q: not a host name", s)
		}
		r.Suffix = host[1:]
	default:
		if a, err := netip.ParseAddr(host); err == nil {
			r.Prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		} else if _, ok := parseIPLiteral(host); ok {
			return r, fmt.Errorf("--allow-host %q: write the address as a.b.c.d", s)
		} else if !validName(host) {
			return r, fmt.Errorf("--allow-host %q: not a host name", s)
		} else {
			r.Name = host
		}
	}
	if r.Prefix.IsValid() && r.Port == 0 {
		ex := "10.0.0.5:8080"
		if r.Prefix.Addr().Is6() {
			ex = "[fd00::5]:8080"
		}
		return r, fmt.Errorf("--allow-host %q: an address or CIDR needs a port, as in %s: it lifts the private-address refusal for exactly that address and port", s, ex)
	}
	return r, nil
}

// DNS's own limits (RFC 1035): no longer name or label can be resolved.
const (
	maxNameLen  = 253
	maxLabelLen = 63
)

// validName reports whether host (lower case, no trailing dot) is a name a
// resolver accepts: labels of 1 to 63 letters, digits, hyphens and
// underscores, not starting or ending with a hyphen (Go's resolver refuses
// those too), 253 bytes at most. Anything else in a request is malformed,
// and matching it against "*.example.com" would let "evil.com;.example.com"
// through.
func validName(host string) bool {
	if host == "" || len(host) > maxNameLen {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > maxLabelLen || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func (r Rule) portOK(port int) bool {
	if r.Port == 0 {
		return port == 80 || port == 443
	}
	return port == r.Port
}

// matchesName reports whether a name rule covers host:port. Name rules never
// match IP literals nor malformed names.
func (r Rule) matchesName(host string, port int) bool {
	if !r.portOK(port) || !validName(host) {
		return false
	}
	switch {
	case r.Name != "":
		return host == r.Name
	case r.Suffix != "":
		return strings.HasSuffix(host, r.Suffix) && len(host) > len(r.Suffix)
	}
	return false
}

// matchesAddr reports whether an IP or CIDR rule covers addr:port.
func (r Rule) matchesAddr(a netip.Addr, port int) bool {
	return r.Prefix.IsValid() && r.portOK(port) && r.Prefix.Contains(a.Unmap())
}

// Policy is what the proxy lets through.
type Policy struct {
	Mode  string
	Rules []Rule
	// Self returns the host's own addresses, refused like private ones.
	// NewPolicy reads them from the interfaces, again when older than a few
	// seconds; nil means none.
	Self func() []netip.Addr
	// RefuseLocal refuses the loopback, the unspecified address and the
	// host's own addresses whatever the allow entries say: in a Pod they
	// hold agentrun's own servers (the events sidecar), never a model.
	// Off, an entry that names one opens exactly its port (a model on
	// this machine's 127.0.0.1:8099, on the local command).
	RefuseLocal bool
}

// localhostAddrs are what the name localhost means (RFC 6761), in the
// order they are dialled; the resolver is not asked, so /etc/hosts cannot
// make it mean another host.
var localhostAddrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}

// IsLoopbackName reports whether host is the name localhost, which
// always means the loopback.
func IsLoopbackName(host string) bool {
	return strings.TrimSuffix(strings.ToLower(host), ".") == "localhost"
}

// IsLocal reports whether a reaches this host itself: the loopback and
// the unspecified address (a connection to 0.0.0.0 lands on the
// loopback), in any form that embeds an IPv4 address.
func IsLocal(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	if v4, ok := embeddedIPv4(a); ok {
		a = v4
	}
	return a.IsLoopback() || a.IsUnspecified() || a.Is4() && a.As4()[0] == 0
}

// refusedLocal: RefuseLocal holds and a is the loopback, unspecified or
// one of the host's own addresses.
func (p *Policy) refusedLocal(a netip.Addr, self []netip.Addr) bool {
	if !p.RefuseLocal {
		return false
	}
	if IsLocal(a) {
		return true
	}
	for _, s := range self {
		if s.WithZone("") == a.Unmap().WithZone("") {
			return true
		}
	}
	return false
}

// NewPolicy builds a policy from --network and --allow-host values. Any
// allow entry makes the mode custom.
func NewPolicy(mode string, allow []string) (*Policy, error) {
	if len(allow) > 0 {
		if mode == ModeNone {
			return nil, fmt.Errorf("--allow-host needs network access: drop --network none")
		}
		mode = ModeCustom
	}
	switch mode {
	case "":
		mode = ModeFull
	case ModeNone, ModeFull, ModeCustom:
	default:
		return nil, fmt.Errorf("--network %q: use none or full, or --allow-host HOST[:PORT] for a list", mode)
	}
	if mode == ModeCustom && len(allow) == 0 {
		return nil, fmt.Errorf("--network custom needs at least one --allow-host HOST[:PORT]")
	}
	p := &Policy{Mode: mode, Self: newHostAddrs().get}
	for _, a := range allow {
		r, err := ParseRule(a)
		if err != nil {
			return nil, err
		}
		p.Rules = append(p.Rules, r)
	}
	return p, nil
}

// Refusal reasons beyond the policy's own (events.ReasonNotAllowed and
// events.ReasonPrivateAddress), reported in Access.Reason.
const (
	// ReasonUnresolvable: the name passed the policy but has no address;
	// nothing was dialed (502).
	ReasonUnresolvable = events.ReasonUnresolvable
	// ReasonConnectionLimit: the run's connection cap was reached and every
	// connection was busy (503).
	ReasonConnectionLimit = events.ReasonConnectionLimit
	// ReasonUnsupportedEncoding: an intercepted destination's answer came
	// in a content encoding the interceptor cannot read (502).
	ReasonUnsupportedEncoding = events.ReasonUnsupportedEncoding
	// ReasonTLSRequired: plain HTTP to an intercepted destination that
	// does not take it (403).
	ReasonTLSRequired = events.ReasonTLSRequired
	// ReasonUnmetered: the interceptor refused a request whose cost it
	// cannot count while a spend limit holds (403).
	ReasonUnmetered = events.ReasonUnmetered
	// ReasonCredentialAddress: an address of an intercepted destination
	// asked for under another name or as an IP literal (403; see
	// Server.claimedAddress).
	ReasonCredentialAddress = events.ReasonCredentialAddress
)

// Decision is the verdict on one destination.
type Decision struct {
	Allowed bool
	// Reason when refused: events.ReasonNotAllowed,
	// events.ReasonPrivateAddress or ReasonUnresolvable.
	Reason string
	Addrs  []netip.Addr // the addresses to dial, in order, when allowed
}

// Resolver finds the addresses of a name.
type Resolver interface {
	Lookup(host string) ([]netip.Addr, error)
}

// Decide checks host:port. host is lower-cased, without brackets or a
// trailing dot; an IP literal in any spelling or a valid name (anything
// else is refused as not allowed).
func (p *Policy) Decide(host string, port int, res Resolver) Decision {
	deny := func(reason string) Decision { return Decision{Reason: reason} }
	if p.Mode == ModeNone || port < 1 || port > 65535 {
		return deny(events.ReasonNotAllowed)
	}
	self := p.self()
	if ip, ok := parseIPLiteral(host); ok {
		ip = ip.Unmap()
		if p.refusedLocal(ip, self) {
			return deny(events.ReasonPrivateAddress)
		}
		explicit := p.explicitAddr(ip, port) || p.localhostAddr(ip, port)
		switch {
		case explicit:
			return Decision{Allowed: true, Addrs: []netip.Addr{ip}}
		case p.Mode == ModeCustom:
			return deny(events.ReasonNotAllowed)
		case isPrivate(ip, self):
			return deny(events.ReasonPrivateAddress)
		}
		return Decision{Allowed: true, Addrs: []netip.Addr{ip}}
	}
	if IsLoopbackName(host) {
		// localhost is the loopback, whatever a resolver says: allowed
		// only where an entry names localhost, or the address, with this
		// very port (and the loopback is not refused).
		if p.RefuseLocal {
			return deny(events.ReasonPrivateAddress)
		}
		var ok []netip.Addr
		for _, a := range localhostAddrs {
			if p.namesPort("localhost", port) || p.explicitAddr(a, port) {
				ok = append(ok, a)
			}
		}
		switch {
		case len(ok) > 0:
			return Decision{Allowed: true, Addrs: ok}
		case p.Mode == ModeCustom && !p.nameAllowed(host, port):
			return deny(events.ReasonNotAllowed)
		}
		return deny(events.ReasonPrivateAddress)
	}
	if !validName(host) || p.Mode == ModeCustom && !p.nameAllowed(host, port) {
		return deny(events.ReasonNotAllowed)
	}
	addrs, err := res.Lookup(host)
	if err != nil || len(addrs) == 0 {
		return deny(ReasonUnresolvable)
	}
	var ok []netip.Addr
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if p.refusedLocal(a, self) {
			continue
		}
		if !isPrivate(a, self) || p.explicitAddr(a, port) {
			ok = append(ok, a)
		}
	}
	if len(ok) == 0 {
		return deny(events.ReasonPrivateAddress)
	}
	return Decision{Allowed: true, Addrs: ok}
}

func (p *Policy) self() []netip.Addr {
	if p.Self == nil {
		return nil
	}
	return p.Self()
}

func (p *Policy) nameAllowed(host string, port int) bool {
	for _, r := range p.Rules {
		if r.matchesName(host, port) {
			return true
		}
	}
	return false
}

// namesPort: an exact-name entry names host with this port (not the
// default ports a name without one gets).
func (p *Policy) namesPort(host string, port int) bool {
	for _, r := range p.Rules {
		if r.Name == host && r.Port == port {
			return true
		}
	}
	return false
}

// localhostAddr: a is what localhost means (127.0.0.1 or ::1) and an
// entry names localhost with this port.
func (p *Policy) localhostAddr(a netip.Addr, port int) bool {
	for _, l := range localhostAddrs {
		if a == l {
			return p.namesPort("localhost", port)
		}
	}
	return false
}

// AllowsLocal reports whether a connection to host:port (the loopback, as
// a base URL names it: localhost or an address) is let through: an entry
// names exactly it, and the loopback is not refused.
func (p *Policy) AllowsLocal(host string, port int) bool {
	if p.Mode == ModeNone || p.RefuseLocal {
		return false
	}
	if IsLoopbackName(host) {
		return p.namesPort("localhost", port) || p.explicitAddr(localhostAddrs[0], port) || p.explicitAddr(localhostAddrs[1], port)
	}
	a, ok := parseIPLiteral(strings.Trim(host, "[]"))
	return ok && (p.explicitAddr(a.Unmap(), port) || p.localhostAddr(a.Unmap(), port))
}

// explicitAddr: an IP or CIDR allow entry names this address and port,
// which lifts the private-address refusal for exactly those addresses.
func (p *Policy) explicitAddr(a netip.Addr, port int) bool {
	for _, r := range p.Rules {
		if r.matchesAddr(a, port) {
			return true
		}
	}
	return false
}

// Allow lists the raw allow entries, for start.network.allow.
func (p *Policy) Allow() []string {
	out := []string{}
	for _, r := range p.Rules {
		out = append(out, r.Raw)
	}
	return out
}
