package runner

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
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

// readEnvFile reads NAME=VALUE lines; blank lines and # comments are
// skipped, an "export " prefix and matching outer quotes are allowed.
func readEnvFile(path string) ([][2]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--env-file: %w", err)
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
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
