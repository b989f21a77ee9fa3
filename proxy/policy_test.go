package proxy

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

type staticResolver map[string][]netip.Addr

func (s staticResolver) Lookup(h string) ([]netip.Addr, error) { return s[h], nil }

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestParseInetAton(t *testing.T) {
	tests := map[string]string{
		"127.0.0.1": "127.0.0.1", "127.1": "127.0.0.1", "2130706433": "127.0.0.1",
		"0x7f000001": "127.0.0.1", "0177.0.0.1": "127.0.0.1", "0x7f.1": "127.0.0.1",
		"10.1.2": "10.1.0.2", "169.254.169.254": "169.254.169.254", "0": "0.0.0.0",
	}
	for in, want := range tests {
		got, ok := parseIPLiteral(in)
		if !ok || got.String() != want {
			t.Errorf("parseIPLiteral(%q) = %v %v, want %s", in, got, ok, want)
		}
	}
	for _, bad := range []string{"example.com", "1.2.3.4.5", "256.1.1.1", "08.1.1.1", "1..2", "", "0x", "1.2.3."} {
		if a, ok := parseIPLiteral(bad); ok && bad != "0x" {
			t.Errorf("parseIPLiteral(%q) = %v, want not an IP", bad, a)
		}
	}
}

func TestIsPrivate(t *testing.T) {
	private := []string{"127.0.0.1", "10.0.0.5", "172.16.3.4", "192.168.1.1", "169.254.169.254", "100.64.0.1",
		"0.0.0.0", "::1", "::", "fd00::1", "fe80::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::127.0.0.1",
		"64:ff9b::a9fe:a9fe", "2002:7f00:1::", "224.0.0.1", "255.255.255.255",
		"::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe", "::ffff:0:a00:1", "::ffff:0:0", // IPv4-translated (SIIT)
		"64:ff9b:1::808:808", "64:ff9b:1:7f00:1::", // local-use NAT64, wherever the IPv4 address sits
	}
	public := []string{"1.1.1.1", "8.8.8.8", "2606:4700::1111", "::ffff:1.1.1.1", "64:ff9b::808:808", "::ffff:0:101:101"}
	for _, s := range private {
		if !isPrivate(netip.MustParseAddr(s), nil) {
			t.Errorf("%s should be private", s)
		}
	}
	for _, s := range public {
		if isPrivate(netip.MustParseAddr(s), nil) {
			t.Errorf("%s should be public", s)
		}
	}
	if !isPrivate(netip.MustParseAddr("1.1.1.1"), addrs("1.1.1.1")) {
		t.Errorf("the host's own address must be refused")
	}
}

func TestParseRule(t *testing.T) {
	good := []struct {
		in                string
		name, suffix, pfx string
		port              int
	}{
		{"api.anthropic.com", "api.anthropic.com", "", "", 0},
		{"API.Example.COM.:8443", "api.example.com", "", "", 8443},
		{"*.github.com", "", ".github.com", "", 0},
		{"127.0.0.1:8080", "", "", "127.0.0.1/32", 8080},
		{"[::1]:8080", "", "", "::1/128", 8080},
		{"10.0.0.0/8:443", "", "", "10.0.0.0/8", 443},
		{"_dmarc.example.com", "_dmarc.example.com", "", "", 0},
		{"*.example.com:8443", "", ".example.com", "", 8443},
		{"xn--bcher-kva.example", "xn--bcher-kva.example", "", "", 0},
	}
	for _, tt := range good {
		r, err := ParseRule(tt.in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tt.in, err)
			continue
		}
		pfx := ""
		if r.Prefix.IsValid() {
			pfx = r.Prefix.String()
		}
		if r.Name != tt.name || r.Suffix != tt.suffix || pfx != tt.pfx || r.Port != tt.port {
			t.Errorf("ParseRule(%q) = %+v", tt.in, r)
		}
	}
	for _, bad := range []string{"", "a:0", "a:99999", "*.", "a.*.com", "[::1", "x/y", "foo bar", "1.2.3.4/99",
		"..example.com", "evil.com;.example.com", "*..example.com", "*.evil.com;.example.com", "-a.example.com",
		"a-.example.com", "a!b.com", strings.Repeat("x", 64) + ".com", strings.Repeat("abcdefghi.", 26) + "com",
		"127.1:8080", "2130706433:80"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted", bad)
		}
	}
	// An address lifts the private-address refusal: only with a port.
	for _, bad := range []string{"10.0.0.5", "10.0.0.0/8", "::1", "[::1]", "fd00::/8", "169.254.169.254"} {
		if _, err := ParseRule(bad); err == nil || !strings.Contains(err.Error(), "needs a port") {
			t.Errorf("ParseRule(%q) = %v, want an error asking for the port", bad, err)
		}
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"example.com", true},
		{"a", true},
		{"a-b.c_d.example", true},
		{"xn--bcher-kva.example", true},
		{strings.Repeat("x", 63) + ".com", true},
		{strings.Repeat("abcdefghi.", 24) + "abcdefghijkl", true}, // 252
		{"", false},
		{".", false},
		{"..example.com", false},
		{".example.com", false},
		{"example..com", false},
		{"evil.com;.example.com", false},
		{"a b.com", false},
		{"a/b.com", false},
		{"a@b.com", false},
		{"-a.com", false},
		{"a-.com", false},
		{"bücher.example", false},
		{strings.Repeat("x", 64) + ".com", false},
		{strings.Repeat("abcdefghi.", 25) + "abcd", false}, // 254
	}
	for _, tt := range tests {
		if got := validName(tt.name); got != tt.ok {
			t.Errorf("validName(%q) = %v, want %v", tt.name, got, tt.ok)
		}
	}
}

func TestWildcardNeverMatchesMalformedNames(t *testing.T) {
	r, err := ParseRule("*.example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"..example.com", "evil.com;.example.com", ".example.com", "a..example.com", "evil.com/.example.com"} {
		if r.matchesName(host, 443) {
			t.Errorf("*.example.com matches %q", host)
		}
	}
	if !r.matchesName("api.example.com", 443) {
		t.Error("*.example.com must match api.example.com")
	}
}

func TestHostAddrsAreReadAgainWhenStale(t *testing.T) {
	now := time.Unix(1000, 0)
	current := "198.51.100.0/24" // documentation range: private anyway, the set is what matters
	reads := 0
	h := &hostAddrs{maxAge: 5 * time.Second, now: func() time.Time { return now },
		read: func() ([]net.Addr, error) {
			reads++
			_, n, err := net.ParseCIDR(current)
			if err != nil {
				return nil, err
			}
			return []net.Addr{n}, nil
		}}
	p := &Policy{Mode: ModeFull, Self: h.get}
	res := staticResolver{"me.example.com": addrs("93.184.216.34")}
	if d := p.Decide("me.example.com", 443, res); !d.Allowed {
		t.Fatalf("not yet the host's address: %+v", d)
	}
	// The host gains the address; within maxAge the old set is still used.
	current = "93.184.216.34/32"
	now = now.Add(time.Second)
	if d := p.Decide("me.example.com", 443, res); !d.Allowed || reads != 1 {
		t.Fatalf("within maxAge: %+v after %d reads, want the cached set", d, reads)
	}
	now = now.Add(5 * time.Second)
	if d := p.Decide("me.example.com", 443, res); d.Allowed || d.Reason != "private_address" {
		t.Errorf("the host's new address was not picked up: %+v", d)
	}
	// A failed read keeps the last known set rather than forgetting it.
	current = "not a cidr"
	now = now.Add(10 * time.Second)
	if d := p.Decide("me.example.com", 443, res); d.Allowed {
		t.Errorf("a failed read dropped the host's addresses: %+v", d)
	}
}

func TestNewPolicyReadsTheHostsAddresses(t *testing.T) {
	p, err := NewPolicy("full", nil)
	if err != nil {
		t.Fatal(err)
	}
	self := p.Self()
	if len(self) == 0 {
		t.Fatal("no host address read")
	}
	// Whatever they are, each is refused as the host's own.
	for _, a := range self {
		if d := p.Decide(a.String(), 443, staticResolver{}); d.Allowed {
			t.Errorf("the host's own %s allowed", a)
		}
	}
}

func TestDecide(t *testing.T) {
	res := staticResolver{
		"api.example.com":       addrs("93.184.216.34"),
		"sub.example.com":       addrs("93.184.216.35"),
		"example.com":           addrs("93.184.216.36"),
		"evil.example.com":      addrs("127.0.0.1"),
		"meta.example.com":      addrs("169.254.169.254"),
		"ten.example.com":       addrs("10.0.0.7"),
		"v6.example.com":        addrs("::1"),
		"mapped.example.com":    addrs("::ffff:127.0.0.1"),
		"mixed.example.com":     addrs("10.0.0.1", "93.184.216.40"),
		"mock-model.test":       addrs("127.0.0.1"),
		"..example.com":         addrs("93.184.216.37"),
		"evil.com;.example.com": addrs("93.184.216.37"),
	}
	custom := []string{"api.example.com", "*.example.com", "mock-model.test:8080", "127.0.0.1:8080", "sub.example.com:9000"}
	tests := []struct {
		name, mode string
		allow      []string
		host       string
		port       int
		allowed    bool
		reason     string
		dial       string
	}{
		{"exact name", "", custom, "api.example.com", 443, true, "", "93.184.216.34"},
		{"default ports only", "", custom, "api.example.com", 8443, false, "not_allowed", ""},
		{"explicit port", "", custom, "sub.example.com", 9000, true, "", "93.184.216.35"},
		{"wildcard subdomain", "", custom, "sub.example.com", 80, true, "", "93.184.216.35"},
		{"wildcard not apex", "", custom, "example.com", 443, false, "not_allowed", ""},
		{"not listed", "", custom, "other.org", 443, false, "not_allowed", ""},
		{"allowed name resolving to loopback", "", custom, "evil.example.com", 443, false, "private_address", ""},
		{"allowed name resolving to metadata", "", custom, "meta.example.com", 80, false, "private_address", ""},
		{"allowed name resolving to 10.x", "", custom, "ten.example.com", 443, false, "private_address", ""},
		{"allowed name resolving to ::1", "", custom, "v6.example.com", 443, false, "private_address", ""},
		{"allowed name resolving to mapped loopback", "", custom, "mapped.example.com", 443, false, "private_address", ""},
		{"private answers are dropped, public kept", "", custom, "mixed.example.com", 443, true, "", "93.184.216.40"},
		{"routed test host with explicit address", "", custom, "mock-model.test", 8080, true, "", "127.0.0.1"},
		{"explicit address, wrong port", "", []string{"mock-model.test:8081", "127.0.0.1:8080"}, "mock-model.test", 8081, false, "private_address", ""},
		{"IP literal in custom needs an IP rule", "", custom, "93.184.216.34", 443, false, "not_allowed", ""},
		{"wildcard never matches IP", "", []string{"*.1"}, "10.0.0.1", 443, false, "not_allowed", ""},
		{"explicit IP literal", "", custom, "127.0.0.1", 8080, true, "", "127.0.0.1"},
		{"full: public name", "full", nil, "api.example.com", 443, true, "", "93.184.216.34"},
		{"full: any port", "full", nil, "api.example.com", 22, true, "", "93.184.216.34"},
		{"full: name to loopback", "full", nil, "evil.example.com", 443, false, "private_address", ""},
		{"full: 127.1", "full", nil, "127.1", 80, false, "private_address", ""},
		{"full: decimal", "full", nil, "2130706433", 80, false, "private_address", ""},
		{"full: hex", "full", nil, "0x7f000001", 80, false, "private_address", ""},
		{"full: octal", "full", nil, "0177.0.0.1", 80, false, "private_address", ""},
		{"full: mapped", "full", nil, "::ffff:127.0.0.1", 80, false, "private_address", ""},
		{"full: mapped metadata", "full", nil, "::ffff:a9fe:a9fe", 80, false, "private_address", ""},
		{"full: public literal", "full", nil, "1.1.1.1", 443, true, "", "1.1.1.1"},
		{"none", "none", nil, "api.example.com", 443, false, "not_allowed", ""},
		{"empty label under a wildcard", "", custom, "..example.com", 443, false, "not_allowed", ""},
		{"other name before a wildcard's suffix", "", custom, "evil.com;.example.com", 443, false, "not_allowed", ""},
		{"full: malformed name", "full", nil, "evil.com;.example.com", 443, false, "not_allowed", ""},
		{"allowed name without an address", "", custom, "gone.example.com", 443, false, "unresolvable", ""},
		{"full: name without an address", "full", nil, "nowhere.test", 443, false, "unresolvable", ""},
		{"full: IPv4-translated loopback", "full", nil, "::ffff:0:7f00:1", 80, false, "private_address", ""},
		{"full: IPv4-translated metadata", "full", nil, "::ffff:0:a9fe:a9fe", 80, false, "private_address", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPolicy(tt.mode, tt.allow)
			if err != nil {
				t.Fatal(err)
			}
			p.Self = nil
			d := p.Decide(tt.host, tt.port, res)
			if d.Allowed != tt.allowed || d.Reason != tt.reason {
				t.Fatalf("Decide(%s:%d) = %+v, want allowed=%v reason=%q", tt.host, tt.port, d, tt.allowed, tt.reason)
			}
			if tt.dial != "" && (len(d.Addrs) != 1 || d.Addrs[0].String() != tt.dial) {
				t.Errorf("dials %v, want exactly %s", d.Addrs, tt.dial)
			}
		})
	}
}

func TestNewPolicyErrors(t *testing.T) {
	if _, err := NewPolicy("none", []string{"a.com"}); err == nil {
		t.Error("--network none with --allow-host accepted")
	}
	if _, err := NewPolicy("sometimes", nil); err == nil {
		t.Error("unknown mode accepted")
	}
	if p, _ := NewPolicy("full", []string{"a.com"}); p.Mode != ModeCustom {
		t.Error("an --allow-host must make the mode custom")
	}
}

func TestParseAddHost(t *testing.T) {
	name, ip, err := ParseAddHost("Mock-Model.test=127.0.0.1")
	if err != nil || name != "mock-model.test" || ip.String() != "127.0.0.1" {
		t.Errorf("got %q %v %v", name, ip, err)
	}
	if _, _, err := ParseAddHost("nohost"); err == nil {
		t.Error("accepted a bad --add-host")
	}
}

// TestDecideLocal: the loopback opens only where an entry names it with
// its port (localhost by name, which the resolver is not asked about),
// and never with RefuseLocal (a Pod's runner), whatever the entries say,
// nor the host's own addresses there.
func TestDecideLocal(t *testing.T) {
	res := staticResolver{
		"localhost":       addrs("10.9.9.9"), // a hosts file that lies is not asked
		"mock-model.test": addrs("127.0.0.1"),
		"api.example.com": addrs("93.184.216.34"),
		"pod.test":        addrs("10.1.2.3"),
	}
	self := addrs("10.1.2.3")
	tests := []struct {
		name    string
		pod     bool
		allow   []string
		host    string
		port    int
		allowed bool
		reason  string
		dial    []netip.Addr
	}{
		{"localhost with its port", false, []string{"localhost:8099"}, "localhost", 8099, true, "", addrs("127.0.0.1", "::1")},
		{"localhost, another port", false, []string{"localhost:8099"}, "localhost", 8098, false, "not_allowed", nil},
		{"localhost without a port opens nothing", false, []string{"localhost"}, "localhost", 443, false, "private_address", nil},
		{"localhost in full mode", false, nil, "localhost", 8099, false, "private_address", nil},
		{"localhost. with its port", false, []string{"localhost:8099"}, "localhost.", 8099, true, "", addrs("127.0.0.1", "::1")},
		{"localhost by its address entry", false, []string{"127.0.0.1:8099"}, "localhost", 8099, true, "", addrs("127.0.0.1")},
		{"localhost by its address entry, another port", false, []string{"127.0.0.1:8099"}, "localhost", 8098, false, "not_allowed", nil},
		{"127.0.0.1 by the localhost entry", false, []string{"localhost:8099"}, "127.0.0.1", 8099, true, "", addrs("127.0.0.1")},
		{"::1 by the localhost entry", false, []string{"localhost:8099"}, "::1", 8099, true, "", addrs("::1")},
		{"127.0.0.2 by the localhost entry", false, []string{"localhost:8099"}, "127.0.0.2", 8099, false, "not_allowed", nil},
		{"2130706433 by the localhost entry", false, []string{"localhost:8099"}, "2130706433", 8098, false, "not_allowed", nil},
		{"pod: localhost by its address entry", true, []string{"127.0.0.1:8099"}, "localhost", 8099, false, "private_address", nil},
		{"127.0.0.1 with its port", false, []string{"127.0.0.1:8099"}, "127.0.0.1", 8099, true, "", addrs("127.0.0.1")},
		{"[::1] with its port", false, []string{"[::1]:8099"}, "::1", 8099, true, "", addrs("::1")},
		{"127.0.0.1, another port", false, []string{"127.0.0.1:8099"}, "127.0.0.1", 22, false, "not_allowed", nil},
		{"pod: 127.0.0.1 named exactly", true, []string{"127.0.0.1:8788"}, "127.0.0.1", 8788, false, "private_address", nil},
		{"pod: localhost named exactly", true, []string{"localhost:8788"}, "localhost", 8788, false, "private_address", nil},
		{"pod: a name routed to the loopback", true, []string{"mock-model.test:8788", "127.0.0.1:8788"}, "mock-model.test", 8788, false, "private_address", nil},
		{"pod: 0.0.0.0", true, []string{"0.0.0.0:8788"}, "0.0.0.0", 8788, false, "private_address", nil},
		{"pod: mapped loopback", true, []string{"127.0.0.0/8:8788"}, "::ffff:127.0.0.1", 8788, false, "private_address", nil},
		{"pod: 2130706433", true, []string{"127.0.0.1:8788"}, "2130706433", 8788, false, "private_address", nil},
		{"pod: its own address, named by a CIDR", true, []string{"10.0.0.0/8:8788"}, "10.1.2.3", 8788, false, "private_address", nil},
		{"pod: its own address by name", true, []string{"pod.test:8788", "10.0.0.0/8:8788"}, "pod.test", 8788, false, "private_address", nil},
		{"pod: another private address named", true, []string{"10.0.0.0/8:8788"}, "10.4.5.6", 8788, true, "", addrs("10.4.5.6")},
		{"pod: public", true, nil, "api.example.com", 443, true, "", addrs("93.184.216.34")},
		{"local: its own address named", false, []string{"10.0.0.0/8:8788"}, "10.1.2.3", 8788, true, "", addrs("10.1.2.3")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPolicy("", tt.allow)
			if err != nil {
				t.Fatal(err)
			}
			p.Self = func() []netip.Addr { return self }
			p.RefuseLocal = tt.pod
			d := p.Decide(tt.host, tt.port, res)
			if d.Allowed != tt.allowed || d.Reason != tt.reason {
				t.Fatalf("Decide(%s:%d) = %+v, want allowed=%v reason=%q", tt.host, tt.port, d, tt.allowed, tt.reason)
			}
			if tt.dial != nil && !slices.Equal(d.Addrs, tt.dial) {
				t.Errorf("dials %v, want %v", d.Addrs, tt.dial)
			}
		})
	}
}

func TestAllowsLocal(t *testing.T) {
	p, err := NewPolicy("", []string{"localhost:8099", "127.0.0.1:8100", "[::1]:8101", "mock.test:8102"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		host string
		port int
		want bool
	}{
		{"localhost", 8099, true}, {"LOCALHOST", 8099, true}, {"localhost", 8100, true}, {"localhost", 8101, true}, {"localhost", 8102, false},
		{"127.0.0.1", 8100, true}, {"127.0.0.1", 8099, true}, {"127.0.0.1", 8101, false}, {"[::1]", 8101, true}, {"::1", 8101, true},
		{"127.0.0.2", 8099, false}, {"mock.test", 8102, false},
	} {
		if got := p.AllowsLocal(tt.host, tt.port); got != tt.want {
			t.Errorf("AllowsLocal(%s, %d) = %v", tt.host, tt.port, got)
		}
	}
	p.RefuseLocal = true
	if p.AllowsLocal("127.0.0.1", 8100) || p.AllowsLocal("localhost", 8099) {
		t.Error("RefuseLocal still allows the loopback")
	}
}
