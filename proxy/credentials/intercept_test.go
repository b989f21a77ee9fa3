package credentials

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/proxy"
)

// TestInterceptorRefusesUnmetered: with RefuseUnmetered (--max-tokens) a
// request the meter cannot count is refused before it goes upstream, 403
// unmetered, and gets no real value; model calls of any spelling and the
// free calls pass. Without it nothing is refused.
func TestInterceptorRefusesUnmetered(t *testing.T) {
	for _, tt := range []struct {
		call    string
		refused bool
	}{
		{"POST /v1/messages?beta=true", false},
		{"POST /v1/messages/", false},
		{"POST /v1/responses", false},
		{"POST /v1/chat/completions", false},
		{"GET /v1/models?limit=1000", false},
		{"POST /v1/messages/count_tokens", false},
		{"POST /v1/messages/batches", true},
		{"GET /v1/messages/batches/msgbatch_1/results", true},
		{"GET /v1/responses/resp_1", true},
		{"POST /v1/batches", true},
		{"DELETE /v1/messages", true},
	} {
		for _, refuse := range []bool{true, false} {
			i, c, _ := testInterceptor(t)
			i.RefuseUnmetered = refuse
			method, target, _ := strings.Cut(tt.call, " ")
			r, _ := http.NewRequest(method, "https://api.test"+target, nil)
			r.Header.Set("X-Api-Key", c.StandIn)
			ref := i.Request("api.test", 443, r)
			if want := refuse && tt.refused; (ref != nil) != want {
				t.Errorf("%s (refuse unmetered %v): refusal %+v, want one: %v", tt.call, refuse, ref, want)
				continue
			}
			if ref == nil {
				continue
			}
			if ref.Reason != proxy.ReasonUnmetered || ref.Status != http.StatusForbidden || ref.Quiet ||
				!strings.Contains(ref.Detail, "--max-tokens") || !strings.Contains(ref.Detail, method) {
				t.Errorf("%s: refusal %+v", tt.call, ref)
			}
			if strings.Contains(r.Header.Get("X-Api-Key"), real) {
				t.Errorf("%s: a refused request got the real value", tt.call)
			}
		}
	}
	// After the spend limit, every request is refused, quietly, 429.
	i, _, _ := testInterceptor(t)
	i.Refuse("token_limit: --max-tokens 10 reached")
	if ref := i.Request("api.test", 443, modelCall()); ref == nil || ref.Status != http.StatusTooManyRequests || !ref.Quiet ||
		ref.Detail != "token_limit: --max-tokens 10 reached" {
		t.Errorf("after Refuse: %+v", ref)
	}
}

// TestInterceptorDropsMethodOverrides: the meter judges a call by its
// method, so no header may make a server take it for another one (a GET
// of the model list for a POST).
func TestInterceptorDropsMethodOverrides(t *testing.T) {
	i, _, _ := testInterceptor(t)
	i.RefuseUnmetered = true
	r, _ := http.NewRequest("GET", "https://api.test/v1/models", nil)
	for _, h := range []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"} {
		r.Header.Set(h, "POST")
	}
	if ref := i.Request("api.test", 443, r); ref != nil {
		t.Fatal(ref)
	}
	if len(r.Header) != 1 || r.Header.Get("Accept-Encoding") != "identity" {
		t.Errorf("headers upstream: %v", r.Header)
	}
}
