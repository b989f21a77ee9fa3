package sandbox

import (
	"slices"
	"testing"

	"github.com/agentrun-dev/agentrun/sandbox/initproc"
)

// TestLoaderVariablesSkipBubblewrap: the variables the dynamic loader acts
// on reach bubblewrap and the init renamed, and the agent under their own
// names; the others pass as they are.
func TestLoaderVariablesSkipBubblewrap(t *testing.T) {
	env := []string{"PATH=/usr/bin", "LD_PRELOAD=/workspace/x.so", "LD_LIBRARY_PATH=/workspace", "GLIBC_TUNABLES=glibc.malloc.x=1",
		"GCONV_PATH=/workspace/gconv", "MALLOC_TRACE=/etc/x", "HOME=/h", "OLD_LD_PRELOAD=kept"}
	held := holdLoaderEnv(env)
	want := []string{"PATH=/usr/bin", "AGENTRUN_SANDBOX_ENV_LD_PRELOAD=/workspace/x.so", "AGENTRUN_SANDBOX_ENV_LD_LIBRARY_PATH=/workspace",
		"AGENTRUN_SANDBOX_ENV_GLIBC_TUNABLES=glibc.malloc.x=1", "AGENTRUN_SANDBOX_ENV_GCONV_PATH=/workspace/gconv",
		"AGENTRUN_SANDBOX_ENV_MALLOC_TRACE=/etc/x", "HOME=/h", "OLD_LD_PRELOAD=kept"}
	if !slices.Equal(held, want) {
		t.Errorf("held:\n%q\nwant\n%q", held, want)
	}
	if got := initproc.AgentEnv(held); !slices.Equal(got, []string{"PATH=/usr/bin", "HOME=/h", "OLD_LD_PRELOAD=kept", "LD_PRELOAD=/workspace/x.so",
		"LD_LIBRARY_PATH=/workspace", "GLIBC_TUNABLES=glibc.malloc.x=1", "GCONV_PATH=/workspace/gconv", "MALLOC_TRACE=/etc/x"}) {
		t.Errorf("the agent's: %q", got)
	}
	if got := initproc.AgentEnv([]string{"A=1"}); !slices.Equal(got, []string{"A=1"}) {
		t.Errorf("nothing held: %q", got)
	}
}
