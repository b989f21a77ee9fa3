package runner

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/agentrun-dev/agentrun/internal/safefile"
	"github.com/agentrun-dev/agentrun/telemetry"
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseEnv checks one K=V assignment.
func parseEnv(kv string) (string, string, error) {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || !envName.MatchString(k) {
		return "", "", fmt.Errorf("--env %q is not NAME=VALUE with a name of letters, digits and _", kv)
	}
	return k, v, nil
}

// maxEnvFile bounds --env-file: a process's whole environment is limited
// to a few MB by execve anyway.
const maxEnvFile = 4 << 20

// readEnvFile reads NAME=VALUE lines; blank lines and # comments are
// skipped, an "export " prefix and matching outer quotes are allowed.
func readEnvFile(files safefile.Guard, path string) ([][2]string, error) {
	f, err := files.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--env-file: %w", err)
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(safefile.LimitReader(f, maxEnvFile))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || !envName.MatchString(k) {
			return nil, fmt.Errorf("--env-file %s line %d: expected NAME=VALUE", path, n)
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out = append(out, [2]string{k, v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--env-file %s: %w", path, err)
	}
	return out, nil
}

// neverPassed are agentrun's own and the cluster's variables, which a
// --pass-env pattern does not pick up: the sandbox sets its own base
// (PATH, HOME, ...), and Kubernetes service variables describe the cluster
// the agent is kept away from.
func neverPassed(name string) bool {
	switch name {
	case "PATH", "HOME", "LANG", "TERM", "TMPDIR", "HOSTNAME", "PWD", "SHLVL", "_":
		return true
	}
	// The telemetry variables configure agentrun's own exporter, which the
	// agent must not see (it could send its own spans into the trace).
	return strings.HasPrefix(name, "AGENTRUN_") || strings.HasPrefix(name, "KUBERNETES_") || telemetry.IsTelemetryVar(name)
}

// passedEnv resolves --pass-env NAME and PREFIX* against agentrun's own
// environment. A NAME that is not set passes nothing (an optional Secret
// key); a pattern passes the matching variables in name order.
func passedEnv(patterns []string) ([][2]string, error) {
	var out [][2]string
	for _, pat := range patterns {
		prefix, glob := strings.CutSuffix(pat, "*")
		if (prefix != "" && !envName.MatchString(prefix)) || (!glob && prefix == "") {
			return nil, reject("--pass-env %q: give a variable NAME or a PREFIX*", pat)
		}
		if !glob && telemetry.IsTelemetryVar(pat) {
			return nil, reject("--pass-env %s: OTEL_*, TRACEPARENT and TRACESTATE configure agentrun's own telemetry and never reach the agent; to let the agent's CLI export on its own, set the variable with --env NAME=VALUE", pat)
		}
		if !glob {
			if v, ok := os.LookupEnv(pat); ok {
				out = append(out, [2]string{pat, v})
			}
			continue
		}
		var names []string
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			if strings.HasPrefix(k, prefix) && !neverPassed(k) {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			out = append(out, [2]string{k, os.Getenv(k)})
		}
	}
	return out, nil
}
