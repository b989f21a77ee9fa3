// Command agentrun runs coding agents and speaks the schema-1 event stream.
//
//	agentrun run --runtime R [flags] PROMPT    run an agent, stream its events
//	agentrun translate --runtime R             raw runtime output → events
//	agentrun render --format text|rich         events → human formats
//	agentrun validate [--schema-only]          check a stream against the contract
//	agentrun tail FILE                         follow an events file (the Pod's sidecar)
//	agentrun sandbox [flags] -- COMMAND        a command in the agent's sandbox
package main

import (
	"fmt"
	"os"

	_ "github.com/agentrun-dev/agentrun/adapters/all"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/internal/version"
	"github.com/agentrun-dev/agentrun/sandbox"
)

// Exit codes of agentrun itself, by end status. Scripts can tell a limit or
// a timeout from a failure without reading the stream.
var exitCodes = map[string]int{
	events.StatusFinished:    0,
	events.StatusFailed:      1,
	events.StatusRejected:    2,
	events.StatusLimit:       3,
	events.StatusTimeout:     124,
	events.StatusInterrupted: 130,
}

const usage = `agentrun runs coding agents and writes one schema-1 event stream.

Usage:
  agentrun run --runtime RUNTIME [flags] PROMPT|-
  agentrun translate --runtime RUNTIME [--exit-code N] < raw.jsonl
  agentrun render --format text|rich < events.jsonl
  agentrun validate [--schema-only] < events.jsonl
  agentrun tail [--linger DURATION] events.jsonl
  agentrun sandbox [flags] -- COMMAND [ARGS...]

Run "agentrun VERB -h" for the flags of a verb, "agentrun --version" for the
version, the commit and the pinned agent CLIs.
`

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func dispatch(args []string, stdin, stdout, stderr *os.File) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runCmd(args[1:], stdin, stdout, stderr)
	case "translate":
		return translateCmd(args[1:], stdin, stdout, stderr)
	case "render":
		return renderCmd(args[1:], stdin, stdout, stderr)
	case "validate":
		return validateCmd(args[1:], stdin, stdout, stderr)
	case "tail":
		return tailCmd(args[1:], stdout, stderr)
	case "sandbox":
		return sandboxCmd(args[1:], stdin, stdout, stderr)
	case sandbox.InitVerb:
		return sandboxInitCmd(args[1:], stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "--version", "-version", "version":
		fmt.Fprint(stdout, version.Get().Text("agentrun"))
		return 0
	}
	fmt.Fprintf(stderr, "agentrun: unknown verb %q\n\n%s", args[0], usage)
	return 2
}
