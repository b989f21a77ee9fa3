package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// The server acts with the user's credentials, so every request must
// come from the page the user opened, in their browser, and nothing
// else: not another site the browser visits (cross-site requests,
// forged forms), not a name that a DNS rebinding points at 127.0.0.1,
// not another user of the machine who finds the port. guard checks, on
// every request, the assets and the event streams included:
//
//   - Host is the address the server listens on (127.0.0.1:PORT,
//     localhost:PORT or [::1]:PORT): a rebound name sends its own Host;
//   - Origin, when the browser sends one, is that same origin, and
//     Sec-Fetch-Site says same-origin or none (the user typed or opened
//     the URL): a page of another site, or of another port of this
//     machine, is refused before anything is read;
//   - the token: a random secret made at each start, in the URL printed
//     at start, then in a cookie (HttpOnly, SameSite=Strict, this port's
//     own name) that the first request sets;
//   - a POST (the stop button) carries the CSRF token of the page in a
//     header, which no form of another site can set, and an Origin.
//
// Every answer carries a Content-Security-Policy that allows the page's
// own script and style only (no inline script, no other origin), and
// may not be framed.
type guard struct {
	hosts  map[string]bool
	origin map[string]bool
	token  string
	csrf   string
	cookie string // the cookie's name, with the port in it
	next   http.Handler
}

// contentSecurityPolicy allows the page's own files and nothing else:
// no inline script or style, no eval, no other origin, no plugins, no
// framing, forms only to itself.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// newSecret is 32 random bytes, URL-safe.
func newSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux, macOS or Windows
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// newGuard guards next for a server listening on addr (a loopback
// address and its port).
func newGuard(addr *net.TCPAddr, token, csrf string, next http.Handler) *guard {
	port := strconv.Itoa(addr.Port)
	g := &guard{hosts: map[string]bool{}, origin: map[string]bool{}, token: token, csrf: csrf,
		cookie: "agentrun-ui-" + port, next: next}
	names := []string{net.JoinHostPort(addr.IP.String(), port)}
	if addr.IP.IsLoopback() {
		// The loopback names a browser resolves itself (localhost is
		// never sent to DNS by Chromium or Firefox).
		names = append(names, net.JoinHostPort("localhost", port))
		if addr.IP.To4() != nil {
			names = append(names, net.JoinHostPort("127.0.0.1", port))
		} else {
			names = append(names, net.JoinHostPort("::1", port))
		}
	}
	for _, n := range names {
		g.hosts[n] = true
		g.origin["http://"+n] = true
	}
	return g
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if !g.hosts[strings.ToLower(r.Host)] {
		refuse(w, http.StatusMisdirectedRequest, "This server answers only at the address kubectl agentrun ui printed (Host "+r.Host+" is not it).")
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !g.origin[strings.ToLower(o)] {
		refuse(w, http.StatusForbidden, "Requests from another origin are refused.")
		return
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		refuse(w, http.StatusForbidden, "Requests from another site are refused ("+s+").")
		return
	}
	if q := r.URL.Query().Get("token"); q != "" && r.Method == http.MethodGet {
		if !g.same(q, g.token) {
			refuse(w, http.StatusUnauthorized, "That token is not this server's: use the URL kubectl agentrun ui printed at its last start.")
			return
		}
		// The token moves into the cookie, and out of the address bar
		// and the browser's history.
		http.SetCookie(w, &http.Cookie{Name: g.cookie, Value: g.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		u := *r.URL
		q := u.Query()
		q.Del("token")
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return
	}
	c, err := r.Cookie(g.cookie)
	if err != nil || !g.same(c.Value, g.token) {
		refuse(w, http.StatusUnauthorized, "Open the URL that kubectl agentrun ui printed: it carries this start's token.")
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		if r.Header.Get("Origin") == "" || !g.same(r.Header.Get("X-CSRF-Token"), g.csrf) {
			refuse(w, http.StatusForbidden, "This request does not come from the ui's page (no CSRF token).")
			return
		}
	default:
		refuse(w, http.StatusMethodNotAllowed, "Method not allowed.")
		return
	}
	g.next.ServeHTTP(w, r)
}

func (g *guard) same(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// refuse answers a refused request with plain text: nothing of the
// request is echoed but the Host, which is text here.
func refuse(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg + "\n"))
}
