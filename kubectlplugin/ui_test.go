package kubectlplugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestUIUsageErrors: the ui's command line is checked before anything
// connects: a non-loopback address, a port out of range and arguments
// are usage errors.
func TestUIUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ui", "--address", "0.0.0.0"}, `--address "0.0.0.0": use a loopback address`},
		{[]string{"ui", "--address", "192.168.1.5"}, "use a loopback address"},
		{[]string{"ui", "--port", "70000"}, "--port 70000: use 0 (any free port) to 65535"},
		{[]string{"ui", "runs"}, `unexpected argument "runs": ui takes only flags`},
	} {
		var out, errOut bytes.Buffer
		code := Env{Stdout: &out, Stderr: &errOut}.Main(context.Background(), c.args)
		if code != exitUsage || !strings.Contains(errOut.String(), c.want) || out.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, errOut.String())
		}
	}
}
