package sandbox

import (
	"io"

	"github.com/agentrun-dev/agentrun/internal/sibling"
	"github.com/agentrun-dev/agentrun/sandbox/initproc"
)

// InitVerb is the hidden agentrun verb that runs as the first process in
// the sandbox when the small InitBinary is not installed:
// agentrun sandbox-init [flags] -- COMMAND [ARGS...].
const InitVerb = "sandbox-init"

// InitBinary is the small helper binary (cmd/agentrun-sandbox-init) that
// agentrun looks for next to itself; it starts faster than agentrun.
const InitBinary = "agentrun-sandbox-init"

// FindInit returns the first program for the sandbox: InitBinary beside
// the agentrun binary at self when it is there, else self with InitVerb.
func FindInit(self string) (path string, usesVerb bool) {
	if p, ok := sibling.Of(self, InitBinary); ok {
		return p, false
	}
	return self, true
}

// ControlFD is the socket to the runner that bwrap passes down.
const ControlFD = initproc.ControlFD

// InitOptions are what the runner asks of the first process (see package
// initproc, which is that process).
type InitOptions = initproc.Options

// InitMain is the first process inside the sandbox (initproc.Main).
func InitMain(args []string, stderr io.Writer) int { return initproc.Main(args, stderr) }
