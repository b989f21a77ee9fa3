package codex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/adapters/internal/openaicompat"
)

// providerID names the model provider agentrun configures in config.toml.
const providerID = "agentrun"

// Launch builds the command docs/runtimes.md gives ("How agentrun starts
// each CLI"): `codex exec --json` with a private
// CODEX_HOME whose config.toml points codex at the model endpoint (see
// openaicompat for the variables), approval "never" and codex's own sandbox
// off inside agentrun's (`--sandbox danger-full-access`). The quiet flags
// keep it from trying GitHub, chatgpt.com and a metrics endpoint. The
// prompt goes in on stdin (`-`): no size limit of one argument, and never
// mistaken for a flag.
func (a *Adapter) Launch(spec adapters.LaunchSpec) (*adapters.Launch, error) {
	p, err := openaicompat.FromSpec(spec)
	if err != nil {
		return nil, err
	}
	home := filepath.Join(spec.StateDir, "codex")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("cannot create CODEX_HOME: %w", err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), config(p), 0o600); err != nil {
		return nil, fmt.Errorf("cannot write codex's config.toml: %w", err)
	}
	images, err := adapters.CopyImages(spec)
	if err != nil {
		return nil, err
	}
	a.model = spec.Model
	argv := []string{spec.Binary, "exec", "--json", "--skip-git-repo-check", "--ephemeral",
		"--sandbox", "danger-full-access",
		"-c", "analytics.enabled=false", "-c", "otel.metrics_exporter=none",
		"--disable", "plugins", "--disable", "apps"}
	if spec.NoSubagents {
		argv = append(argv, "--disable", "multi_agent")
	}
	if spec.Model != "" {
		argv = append(argv, "--model", spec.Model)
	}
	for _, img := range images {
		argv = append(argv, "--image", img)
	}
	// "--" ends --image's list of files; "-" reads the prompt from stdin.
	argv = append(argv, "--", "-")
	return &adapters.Launch{Argv: argv, Env: []string{"CODEX_HOME=" + home}, Stdin: []byte(spec.Prompt)}, nil
}

// config is the config.toml of one run.
func config(p openaicompat.Provider) []byte {
	var b bytes.Buffer
	b.WriteString("# Written by agentrun for one run.\n")
	fmt.Fprintf(&b, "model_provider = %s\napproval_policy = \"never\"\n\n", tomlString(providerID))
	fmt.Fprintf(&b, "[model_providers.%s]\nname = %s\nbase_url = %s\nenv_key = %s\nwire_api = \"responses\"\n",
		providerID, tomlString(providerID), tomlString(p.BaseURL), tomlString(p.KeyEnv))
	if p.Retries != nil {
		fmt.Fprintf(&b, "request_max_retries = %d\nstream_max_retries = %d\n", *p.Retries, *p.Retries)
	}
	return b.Bytes()
}

// tomlString quotes s as a TOML basic string: JSON's escapes are TOML's.
func tomlString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return string(bytes.TrimRight(b.Bytes(), "\n"))
}
