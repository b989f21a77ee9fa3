package meter

import (
	"net/http"
	"net/url"
	"testing"
)

// TestClassify: every spelling of a model call's path that a server might
// take for one is metered; only plain paths of calls that generate nothing
// pass uncounted; everything else is unknown (refused with --max-tokens).
func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		method, target string
		api            API
		kind           Kind
	}{
		// The CLIs' own calls.
		{"POST", "/v1/messages?beta=true", Anthropic, Metered},
		{"POST", "/v1/responses", Responses, Metered},
		{"POST", "/v1/chat/completions", Chat, Metered},
		{"POST", "/api/v1/chat/completions", Chat, Metered}, // a gateway's prefix
		{"POST", "/v1/responses/compact", Responses, Metered},
		{"POST", "/v1/completions", Chat, Metered},
		// Spellings of a model call.
		{"POST", "/v1/messages/", Anthropic, Metered},
		{"POST", "/v1/messages;x=1", Anthropic, Metered},
		{"POST", "/v1/messages/;x", Anthropic, Metered},
		{"POST", "//v1//messages", Anthropic, Metered},
		{"POST", "/v1/%6Dessages", Anthropic, Metered},
		{"POST", "/v1/%256Dessages", Anthropic, Metered},
		{"POST", "/v1%2Fmessages", Anthropic, Metered},
		{"POST", `/v1\messages`, Anthropic, Metered},
		{"POST", "/V1/Messages", Anthropic, Metered},
		{"POST", "/v1/chat/Completions/", Chat, Metered},
		{"POST", "/v1/messages/count_tokens/..", Anthropic, Metered},
		{"POST", "/v1/messages/./", Anthropic, Metered},
		{"post", "/v1/messages", Anthropic, Metered},
		// Calls that generate nothing, in plain form only.
		{"GET", "/v1/models", "", Free},
		{"GET", "/v1/models?limit=1000", "", Free},
		{"HEAD", "/v1/models", "", Free},
		{"GET", "/v1/models/claude-sonnet-4-5", "", Free},
		{"GET", "/v1/models/gpt-5.1", "", Free},
		{"POST", "/v1/messages/count_tokens?beta=true", "", Free},
		{"POST", "/v1/responses/input_tokens", "", Free},
		{"GET", "/v1/models/", "", Unknown},
		{"GET", "/v1/%6Dodels", "", Unknown},
		{"GET", "/v1/models;x", "", Unknown},
		{"GET", "/v1/x/../models", "", Unknown},
		{"POST", "/v1/messages/count_tokens/", "", Unknown},
		{"POST", "/v1/messages;/count_tokens", "", Unknown},
		{"GET", "/v1beta/models/gemini-2.5-pro:generateContent", "", Unknown},
		{"POST", "/v1/models", "", Unknown},
		// Calls the meter cannot count.
		{"POST", "/v1/messages/batches", "", Unknown},
		{"GET", "/v1/messages/batches/msgbatch_1/results", "", Unknown},
		{"POST", "/v1/batches", "", Unknown},
		{"GET", "/v1/responses/resp_1", "", Unknown},
		{"POST", "/v1/responses/resp_1/cancel", "", Unknown},
		{"GET", "/v1/messages", "", Unknown},
		{"PUT", "/v1/messages", "", Unknown},
		{"POST", "/v1/complete", "", Unknown},
		{"POST", "/v1beta/models/gemini-2.5-pro:generateContent", "", Unknown},
		{"POST", "/v1/files", "", Unknown},
		{"GET", "/", "", Unknown},
		{"OPTIONS", "*", "", Unknown},
	} {
		u, err := url.ParseRequestURI(tt.target)
		if err != nil {
			t.Fatalf("%s: %v", tt.target, err)
		}
		if api, kind := Classify(tt.method, u); api != tt.api || kind != tt.kind {
			t.Errorf("%s %s: %q %v, want %q %v", tt.method, tt.target, api, kind, tt.api, tt.kind)
		}
	}
	// What the proxy's server makes of a request line.
	r, _ := http.NewRequest("POST", "http://api.test/v1/messages%3Bx", nil)
	if _, kind := Classify(r.Method, r.URL); kind != Metered {
		t.Errorf("an encoded ;parameter: %v", kind)
	}
}
