package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/format"
	"github.com/agentrun-dev/agentrun/events/format/rich"
	"github.com/agentrun-dev/agentrun/events/format/text"
	"github.com/agentrun-dev/agentrun/internal/verb"
	"github.com/agentrun-dev/agentrun/runner"
)

// newRenderer returns the renderer for a --format value.
func newRenderer(name string, stdout, stderr *os.File) (format.Renderer, error) {
	switch name {
	case "jsonl":
		return format.NewJSONL(stdout), nil
	case "text":
		return text.New(stdout, text.Options{}), nil
	case "rich":
		return rich.New(stdout, stderr, rich.Options{}), nil
	}
	return nil, fmt.Errorf("--format %q: use jsonl, text or rich", name)
}

// stderrFor is where the runtime's stderr goes: into rich's scroll area when
// rich draws on a terminal, else to stderr without escape sequences and
// other control characters (the agent can write into the CLI's stderr, and
// an OSC 52 sequence would set the user's clipboard).
func stderrFor(r format.Renderer, stderr *os.File) io.Writer {
	if s, ok := r.(interface{ StderrWriter() io.Writer }); ok {
		if w := s.StderrWriter(); w != nil && w != io.Writer(stderr) {
			return w
		}
	}
	return text.NewPrintableWriter(stderr)
}

const (
	translateSynopsis = "agentrun translate --runtime RUNTIME [--model M] [--exit-code N] < raw.jsonl"
	renderSynopsis    = "agentrun render [--format text|rich] < events.jsonl"
)

// exitNoRuntimeOutput is translate's exit code for an input that holds
// none of the runtime's output (another runtime's, an event stream, an
// empty file): not a replay of a failed run (1).
const exitNoRuntimeOutput = 4

// translateArgsError says what is wrong with translate's arguments.
func translateArgsError(runtime string, args []string) string {
	if runtime == "" {
		return "--runtime is required: the runtime whose --raw output is on stdin (" + strings.Join(adapters.Names(), ", ") + ")"
	}
	return fmt.Sprintf("unexpected argument %q; the raw output comes on stdin", args[0])
}

func translateCmd(args []string, stdin io.Reader, stdout, stderr *os.File) int {
	var o runner.TranslateOptions
	fs := flag.NewFlagSet("agentrun translate", flag.ContinueOnError)
	fs.StringVar(&o.Runtime, "runtime", "", "the runtime whose raw output is on stdin")
	fs.StringVar(&o.Model, "model", "", "the model the run used, for start.model")
	fs.IntVar(&o.ExitCode, "exit-code", 0, "the runtime's exit code, for the end status")
	otlpEndpoint := fs.String("otlp-endpoint", "", "export the replayed run as an OpenTelemetry trace and metrics to this OTLP collector URL (default: OTEL_EXPORTER_OTLP_ENDPOINT)")
	if code, done := verb.Parse(fs, args, translateSynopsis, stdout, stderr); done {
		return code
	}
	if o.Runtime == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agentrun translate: %s\nusage: %s\n", translateArgsError(o.Runtime, fs.Args()), translateSynopsis)
		return 2
	}
	var out format.Renderer = format.NewJSONL(stdout)
	rec, err := startTelemetry(*otlpEndpoint, "", stderr)
	if err != nil {
		fmt.Fprintf(stderr, "agentrun translate: %v\n", err)
		return 2
	}
	if rec != nil {
		out = format.NewTee(out, rec)
		o.TraceID = rec.TraceID()
	}
	defer out.Close()
	end, err := runner.Translate(o, stdin, out, stderr)
	switch {
	case errors.Is(err, runner.ErrNoOutput):
		fmt.Fprintf(stderr, "agentrun translate: %v\n", err)
		return exitNoRuntimeOutput
	case err != nil:
		fmt.Fprintf(stderr, "agentrun translate: writing the events: %v\n", err)
		return exitOutputLost
	}
	return exitCodes[end.Status]
}

func renderCmd(args []string, stdin io.Reader, stdout, stderr *os.File) int {
	fs := flag.NewFlagSet("agentrun render", flag.ContinueOnError)
	formatName := fs.String("format", "text", "text or rich")
	if code, done := verb.Parse(fs, args, renderSynopsis, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agentrun render: unexpected argument %q; the stream comes on stdin\nusage: %s\n", fs.Arg(0), renderSynopsis)
		return 2
	}
	if *formatName != "text" && *formatName != "rich" {
		fmt.Fprintf(stderr, "agentrun render: --format %q: use text or rich\n", *formatName)
		return 2
	}
	out, _ := newRenderer(*formatName, stdout, stderr)
	defer out.Close()
	r := events.NewReader(stdin)
	code := 0
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return code
		}
		if err != nil {
			// A bad line is reported and skipped: the rest of the stream
			// still renders.
			fmt.Fprintf(stderr, "agentrun render: %v\n", err)
			code = 1
			continue
		}
		if err := out.Event(e); err != nil {
			fmt.Fprintf(stderr, "agentrun render: %v\n", err)
			return 1
		}
	}
}
