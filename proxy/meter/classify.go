package meter

import (
	"net/http"
	"net/url"
	"path"
	"strings"
)

// Kind is what the meter makes of a request to a credential destination.
type Kind int

const (
	// Unknown is a request whose cost the meter cannot tell: it may make
	// the model generate where no answer the meter reads says how much (a
	// Message Batch, a background response polled later, an API the meter
	// does not read). With --max-tokens the proxy refuses it.
	Unknown Kind = iota
	// Metered is a model call of an API the meter reads.
	Metered
	// Free is a call known to generate nothing: listing the models,
	// counting a prompt's tokens.
	Free
)

// Classify says what a request is by its method and path. Model calls are
// matched by the end of the path, whatever comes before (a gateway's
// /api/v1), after normalising the path the ways a server might (see
// normalPath): taking a request for a model call when it is not one costs
// nothing, since a model call answered without usage counts as one the
// meter could not read. Free calls are matched only on a path in plain
// form, exactly as the CLIs send them: such a call is let through
// uncounted, so no spelling may make a server see another call in it.
func Classify(method string, u *url.URL) (API, Kind) {
	if strings.EqualFold(method, http.MethodPost) {
		if api, ok := apiOf(normalPath(u)); ok {
			return api, Metered
		}
	}
	if plainPath(u) && freeCall(method, u.Path) {
		return "", Free
	}
	return "", Unknown
}

// apiOf names the API of a model call by its normalised path: Anthropic
// Messages; OpenAI Responses and its compaction (a whole answer with the
// usage of a Response); Chat Completions and the legacy Completions, whose
// usage has the same shape.
func apiOf(p string) (API, bool) {
	switch {
	case strings.HasSuffix(p, "/messages"):
		return Anthropic, true
	case strings.HasSuffix(p, "/responses"), strings.HasSuffix(p, "/responses/compact"):
		return Responses, true
	case strings.HasSuffix(p, "/chat/completions"), strings.HasSuffix(p, "/completions"):
		return Chat, true
	}
	return "", false
}

// maxDecode bounds how often normalPath undoes percent-encoding: a server
// behind a gateway may decode once more.
const maxDecode = 3

// normalPath is u's path as the meter matches model calls: the
// percent-encoding undone (again, as long as some remains, up to
// maxDecode times), backslashes taken as slashes, each segment without
// its ;parameters, duplicate slashes and dot segments resolved, no
// trailing slash, in lower case (/V1/Messages).
func normalPath(u *url.URL) string {
	p := u.EscapedPath()
	for range maxDecode {
		d, err := url.PathUnescape(p)
		if err != nil || d == p {
			break
		}
		p = d
	}
	segs := strings.Split(strings.ReplaceAll(p, `\`, "/"), "/")
	for i, s := range segs {
		segs[i], _, _ = strings.Cut(s, ";")
	}
	return strings.ToLower(strings.TrimSuffix(path.Clean("/"+strings.Join(segs, "/")), "/"))
}

// plainPath reports whether u's path is in the form it names itself by:
// no percent-encoding, parameters or backslashes, no empty or dot
// segments, no trailing slash.
func plainPath(u *url.URL) bool {
	raw := u.EscapedPath()
	return raw != "" && raw != "/" && !strings.ContainsAny(raw, `%;\`) && path.Clean(raw) == raw
}

// freeCall lists the calls that generate nothing, which the CLIs (or
// their SDKs) make beside model calls: GET (and HEAD) of the model list
// and of one model (claude-code asks a gateway for /v1/models), counting
// a prompt's tokens (Anthropic's /v1/messages/count_tokens, OpenAI's
// /v1/responses/input_tokens).
func freeCall(method, p string) bool {
	switch method {
	case http.MethodGet, http.MethodHead:
		if strings.HasSuffix(p, "/models") {
			return true
		}
		dir, id := path.Split(p)
		return strings.HasSuffix(dir, "/models/") && modelID(id)
	case http.MethodPost:
		return strings.HasSuffix(p, "/messages/count_tokens") || strings.HasSuffix(p, "/responses/input_tokens")
	}
	return false
}

// modelID is a model's name as the APIs spell it (claude-sonnet-4-5,
// gpt-5.1); not Google's models/NAME:generateContent, which generates.
func modelID(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}
