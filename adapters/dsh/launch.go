package dsh

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/internal/openaicompat"
)

// The endpoint settings: dsh's own variable and defaults (its
// "deepseek-official" provider, OpenAI Chat Completions).
var provider = openaicompat.Defaults{BaseURLEnv: "DEEPSEEK_BASE_URL", BaseURL: "https://api.deepseek.com", KeyEnv: "DEEPSEEK_API_KEY"}

// providerRoute is dsh's provider for the DeepSeek API, the one agentrun
// configures.
const providerRoute = "deepseek-official"

// stream is the plugin agentrun adds to dsh's headless profile: it reads
// the task from stdin and writes dsh's session events to stdout (see the
// file).
//
//go:embed stream.mjs
var stream []byte

// subagentTools are the plugin rows (ids of dsh-base's tree) whose tools
// start or drive subagents: --no-subagents disables them.
var subagentTools = []string{"tool-subagent", "tool-subagent-fork", "tool-subagent-control",
	"tool-subagent-list-agents", "tool-subagent-report", "tool-workflow", "tool-ralph"}

// Launch builds `dsh --profile headless --patch FILE` with a private
// DSH_HOME in the state directory. The patch (written as JSON, which YAML
// reads) points dsh's DeepSeek provider at the endpoint with the key
// variable and retry cap of openaicompat (DEEPSEEK_BASE_URL and
// DEEPSEEK_API_KEY by default), selects the --model model, turns the
// session-title model call off, and replaces the command-line task reader
// with agentrun's plugin, which takes the prompt from stdin and streams
// the session's events as JSON lines. HMR is switched on because the
// 0.1.0-rc.8 launcher needs it to watch the profile's patch layer and
// otherwise fails (docs/dsh.md). DSH_PERMISSION_MODE=danger-full-access
// turns dsh's own sandbox and approval prompts off inside agentrun's.
func (a *Adapter) Launch(spec adapters.LaunchSpec) (*adapters.Launch, error) {
	if len(spec.Images) > 0 {
		return nil, errors.New("dsh's headless mode takes no images: run without --image")
	}
	p, err := openaicompat.FromSpecWith(spec, provider)
	if err != nil {
		return nil, err
	}
	home := filepath.Join(spec.StateDir, "dsh")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create DSH_HOME: %w", err)
	}
	plugin := filepath.Join(home, "agentrun-stream.mjs")
	if err := os.WriteFile(plugin, stream, 0o600); err != nil {
		return nil, fmt.Errorf("cannot write dsh's plugin: %w", err)
	}
	data, err := json.MarshalIndent(patch(p, spec, plugin), "", "  ")
	if err != nil {
		return nil, err
	}
	patchFile := filepath.Join(home, "agentrun.patch.yml")
	if err := os.WriteFile(patchFile, append(data, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("cannot write dsh's patch: %w", err)
	}
	a.Replay(spec)
	argv := []string{spec.Binary, "--profile", "headless", "--patch", patchFile}
	env := []string{"DSH_HOME=" + home, "DSH_PERMISSION_MODE=danger-full-access", "DSH_TELEMETRY_DISABLED=1",
		// dsh calls the API with Node's fetch, which takes the sandbox's
		// proxy from the environment only when asked to.
		"NODE_USE_ENV_PROXY=1"}
	return &adapters.Launch{Argv: argv, Env: env, Stdin: []byte(spec.Prompt), EchoesPrompt: true}, nil
}

// Replay keeps the --model value, the model of usage that names none.
func (a *Adapter) Replay(spec adapters.LaunchSpec) { a.flagModel = spec.Model }

// patch is dsh's patch list for one run (cordis-plugin-include's entries:
// id-targeted overrides, disables and an insert).
func patch(p openaicompat.Provider, spec adapters.LaunchSpec, plugin string) []map[string]any {
	llm := map[string]any{"baseURL": p.BaseURL, "apiKeyEnv": p.KeyEnv}
	if p.Retries != nil {
		llm["retryPolicy"] = map[string]any{"mode": "normal", "maxRetries": *p.Retries}
	}
	out := []map[string]any{
		{"id": "hmr", "disabled": false, "config": map[string]any{"root": []string{}}},
		{"id": "llm-deepseek", "config": llm},
		{"id": "session-title-llm", "disabled": true},
		{"id": "headless-startup", "disabled": true},
	}
	if spec.Model != "" {
		out = append(out, map[string]any{"id": "agent-default-model", "config": map[string]any{"provider": providerRoute, "model": spec.Model}})
	}
	if spec.NoSubagents {
		for _, id := range subagentTools {
			out = append(out, map[string]any{"id": id, "disabled": true})
		}
	}
	// A file URL: dsh's loader resolves the name as a URL, where a path's
	// "#", "%" or "?" would mean something else.
	u := url.URL{Scheme: "file", Path: plugin}
	return append(out, map[string]any{"insert": []any{map[string]any{"id": "agentrun-stream", "name": u.String()}}})
}
