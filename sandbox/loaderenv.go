package sandbox

import (
	"strings"

	"github.com/agentrun-dev/agentrun/sandbox/initproc"
)

// The sandbox's environment is the agent's, and bubblewrap, which builds
// the sandbox, runs with it: a dynamic program, started by the runner
// outside the sandbox (as root, for a root caller). The variables that
// glibc's dynamic loader and libc act on at start would make bubblewrap
// load or do what the agent's environment says before any namespace
// exists: LD_PRELOAD=/workspace/x.so, from an --env-file an earlier run's
// agent edited, would run the agent's code as the runner's user outside
// the sandbox. The first process inside (the init) runs with bubblewrap's
// environment too, before it drops to the agent's user. So those variables
// travel renamed (loaderEnvPrefix + NAME), which neither the loader nor
// libc reads, and the init gives them back their names in the agent's own
// environment only.

// loaderEnvPrefix renames a loader variable on its way to the agent.
const loaderEnvPrefix = initproc.LoaderEnvPrefix

// loaderVariables are the variables, besides every LD_*, that glibc drops
// for setuid programs (its "unsecure" list: they load code, read files or
// write them) and GLIBC_TUNABLES (the loader parses it first of all).
var loaderVariables = map[string]bool{
	"GCONV_PATH": true, "GETCONF_DIR": true, "GLIBC_TUNABLES": true, "HOSTALIASES": true, "LOCALDOMAIN": true,
	"LOCPATH": true, "MALLOC_TRACE": true, "NIS_PATH": true, "NLSPATH": true, "RESOLV_HOST_CONF": true,
	"RES_OPTIONS": true, "TZDIR": true,
}

// isLoaderVariable reports whether the dynamic loader or libc act on name
// at a program's start.
func isLoaderVariable(name string) bool {
	return strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "MALLOC_") || loaderVariables[name]
}

// holdLoaderEnv renames the loader variables of env (NAME=VALUE entries)
// for bubblewrap and the init; a variable that already has the prefix (the
// user's own) is kept as it is, and so reaches the agent as its name
// without the prefix, as a loader variable would.
func holdLoaderEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if isLoaderVariable(name) {
			kv = loaderEnvPrefix + kv
		}
		out = append(out, kv)
	}
	return out
}
