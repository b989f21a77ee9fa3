package proxy

import (
	"net/netip"
	"testing"
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
		"64:ff9b::a9fe:a9fe", "2002:7f00:1::", "224.0.0.1", "255.255.255.255"}
	public := []string{"1.1.1.1", "8.8.8.8", "2606:4700::1111", "::ffff:1.1.1.1", "64:ff9b::808:808"}
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
	for _, bad := range []string{"", "a:0", "a:99999", "*.", "a.*.com", "[::1", "x/y", "foo bar", "1.2.3.4/99"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted", bad)
		}
	}
}

func TestDecide(t *testing.T) {
	res := staticResolver{
		"api.example.com":    addrs("93.184.216.34"),
		"sub.example.com":    addrs("93.184.216.35"),
		"example.com":        addrs("93.184.216.36"),
		"evil.example.com":   addrs("127.0.0.1"),
		"meta.example.com":   addrs("169.254.169.254"),
		"ten.example.com":    addrs("10.0.0.7"),
		"v6.example.com":     addrs("::1"),
		"mapped.example.com": addrs("::ffff:127.0.0.1"),
		"mixed.example.com":  addrs("10.0.0.1", "93.184.216.40"),
		"mock-model.test":    addrs("127.0.0.1"),
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
