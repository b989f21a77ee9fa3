// Command agentrun-sandbox-init is the first process inside agentrun's
// sandbox (see package sandbox/initproc): it hands the proxy's listening
// sockets to the runner and becomes the agent. It is a separate, small
// binary because it runs on every start and a small Go binary starts in a
// fraction of the time the full agentrun binary needs; agentrun falls back
// to its own hidden verb when it is not installed next to it.
//
//	agentrun-sandbox-init [--proxy] -- COMMAND [ARGS...]
package main

import (
	"os"

	"github.com/agentrun-dev/agentrun/sandbox/initproc"
)

func main() {
	os.Exit(initproc.Main(os.Args[1:], os.Stderr))
}
