package gitworkspace

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/events"
)

func TestFetchScope(t *testing.T) {
	r, err := parseRemote("https://git.example.com/team/app.git", false)
	if err != nil {
		t.Fatal(err)
	}
	c := &Checkout{remote: r, spec: Spec{Token: testToken, Auth: Auth{User: DefaultBasicUser}}}
	for _, hostAllowed := range []bool{false, true} {
		f := NewFetchScope(c, nil, nil, hostAllowed)
		standIn := "Basic " + base64.StdEncoding.EncodeToString([]byte(DefaultBasicUser+":"+f.standIn))
		for _, tt := range []struct {
			name, method, target, auth string
			reason                     string // "" = passes
			token                      bool   // the real token goes upstream
		}{
			{"refs of a fetch", "GET", "/team/app.git/info/refs?service=git-upload-pack", standIn, "", true},
			{"a fetch without .git", "POST", "/team/app/git-upload-pack", "", "", true},
			{"refs of a push", "GET", "/team/app.git/info/refs?service=git-receive-pack", standIn, events.ReasonGitPush, false},
			{"a push", "POST", "/team/app.git/git-receive-pack", "", events.ReasonGitPush, false},
			{"another repository with the stand-in", "GET", "/team/other.git/info/refs?service=git-upload-pack", standIn, events.ReasonGitScope, false},
			{"the API with the stand-in", "GET", "/api/v3/user", "Bearer " + f.standIn, events.ReasonGitScope, false},
			{"a prefix of the repository's path", "POST", "/team/app-secrets.git/git-upload-pack", standIn, events.ReasonGitScope, false},
			{"dot segments", "POST", "/team/other/../app.git/git-upload-pack", standIn, events.ReasonGitScope, false},
			{"a GET of upload-pack", "GET", "/team/app.git/git-upload-pack", standIn, events.ReasonGitScope, false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				req := httptest.NewRequest(tt.method, "https://git.example.com"+tt.target, nil)
				if tt.auth != "" {
					req.Header.Set("Authorization", tt.auth)
				}
				ref := f.Request("git.example.com", 443, req)
				switch {
				case tt.reason != "" && (ref == nil || ref.Reason != tt.reason):
					t.Errorf("refusal %+v, want %s", ref, tt.reason)
				case tt.reason == "" && ref != nil:
					t.Errorf("refused %+v", ref)
				}
				if got := strings.Contains(req.Header.Get("Authorization"), base64.StdEncoding.EncodeToString([]byte(DefaultBasicUser+":"+testToken))); got != tt.token {
					t.Errorf("the real token upstream: %v, want %v", got, tt.token)
				}
			})
		}
		// Without the stand-in, another path passes only where the policy
		// allows the host anyway.
		req := httptest.NewRequest("GET", "https://git.example.com/explore", nil)
		if ref := f.Request("git.example.com", 443, req); (ref == nil) != hostAllowed {
			t.Errorf("hostAllowed %v: a page of the host: %+v", hostAllowed, ref)
		}
	}
	// The token never reaches the agent in an answer.
	f := NewFetchScope(c, nil, nil, false)
	req := httptest.NewRequest("GET", "https://git.example.com/team/app.git/info/refs?service=git-upload-pack", nil)
	f.Request("git.example.com", 443, req)
	resp := &http.Response{Header: http.Header{"X-Echo": {req.Header.Get("Authorization")}, "X-" + testToken: {"1"}},
		Body: io.NopCloser(strings.NewReader("echo " + testToken + " and " + req.Header.Get("Authorization")))}
	if ref := f.Response("git.example.com", 443, req, resp); ref != nil {
		t.Fatal(ref)
	}
	body, _ := io.ReadAll(resp.Body)
	all := string(body) + resp.Header.Get("X-Echo")
	for k := range resp.Header {
		all += k
	}
	if strings.Contains(all, testToken) || strings.Contains(all, base64.StdEncoding.EncodeToString([]byte(DefaultBasicUser+":"+testToken))) {
		t.Errorf("the answer carries the token: %q", all)
	}
	if text := f.RedactText("git.example.com", 443, req, "error: "+testToken); strings.Contains(text, testToken) {
		t.Errorf("RedactText: %q", text)
	}
}
