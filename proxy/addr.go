package proxy

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// nonPublic lists the ranges the proxy never dials unless an allow entry
// names them: loopback, RFC 1918, CGNAT, link-local (cloud metadata lives at
// 169.254.169.254), multicast, unspecified, documentation, benchmarking and
// reserved ranges, and their IPv6 counterparts including ULA.
var nonPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
		"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
		"100::/64", "2001:db8::/32", "2001::/32", // discard, documentation, Teredo (hides an IPv4 address)
		"64:ff9b:1::/48", // local-use NAT64 (RFC 8215): the IPv4 address sits where the operator chose
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// embeddedIPv4 returns the IPv4 address an IPv6 address carries in the
// forms a client could use to reach an IPv4 host: IPv4-mapped
// (::ffff:a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d, SIIT),
// IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	if a.Is4In6() {
		return a.Unmap(), true
	}
	b := a.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{b[i], b[i+1], b[i+2], b[i+3]}) }
	switch {
	case isZero(b[:12]):
		return v4(12), true // IPv4-compatible, deprecated but still routed by some stacks
	case isZero(b[:8]) && b[8] == 0xff && b[9] == 0xff && isZero(b[10:12]):
		return v4(12), true // IPv4-translated: a SIIT translator turns it into the IPv4 address
	case b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b:
		return v4(12), true
	case b[0] == 0x20 && b[1] == 0x02:
		return v4(2), true
	}
	return netip.Addr{}, false
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// isPrivate reports whether a is not a public unicast address, looking
// through IPv6 forms that embed an IPv4 address. self lists the host's own
// addresses, which are refused too.
func isPrivate(a netip.Addr, self []netip.Addr) bool {
	a = a.WithZone("")
	if containsAny(a) {
		return true
	}
	if v4, ok := embeddedIPv4(a); ok {
		// "::" and "::1" land in 0.0.0.0/8 this way, and are private too.
		return isPrivate(v4, self)
	}
	for _, s := range self {
		if s.WithZone("") == a {
			return true
		}
	}
	return containsAny(a)
}

func containsAny(a netip.Addr) bool {
	for _, p := range nonPublic {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseIPLiteral parses a host that is an IP address in any form a C
// resolver accepts (inet_aton: 127.1, 2130706433, 0x7f000001, 0177.0.0.1),
// or a bracketed or plain IPv6 address. Clients hand such hosts to the
// proxy verbatim; treating them as names would let "2130706433" slip past
// the checks that apply to 127.0.0.1.
func parseIPLiteral(host string) (netip.Addr, bool) {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.WithZone(""), true
	}
	return parseInetAton(h)
}

// parseInetAton implements inet_aton: one to four parts, each decimal,
// octal (leading 0) or hex (0x), the last part filling the remaining bytes.
func parseInetAton(s string) (netip.Addr, bool) {
	if s == "" || strings.HasSuffix(s, ".") {
		return netip.Addr{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil || digits == "" {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	last := len(vals) - 1
	for i, v := range vals[:last] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (24 - 8*uint(i))
	}
	if vals[last] >= 1<<(8*uint(4-last)) {
		return netip.Addr{}, false
	}
	n |= vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// selfMaxAge is how long the host's own addresses are trusted before they
// are read again: a Pod or laptop can gain an address while a run lasts,
// and re-reading them (one netlink dump) every few seconds costs nothing
// next to a connection.
const selfMaxAge = 5 * time.Second

// hostAddrs keeps the host's own addresses, read again when older than
// maxAge.
type hostAddrs struct {
	read   func() ([]net.Addr, error) // net.InterfaceAddrs outside tests
	now    func() time.Time
	maxAge time.Duration

	mu    sync.Mutex
	at    time.Time
	addrs []netip.Addr
}

func newHostAddrs() *hostAddrs {
	return &hostAddrs{read: net.InterfaceAddrs, now: time.Now, maxAge: selfMaxAge}
}

// get returns the current addresses. A failed read keeps the previous
// ones: losing them would let the host's own addresses through.
func (h *hostAddrs) get() []netip.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if !h.at.IsZero() && now.Sub(h.at) < h.maxAge {
		return h.addrs
	}
	addrs, err := h.read()
	if err != nil {
		return h.addrs
	}
	// A new slice: callers may still hold the previous one.
	var out []netip.Addr
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	h.at, h.addrs = now, out
	return out
}
