package proxy

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"
)

// HostResolver resolves names for the proxy: --add-host entries first (as
// Docker's flag), then the hosts file (a Pod's hostAliases land there), then
// the system resolver.
type HostResolver struct {
	Static    map[string][]netip.Addr
	HostsFile string // "" means /etc/hosts
	Timeout   time.Duration
}

// ParseAddHost parses NAME=IP (NAME:IP is accepted too, as Docker does).
func ParseAddHost(s string) (string, netip.Addr, error) {
	name, ip, ok := strings.Cut(s, "=")
	if !ok {
		if i := strings.Index(s, ":"); i > 0 {
			name, ip, ok = s[:i], s[i+1:], true
		}
	}
	a, err := netip.ParseAddr(strings.Trim(ip, "[]"))
	if !ok || err != nil || name == "" {
		return "", netip.Addr{}, fmt.Errorf("--add-host %q: expected NAME=IP", s)
	}
	return strings.TrimSuffix(strings.ToLower(name), "."), a.Unmap(), nil
}

// Pinned returns the addresses --add-host maps host to, if it does: an
// address the user chose for that name, not a DNS answer that other
// names may share.
func (r *HostResolver) Pinned(host string) []netip.Addr { return r.Static[host] }

// Lookup returns the addresses of host.
func (r *HostResolver) Lookup(host string) ([]netip.Addr, error) {
	if a, ok := r.Static[host]; ok {
		return a, nil
	}
	if a := r.fromHostsFile(host); len(a) > 0 {
		return a, nil
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The resolver must not consult a proxy or a cache the sandbox could
	// poison; the system resolver of the runner's own network is used.
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

func (r *HostResolver) fromHostsFile(host string) []netip.Addr {
	path := r.HostsFile
	if path == "" {
		path = "/etc/hosts"
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		a, err := netip.ParseAddr(fields[0])
		if err != nil {
			continue
		}
		for _, n := range fields[1:] {
			if strings.EqualFold(strings.TrimSuffix(n, "."), host) {
				out = append(out, a.Unmap())
				break
			}
		}
	}
	return out
}
