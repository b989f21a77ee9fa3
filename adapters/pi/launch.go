package pi

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/internal/openaicompat"
)

// providerID names the model provider agentrun configures in models.json.
const providerID = "agentrun"

// CostEnv holds the model's prices in USD per million tokens, for pi's own
// cost: "input=1.25,output=10,cache_read=0.125,cache_write=0" (missing
// keys are 0). Unset, pi knows no prices for the configured model and
// reports a cost of 0.
const CostEnv = "AGENTRUN_PI_COST"

// Launch builds the command docs/runtimes.md gives ("How agentrun starts
// each CLI"): `pi -p --mode json` with a private
// PI_CODING_AGENT_DIR whose models.json defines one provider on the OpenAI
// Chat Completions API (endpoint and key variable from openaicompat) with
// the --model model, and pi's network extras off. The prompt goes in on
// stdin, which pi reads as the first message (an argument starting with
// "-" or "@" would be taken for a flag or a file); images follow as @FILE
// arguments.
func (a *Adapter) Launch(spec adapters.LaunchSpec) (*adapters.Launch, error) {
	if spec.Model == "" {
		return nil, errors.New("--model is required for pi: pass the id of the model the endpoint serves, for example --model gpt-5")
	}
	p, err := openaicompat.FromSpec(spec)
	if err != nil {
		return nil, err
	}
	cost, err := parseCost(spec.Env[CostEnv])
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(spec.StateDir, "pi")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create PI_CODING_AGENT_DIR: %w", err)
	}
	model := map[string]any{"id": spec.Model}
	if cost != nil {
		model["cost"] = cost
	}
	if len(spec.Images) > 0 {
		// pi replaces the images of a text-only model with a placeholder.
		model["input"] = []string{"text", "image"}
	}
	models := map[string]any{"providers": map[string]any{providerID: map[string]any{
		"baseUrl": p.BaseURL, "api": "openai-completions", "apiKey": p.KeyEnv, "models": []any{model}}}}
	if err := writeJSON(filepath.Join(dir, "models.json"), models); err != nil {
		return nil, err
	}
	if p.Retries != nil {
		// pi retries a failed call itself (retry.maxRetries) around the
		// OpenAI SDK's own retries (retry.provider.maxRetries): the SDK's
		// are turned off so that the cap is the number of calls.
		retry := map[string]any{"enabled": *p.Retries > 0, "maxRetries": *p.Retries, "provider": map[string]any{"maxRetries": 0}}
		if err := writeJSON(filepath.Join(dir, "settings.json"), map[string]any{"retry": retry}); err != nil {
			return nil, err
		}
	}
	images, err := adapters.CopyImages(spec)
	if err != nil {
		return nil, err
	}
	a.images = spec.Images
	argv := []string{spec.Binary, "-p", "--mode", "json", "--provider", providerID, "--model", spec.Model,
		"--no-session", "--offline"}
	for _, img := range images {
		argv = append(argv, "@"+img)
	}
	env := []string{"PI_CODING_AGENT_DIR=" + dir, "PI_OFFLINE=1", "PI_TELEMETRY=0", "PI_SKIP_VERSION_CHECK=1"}
	return &adapters.Launch{Argv: argv, Env: env, Stdin: []byte(spec.Prompt), EchoesPrompt: true}, nil
}

// parseCost reads CostEnv into models.json's cost object; nil when unset.
func parseCost(v string) (map[string]float64, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	keys := map[string]string{"input": "input", "output": "output", "cache_read": "cacheRead", "cache_write": "cacheWrite"}
	cost := map[string]float64{"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
	for _, part := range strings.Split(v, ",") {
		k, num, ok := strings.Cut(strings.TrimSpace(part), "=")
		f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		field, known := keys[strings.TrimSpace(k)]
		if !ok || !known || err != nil || f < 0 {
			return nil, fmt.Errorf("%s=%q: expected input=USD,output=USD,cache_read=USD,cache_write=USD per million tokens, for example --env %s=input=1.25,output=10,cache_read=0.125", CostEnv, v, CostEnv)
		}
		cost[field] = f
	}
	return cost, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("cannot write pi's %s: %w", filepath.Base(path), err)
	}
	return nil
}
