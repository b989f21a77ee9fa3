// Command agentrun-sandbox-init is the first process inside agentrun's
// sandbox (see package sandbox, RunInit): it hands the proxy's listening
// sockets to the runner and becomes the agent. It is a separate, small
// binary because it runs on every start and a small Go binary starts in a
// fraction of the time the full agentrun binary needs; agentrun falls back
// to its own hidden verb when it is not installed next to it.
//
//	agentrun-sandbox-init [--proxy] -- COMMAND [ARGS...]
package main

import (
	"fmt"
	"os"

	"github.com/agentrun-dev/agentrun/sandbox"
)

func main() {
	args := os.Args[1:]
	withProxy := false
	for len(args) > 0 && args[0] != "--" {
		if args[0] == "--proxy" {
			withProxy = true
		}
		args = args[1:]
	}
	if len(args) > 0 {
		args = args[1:]
	}
	fmt.Fprintln(os.Stderr, sandbox.RunInit(withProxy, args))
	os.Exit(127)
}
