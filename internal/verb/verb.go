// Package verb is how agentrun's commands parse a verb's flags and print
// its usage, shared by agentrun and agentrun-validate (which serves
// `agentrun validate`), so that every verb answers -h and a bad flag alike.
package verb

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Parse parses the flags of a verb. -h and --help print its usage
// (synopsis, then the flags) on stdout and end the command with 0; a bad
// flag says what is wrong on stderr and ends it with 2.
func Parse(fs *flag.FlagSet, args []string, synopsis string, stdout, stderr io.Writer) (code int, done bool) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		PrintUsage(fs, synopsis, stdout)
		return 0, true
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\nusage: %s\nRun \"%s -h\" for its flags.\n", fs.Name(), err, synopsis, fs.Name())
		return 2, true
	}
	return 0, false
}

// PrintUsage writes a verb's usage: its synopsis and its flags.
func PrintUsage(fs *flag.FlagSet, synopsis string, w io.Writer) {
	fmt.Fprintf(w, "Usage: %s\n\nFlags:\n", synopsis)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
