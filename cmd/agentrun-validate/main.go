// Command agentrun-validate is `agentrun validate`: it checks a schema-1
// stream on stdin against the contract of docs/events.md.
//
//	agentrun validate [--schema-only] < events.jsonl
//
// It is a binary of its own, which agentrun runs for the verb from beside
// itself, so that agentrun, which starts every agent and every sandbox,
// does not link the JSON Schema library: that library's package
// initialisation compiles the meta-schemas of five drafts, which was half
// of agentrun's start before main (docs/benchmarks.md, "Sandbox start-up").
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/agentrun-dev/agentrun/events/contract"
	"github.com/agentrun-dev/agentrun/internal/verb"
)

const synopsis = "agentrun validate [--schema-only] < events.jsonl"

func main() {
	os.Exit(validate(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// validate checks a schema-1 stream on stdin: every line against the JSON
// Schema (docs/events.schema.json) and, unless --schema-only, the field
// order and the rules between events of docs/events.md. Each problem is one
// line on stdout, "line N: ..."; the exit code is 0 for a valid stream, 1
// for an invalid one, 2 for a usage error.
func validate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agentrun validate", flag.ContinueOnError)
	schemaOnly := fs.Bool("schema-only", false, "check each line against the JSON Schema only, not the field order or the rules between events")
	if code, done := verb.Parse(fs, args, synopsis, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agentrun validate: unexpected argument %q; the stream comes on stdin\nusage: %s\n", fs.Arg(0), synopsis)
		return 2
	}
	problems, err := contract.CheckReader(stdin, contract.Options{SchemaOnly: *schemaOnly})
	for _, p := range problems {
		fmt.Fprintln(stdout, p.Error())
	}
	if err != nil {
		fmt.Fprintf(stderr, "agentrun validate: reading the stream: %v\n", err)
		return 1
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "agentrun validate: %d problem(s): not a valid schema-1 stream\n", len(problems))
		return 1
	}
	return 0
}
