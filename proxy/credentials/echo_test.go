package credentials

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"
)

// echoCreds is one credential for echo.test:443.
func echoCreds(t *testing.T) (*Interceptor, *Credential) {
	t.Helper()
	c, err := Parse("KEY=echo.test:443", lookup(map[string]string{"KEY": real}))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := NewSet([]*Credential{c})
	return &Interceptor{Set: set}, c
}

// echo answers r as an upstream that echoes a request's headers would: in
// a header of its own and in the body.
func echo(r *http.Request) *http.Response {
	var b strings.Builder
	h := http.Header{}
	for k, vs := range r.Header {
		for _, v := range vs {
			b.WriteString(k + ": " + v + "\n")
			h.Add("X-Echo-"+k, v)
		}
	}
	return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(iotest.OneByteReader(strings.NewReader(b.String())))}
}

// TestInjectOnlyIntoAuthHeaders: the real value goes into the headers the
// model APIs authenticate with, and nowhere else; the stand-in in any
// other header reaches the upstream as the stand-in.
func TestInjectOnlyIntoAuthHeaders(t *testing.T) {
	icpt, c := echoCreds(t)
	r, _ := http.NewRequest("POST", "https://echo.test/v1/messages", nil)
	for _, k := range []string{"X-Api-Key", "Api-Key", "X-Goog-Api-Key"} {
		r.Header.Set(k, c.StandIn)
	}
	r.Header.Set("Authorization", "Bearer "+c.StandIn)
	r.Header.Set("X-Other", c.StandIn)
	r.Header.Set("Cookie", "k="+c.StandIn)
	r.Header.Set("Anthropic-Beta", c.StandIn)
	if ref := icpt.Request("echo.test", 443, r); ref != nil {
		t.Fatalf("refused: %+v", ref)
	}
	for _, k := range []string{"X-Api-Key", "Api-Key", "X-Goog-Api-Key"} {
		if r.Header.Get(k) != real {
			t.Errorf("%s: %q, want the real value", k, r.Header.Get(k))
		}
	}
	if r.Header.Get("Authorization") != "Bearer "+real {
		t.Errorf("Authorization: %q", r.Header.Get("Authorization"))
	}
	for _, k := range []string{"X-Other", "Cookie", "Anthropic-Beta"} {
		if v := r.Header.Get(k); strings.Contains(v, real) || !strings.Contains(v, c.StandIn) {
			t.Errorf("%s: %q, want the stand-in", k, v)
		}
	}
}

// TestEchoOfBasicIsScrubbed: the proxy re-encodes Authorization: Basic
// with the real value inside; an upstream that echoes that header must
// not hand the encoded value back, in a header or in the body, whatever
// the user part shifts the value's alignment to.
func TestEchoOfBasicIsScrubbed(t *testing.T) {
	icpt, c := echoCreds(t)
	for _, user := range []string{"u", "uu", "uuu"} {
		agent := base64.StdEncoding.EncodeToString([]byte(user + ":" + c.StandIn))
		injected := base64.StdEncoding.EncodeToString([]byte(user + ":" + real))
		r, _ := http.NewRequest("GET", "https://echo.test/echo", nil)
		r.Header.Set("Authorization", "Basic "+agent)
		icpt.Request("echo.test", 443, r)
		if r.Header.Get("Authorization") != "Basic "+injected {
			t.Fatalf("Basic was not injected: %q", r.Header.Get("Authorization"))
		}
		resp := echo(r)
		if ref := icpt.Response("echo.test", 443, r, resp); ref != nil {
			t.Fatalf("refused: %+v", ref)
		}
		b, _ := io.ReadAll(resp.Body)
		got := string(b) + " " + resp.Header.Get("X-Echo-Authorization")
		unpadded := strings.TrimRight(injected, "=")
		if strings.Contains(got, real) || strings.Contains(got, unpadded) {
			t.Errorf("user %q: the encoded real value came back: %s", user, got)
		}
		if !strings.Contains(string(b), "Authorization: Basic "+agent) || resp.Header.Get("X-Echo-Authorization") != "Basic "+agent {
			t.Errorf("user %q: the echo should show the agent's own value: %s", user, got)
		}
	}
}

// TestRangeIsDropped: an upstream that echoes headers would hand out the
// real value in pieces, none of which is the whole value, to a request
// for byte ranges; the proxy asks for whole answers.
func TestRangeIsDropped(t *testing.T) {
	icpt, c := echoCreds(t)
	r, _ := http.NewRequest("GET", "https://echo.test/echo", nil)
	r.Header.Set("X-Api-Key", c.StandIn)
	r.Header.Set("Range", "bytes=10-19")
	r.Header.Set("If-Range", `"x"`)
	icpt.Request("echo.test", 443, r)
	if r.Header.Get("Range") != "" || r.Header.Get("If-Range") != "" {
		t.Errorf("Range went upstream: %v", r.Header)
	}
}

// TestScrubBodyHoldsAPrefixAtTheEnd: a body that ends with the start of
// the real value (an echo cut short) gives the start of the stand-in
// instead, never the held bytes.
func TestScrubBodyHoldsAPrefixAtTheEnd(t *testing.T) {
	_, c := echoCreds(t)
	for _, n := range []int{1, 5, len(real) - 1} {
		body := "data: echo " + real[:n]
		for _, name := range []string{"whole", "one byte at a time"} {
			var r io.Reader = strings.NewReader(body)
			if name != "whole" {
				r = iotest.OneByteReader(r)
			}
			got, err := io.ReadAll(ScrubBody(io.NopCloser(r), SecretsOf(nil, []*Credential{c})))
			if want := "data: echo " + c.StandIn[:n]; err != nil || string(got) != want {
				t.Errorf("%d bytes, %s: %q, want %q (%v)", n, name, got, want, err)
			}
		}
	}
}

// TestEchoWithEscapedSlashes: an echo in JSON whose encoder escapes
// slashes (\/) does not hide the Basic value the proxy made: the base64
// alphabet has a slash.
func TestEchoWithEscapedSlashes(t *testing.T) {
	icpt, c := echoCreds(t)
	const user = "???" // encodes as Pz8/
	r, _ := http.NewRequest("GET", "https://echo.test/echo", nil)
	r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+c.StandIn)))
	icpt.Request("echo.test", 443, r)
	escaped := strings.ReplaceAll(r.Header.Get("Authorization"), "/", `\/`)
	resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"authorization":"` + escaped + `"}`))}
	icpt.Response("echo.test", 443, r, resp)
	b, _ := io.ReadAll(resp.Body)
	injected := strings.TrimPrefix(escaped, "Basic ")
	if strings.Contains(string(b), injected[:len(injected)-4]) {
		t.Errorf("the escaped Basic value came back: %s", b)
	}
}

// TestEncodedFormsAreScrubbed: an upstream that hands the value back
// percent-encoded (a redirect's Location) or base64-encoded on its own
// does not hand out the real value: each form becomes the same form of
// the stand-in.
func TestEncodedFormsAreScrubbed(t *testing.T) {
	const value = "sk-real+key/with=signs~0123"
	c, err := Parse("KEY=api.test:443", func(string) (string, bool) { return value, true })
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string]func(string) string{
		"query": url.QueryEscape,
		"query, lower-case hex": func(s string) string {
			return regexp.MustCompile(`%[0-9A-F]{2}`).ReplaceAllStringFunc(url.QueryEscape(s), strings.ToLower)
		},
		"path":       url.PathEscape,
		"base64":     func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
		"base64 raw": func(s string) string { return base64.RawStdEncoding.EncodeToString([]byte(s)) },
		"base64 url": func(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) },
	}
	for name, form := range forms {
		body := "Location: https://evil.test/?k=" + form(value) + "&x=1"
		got, err := io.ReadAll(ScrubBody(io.NopCloser(iotest.OneByteReader(strings.NewReader(body))), SecretsOf(nil, []*Credential{c})))
		if err != nil || strings.Contains(string(got), form(value)) || !strings.Contains(string(got), form(c.StandIn)) {
			t.Errorf("%s: %q (%v)", name, got, err)
		}
		h := http.Header{"Location": {body}}
		Scrub(h, SecretsOf(nil, []*Credential{c}))
		if strings.Contains(h.Get("Location"), form(value)) {
			t.Errorf("%s in a header: %q", name, h.Get("Location"))
		}
	}
}

// TestScrubDropsHeadersNamedWithTheKey: Go writes header names in
// canonical case, so a key in a name cannot be matched as sent nor swapped
// for the stand-in: the header goes, whatever the case, and the others
// stay.
func TestScrubDropsHeadersNamedWithTheKey(t *testing.T) {
	_, c := echoCreds(t)
	h := http.Header{}
	h.Set(real, "x")                        // Sk-Real-0123456789
	h.Set("X-"+real+"-Echo", "y")           // inside a longer name
	h["sk-real-0123456789"] = []string{"z"} // as it was sent
	h.Set("Content-Type", "text/plain")
	Scrub(h, SecretsOf(nil, []*Credential{c}))
	if len(h) != 1 || h.Get("Content-Type") != "text/plain" {
		t.Errorf("headers after Scrub: %v", h)
	}
}
