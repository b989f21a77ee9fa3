package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/agentrun-dev/agentrun/events/contract"
)

const validateSynopsis = "agentrun validate [--schema-only] < events.jsonl"

// validateCmd checks a schema-1 stream on stdin: every line against the JSON
// Schema (docs/events.schema.json) and, unless --schema-only, the field
// order and the rules between events of docs/events.md. Each problem is one
// line on stdout, "line N: ..."; the exit code is 0 for a valid stream, 1
// for an invalid one, 2 for a usage error.
func validateCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agentrun validate", flag.ContinueOnError)
	schemaOnly := fs.Bool("schema-only", false, "check each line against the JSON Schema only, not the field order or the rules between events")
	if code, done := parseVerb(fs, args, validateSynopsis, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agentrun validate: unexpected argument %q; the stream comes on stdin\nusage: %s\n", fs.Arg(0), validateSynopsis)
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
