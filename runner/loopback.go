package runner

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentrun-dev/agentrun/proxy"
)

// localURL is a base URL of the agent's environment on the loopback
// (NAME_BASE_URL=http://127.0.0.1:8099, ANTHROPIC_BASE_URL and
// OPENAI_BASE_URL among them): a model on this machine. Inside the
// sandbox the loopback is the sandbox's own, so the CLI must reach it
// through the proxy, which lets it through only where an --allow-host
// entry names exactly its host and port, and never in a Pod.
type localURL struct {
	name string // the variable
	host string // as the URL writes it: localhost, 127.0.0.1, ::1
	port int
}

// addr is host:port as --allow-host writes it.
func (u localURL) addr() string { return net.JoinHostPort(u.host, strconv.Itoa(u.port)) }

// localURLs finds the base URLs on the loopback among the agent's
// variables (the last value of a name counts): a name that ends in
// _BASE_URL, an http or https URL, a host that is localhost or a
// loopback or unspecified address.
func localURLs(env [][2]string) []localURL {
	last := map[string]string{}
	var names []string
	for _, kv := range env {
		if !strings.HasSuffix(kv[0], "_BASE_URL") {
			continue
		}
		if _, ok := last[kv[0]]; !ok {
			names = append(names, kv[0])
		}
		last[kv[0]] = kv[1]
	}
	var out []localURL
	for _, name := range names {
		u, err := url.Parse(strings.TrimSpace(last[name]))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !isLocalHost(u.Hostname()) {
			continue
		}
		port := 80
		if u.Scheme == "https" {
			port = 443
		}
		if p := u.Port(); p != "" {
			if port, err = strconv.Atoi(p); err != nil {
				continue
			}
		}
		out = append(out, localURL{name: name, host: strings.ToLower(u.Hostname()), port: port})
	}
	return out
}

// isLocalHost reports whether a URL's host means this machine itself.
func isLocalHost(host string) bool {
	if proxy.IsLoopbackName(host) {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && proxy.IsLocal(a)
}

// leadsToLocalURL reports whether the NO_PROXY entry e is the host of a
// base URL on the loopback: such a host must not be listed there, so that
// the CLI's request reaches the proxy, which lets it through or refuses it
// with a network event, instead of the sandbox's empty loopback, where
// the CLI would retry in silence.
func (i *isolation) leadsToLocalURL(e string) bool {
	e = strings.Trim(strings.ToLower(e), "[]")
	for _, u := range i.local {
		if e == u.host {
			return true
		}
	}
	return false
}

// localNotes are the [note] lines about the base URLs on the loopback:
// reached through the proxy, or why not and what to do.
func (i *isolation) localNotes() []string {
	if !i.sandboxed() {
		return nil // the agent shares this machine's loopback
	}
	var out []string
	for _, u := range i.local {
		switch {
		case i.policy.Mode == proxy.ModeNone:
			out = append(out, fmt.Sprintf("%s points at %s on the loopback, and --network none lets no connection out of the sandbox: drop --network none and pass --allow-host %s", u.name, u.addr(), u.addr()))
		case i.policy.RefuseLocal:
			out = append(out, fmt.Sprintf("%s points at %s on the loopback, which in a Pod holds agentrun's own servers, never a model: the proxy refuses it. Point %s at the model's Service (http://NAME.NAMESPACE.svc:PORT) and allow that host", u.name, u.addr(), u.name))
		case i.policy.AllowsLocal(u.host, u.port):
			out = append(out, fmt.Sprintf("the agent reaches this machine's %s (%s) through the proxy, as --allow-host %s allows", u.addr(), u.name, u.addr()))
		default:
			out = append(out, fmt.Sprintf("%s points at %s on the loopback, which inside the sandbox is the sandbox's own: the proxy refuses it. Pass --allow-host %s to reach this machine's %s through the proxy", u.name, u.addr(), u.addr(), u.addr()))
		}
	}
	return out
}

// refuseLocalInPod rejects, in a Pod, what could only open the loopback
// (--allow-host 127.0.0.1:PORT, localhost:PORT, --add-host NAME=127.0.0.1):
// there it holds agentrun's own servers, and the proxy refuses it anyway.
func refuseLocalInPod(iso *isolation, addHosts []string) error {
	const why = "in a Pod the loopback holds agentrun's own servers (the events sidecar), never a model, and the agent may not reach it: point the model at its Service (NAME.NAMESPACE.svc:PORT) and allow that"
	for _, r := range iso.policy.Rules {
		if proxy.IsLoopbackName(r.Name) || r.Prefix.IsValid() && proxy.IsLocal(r.Prefix.Addr()) && proxy.IsLocal(lastAddr(r.Prefix)) {
			return reject("--allow-host %s: %s", r.Raw, why)
		}
	}
	for _, h := range addHosts {
		if _, ip, err := proxy.ParseAddHost(h); err == nil && proxy.IsLocal(ip) {
			return reject("--add-host %s: %s", h, why)
		}
	}
	return nil
}

// lastAddr is the highest address of p: with its first, a prefix lies
// within a range when both do (127.0.0.0/8 in the loopback, 0.0.0.0/0 not).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
