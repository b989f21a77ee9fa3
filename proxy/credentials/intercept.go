package credentials

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/agentrun-dev/agentrun/proxy"
	"github.com/agentrun-dev/agentrun/proxy/meter"
)

// Interceptor is the filter proxy's view of a run's credentials (it
// implements proxy.Interceptor): it claims the credential destinations,
// presents the run authority's certificate for them, puts the real values
// into the requests' headers, takes them out of the responses, and meters
// every model call. After Refuse it answers every further request itself.
type Interceptor struct {
	Set       *Set
	Authority *Authority
	Meter     *meter.Meter
	// RootCAs verify the upstreams (nil: the system's roots).
	RootCAs *x509.CertPool
	// RefuseUnmetered refuses the requests whose tokens the meter cannot
	// count (meter.Classify's Unknown: a Message Batch, a background
	// response, an API the meter does not read) before they go upstream,
	// 403 with the reason unmetered. Set with --max-tokens, whose limit
	// such a call would pass unseen.
	RefuseUnmetered bool

	refusal atomic.Pointer[string]
}

// tokenLimit is the reason of the refusals after Refuse.
const tokenLimit = "token_limit"

// methodOverrides are headers with which some servers and gateways take a
// request for another method (a GET for a POST): the meter judges a call
// by its method, so they never go upstream.
var methodOverrides = []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// Claims reports whether host:port is a credential destination.
func (i *Interceptor) Claims(host string, port int) bool { return len(i.Set.For(host, port)) > 0 }

// Destinations are the credential destinations.
func (i *Interceptor) Destinations() []proxy.Destination {
	var out []proxy.Destination
	for _, d := range i.Set.Dests() {
		out = append(out, proxy.Destination{Host: d.Host, Port: d.Port})
	}
	return out
}

// PlainHTTP reports whether host:port was declared as speaking plain HTTP:
// only then may the real value travel to it unencrypted.
func (i *Interceptor) PlainHTTP(host string, port int) bool { return i.Set.PlainHTTP(host, port) }

// Certificate is the authority's certificate for host.
func (i *Interceptor) Certificate(host string) (*tls.Certificate, error) {
	return i.Authority.Leaf(host)
}

// Roots verify the upstreams.
func (i *Interceptor) Roots() *x509.CertPool { return i.RootCAs }

// Request puts the real values in, or refuses: every request once Refuse
// was called (429), and with RefuseUnmetered one the meter cannot count
// (403). It asks for a whole answer without content encoding, whatever
// the client asked for: no encoding (see decode), and no byte ranges,
// which would let an upstream that echoes a request's headers hand the
// real value out in pieces, none of them the whole value the scrubbing
// looks for.
func (i *Interceptor) Request(host string, port int, r *http.Request) *proxy.Refusal {
	if p := i.refusal.Load(); p != nil {
		return &proxy.Refusal{Reason: tokenLimit, Detail: *p, Status: http.StatusTooManyRequests, Quiet: true}
	}
	for _, h := range methodOverrides {
		r.Header.Del(h)
	}
	if _, kind := meter.Classify(r.Method, r.URL); kind == meter.Unknown && i.RefuseUnmetered {
		return &proxy.Refusal{Reason: proxy.ReasonUnmetered, Status: http.StatusForbidden,
			Detail: fmt.Sprintf("%s refused (%s): --max-tokens is set, and the meter cannot count the tokens of such a call; "+
				"it counts the model calls of Anthropic Messages, OpenAI Responses and Chat Completions (POST), "+
				"and lets through listing the models and counting tokens", meter.Describe(r), proxy.ReasonUnmetered)}
	}
	Inject(r.Header, i.Set.For(host, port))
	r.Header.Set("Accept-Encoding", identity)
	r.Header.Del("Range")
	r.Header.Del("If-Range")
	return nil
}

// Response meters the call and takes the real values out of what the
// client (the agent's CLI) will read, after decoding a gzip or deflate
// body; an answer in any other encoding is refused, and when it answered
// a call that may have spent tokens (any but a free one) the meter is
// told it cannot count them. The body may change length, so it goes on
// without a Content-Length.
func (i *Interceptor) Response(host string, port int, r *http.Request, resp *http.Response) *proxy.Refusal {
	secrets := SecretsOf(r.Header, i.Set.For(host, port))
	Scrub(resp.Header, secrets)
	if enc := decode(resp); enc != "" {
		detail := fmt.Sprintf("the answer of %s came with %s, which the proxy cannot read to take the credential out and count its tokens "+
			"(it asks for no encoding and reads gzip and deflate)", net.JoinHostPort(host, strconv.Itoa(port)), enc)
		if _, kind := meter.Classify(r.Method, r.URL); kind != meter.Free && resp.StatusCode/100 == 2 && i.Meter != nil {
			i.Meter.Unreadable(detail + "; its answer was refused")
		}
		return &proxy.Refusal{Reason: proxy.ReasonUnsupportedEncoding, Detail: detail}
	}
	if i.Meter != nil {
		i.Meter.Watch(r, resp)
	}
	resp.Body = ScrubBody(resp.Body, secrets)
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return nil
}

// Refuse makes every further request to a credential destination fail
// with refusal (a spend limit was reached: the model calls stop at the
// proxy, whatever the CLI does).
func (i *Interceptor) Refuse(refusal string) { i.refusal.CompareAndSwap(nil, &refusal) }
