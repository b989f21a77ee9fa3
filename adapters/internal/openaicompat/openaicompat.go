// Package openaicompat reads the settings of a runtime that talks to an
// OpenAI-compatible model API (codex, pi) from the run's environment. The
// CLIs take the endpoint only from their config files, which the adapters
// write for every run; the API key stays in the environment, and the
// config names the variable that holds it.
package openaicompat

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"

	"github.com/agentrun-dev/agentrun/adapters"
)

// The variables the settings come from, with their defaults.
const (
	// BaseURLEnv holds the API's base URL, for example
	// http://gateway.local:8080/v1; the default is OpenAI's.
	BaseURLEnv     = "OPENAI_BASE_URL"
	DefaultBaseURL = "https://api.openai.com/v1"
	// KeyNameEnv holds the name of the variable that holds the API key.
	KeyNameEnv    = "AGENTRUN_API_KEY_ENV"
	DefaultKeyEnv = "OPENAI_API_KEY"
	// RetriesEnv caps how often the CLI retries a failed model request;
	// unset keeps the CLI's own policy.
	RetriesEnv = "AGENTRUN_MODEL_RETRIES"
)

// Provider is where and how the CLI reaches the model.
type Provider struct {
	BaseURL string
	KeyEnv  string
	Retries *int // nil: the CLI's default
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Defaults are the variable of the base URL and the defaults of a
// runtime whose API is not OpenAI's own (dsh: DEEPSEEK_BASE_URL,
// https://api.deepseek.com, DEEPSEEK_API_KEY).
type Defaults struct {
	BaseURLEnv, BaseURL, KeyEnv string
}

// OpenAI are the defaults of FromSpec.
var OpenAI = Defaults{BaseURLEnv: BaseURLEnv, BaseURL: DefaultBaseURL, KeyEnv: DefaultKeyEnv}

// FromSpec reads the settings from spec.Env. Its errors say how to fix the
// variable; adapters return them from Launch (the run is rejected).
func FromSpec(spec adapters.LaunchSpec) (Provider, error) { return FromSpecWith(spec, OpenAI) }

// FromSpecWith is FromSpec with another base URL variable and other
// defaults; AGENTRUN_API_KEY_ENV and AGENTRUN_MODEL_RETRIES are the same.
func FromSpecWith(spec adapters.LaunchSpec, d Defaults) (Provider, error) {
	p := Provider{BaseURL: d.BaseURL, KeyEnv: d.KeyEnv}
	if v := spec.Env[d.BaseURLEnv]; v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return p, fmt.Errorf("%s=%q is not an http or https URL; pass the API's base URL, for example --env %s=%s", d.BaseURLEnv, v, d.BaseURLEnv, d.BaseURL)
		}
		p.BaseURL = v
	}
	if v := spec.Env[KeyNameEnv]; v != "" {
		if !envName.MatchString(v) {
			return p, fmt.Errorf("%s=%q is not a variable name; pass the name of the variable that holds the API key, for example --env %s=%s", KeyNameEnv, v, KeyNameEnv, d.KeyEnv)
		}
		p.KeyEnv = v
	}
	if v := spec.Env[RetriesEnv]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return p, fmt.Errorf("%s=%q is not a number of retries; pass 0 or more, for example --env %s=1", RetriesEnv, v, RetriesEnv)
		}
		p.Retries = &n
	}
	return p, nil
}
