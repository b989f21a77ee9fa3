package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/format"
	"github.com/agentrun-dev/agentrun/events/format/rich"
	"github.com/agentrun-dev/agentrun/events/format/text"
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

func translateCmd(args []string, stdin io.Reader, stdout, stderr *os.File) int {
	var o runner.TranslateOptions
	fs := flag.NewFlagSet("agentrun translate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Runtime, "runtime", "", "the runtime whose raw output is on stdin")
	fs.StringVar(&o.Model, "model", "", "the model the run used, for start.model")
	fs.IntVar(&o.ExitCode, "exit-code", 0, "the runtime's exit code, for the end status")
	otlpEndpoint := fs.String("otlp-endpoint", "", "export the replayed run as an OpenTelemetry trace and metrics to this OTLP collector URL (default: OTEL_EXPORTER_OTLP_ENDPOINT)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.Runtime == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: agentrun translate --runtime RUNTIME [--exit-code N] < raw-output")
		return 2
	}
	var out format.Renderer = format.NewJSONL(stdout)
	rec, err := startTelemetry(*otlpEndpoint, "", stderr)
	if err != nil {
		fmt.Fprintf(stderr, "agentrun translate: %v\n", err)
		return 2
	}
	if rec != nil {
		out = format.Tee{out, rec}
		o.TraceID = rec.TraceID()
	}
	defer out.Close()
	end, err := runner.Translate(o, stdin, out, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "agentrun translate: %v\n", err)
		return 1
	}
	return exitCodes[end.Status]
}

func renderCmd(args []string, stdin io.Reader, stdout, stderr *os.File) int {
	fs := flag.NewFlagSet("agentrun render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	formatName := fs.String("format", "text", "text or rich")
	if err := fs.Parse(args); err != nil {
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
