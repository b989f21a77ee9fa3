package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/aggregator"
	"github.com/agentrun-dev/agentrun/events/format"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/runner"
)

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func runCmd(args []string, stdout, stderr *os.File) int {
	started := time.Now()
	var o runner.Options
	var formatName, eventsPath, otlpEndpoint, traceID string
	var timeout int
	fs := flag.NewFlagSet("agentrun run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.Runtime, "runtime", "", "the agent CLI: claude-code, codex, pi or dsh")
	fs.StringVar(&o.Model, "model", "", "the model (default: the runtime's)")
	fs.StringVar(&formatName, "format", "jsonl", "output format: jsonl, text or rich")
	fs.StringVar(&o.RawPath, "raw", "", "keep the runtime's raw output in this file, byte for byte")
	fs.IntVar(&timeout, "timeout", 0, "stop the run after this many seconds (0: no timeout)")
	fs.IntVar(&o.MaxTurns, "max-turns", 0, "stop when the main agent starts more model calls than this")
	fs.Int64Var(&o.MaxTokens, "max-tokens", 0, "stop when the run has used more tokens than this")
	fs.Var((*multi)(&o.Env), "env", "set a variable for the agent, NAME=VALUE (repeatable)")
	fs.StringVar(&o.EnvFile, "env-file", "", "read NAME=VALUE lines for the agent from this file")
	fs.Var((*multi)(&o.PassEnv), "pass-env", "pass this variable of agentrun's environment to the agent, NAME or PREFIX* (repeatable)")
	fs.StringVar(&eventsPath, "events", "", "also write the jsonl event stream to this file (a Pod's events sidecar follows it)")
	fs.StringVar(&o.SummaryPath, "summary", "", "write the end summary here (a Pod's termination message)")
	fs.StringVar(&o.MeterFile, "meter-file", "", "with --credential: keep the proxy's meter count in this file while the run goes on (a Pod's events sidecar serves it)")
	fs.Var((*multi)(&o.Images), "image", "attach an image to the prompt (repeatable)")
	fs.BoolVar(&o.NoSubagents, "no-subagents", false, "do not let the agent start subagents")
	fs.StringVar(&o.SessionDir, "session-dir", "", "save the session here, to continue it with --resume")
	fs.StringVar(&o.Resume, "resume", "", "continue the saved session with this id (needs --session-dir)")
	fs.StringVar(&o.Cwd, "cwd", "", "the agent's working directory (default: the current one)")
	fs.Var((*multi)(&o.Credentials), "credential", "NAME=HOST:PORT[,HOST:PORT...]: the agent gets a stand-in for the variable NAME of agentrun's environment, and the proxy puts the real value into requests to those hosts, over verified TLS only; http://HOST:PORT declares a host that speaks plain HTTP (repeatable)")
	fs.StringVar(&o.UpstreamCA, "upstream-ca", "", "verify the credential hosts' TLS certificates with this PEM bundle instead of the system's roots")
	fs.StringVar(&otlpEndpoint, "otlp-endpoint", "", "export the run as an OpenTelemetry trace and metrics to this OTLP collector URL (default: OTEL_EXPORTER_OTLP_ENDPOINT; see docs/telemetry.md)")
	fs.StringVar(&traceID, "trace-id", "", "with telemetry: the new trace's id, 32 hex digits (the controller's; TRACEPARENT wins)")
	sandboxFlags(fs, &o.SandboxOptions)
	help := fs.Bool("h", false, "show this help")

	parseErr := fs.Parse(args)
	if *help {
		fs.SetOutput(stdout)
		fmt.Fprintln(stdout, "Usage: agentrun run --runtime RUNTIME [flags] PROMPT")
		fs.PrintDefaults()
		return 0
	}
	out, ferr := newRenderer(formatName, stdout, stderr)
	if ferr != nil {
		out, _ = newRenderer("jsonl", stdout, stderr)
	}
	// Where the runtime's stderr goes is the chosen format's business (rich
	// inserts it into its scroll area), decided before any --events tee.
	runtimeStderr := stderrFor(out, stderr)
	if eventsPath != "" {
		// Created before anything else, so that a follower finds it; not
		// through a link an earlier agent left in the workspace.
		f, err := runner.FilesFor(o.Cwd).Create(eventsPath, 0o644)
		if err != nil {
			ferr = fmt.Errorf("--events %s: %v; pass a writable file path", eventsPath, err)
		} else {
			defer f.Close()
			out = format.Tee{out, format.NewJSONL(f)}
		}
	}
	// The run's telemetry is a consumer of the stream like the formats;
	// it closes last, after the end is written, within its own deadline.
	if rec, err := startTelemetry(otlpEndpoint, traceID, stderr); err != nil && ferr == nil {
		ferr = err
	} else if rec != nil {
		out = format.Tee{out, rec}
		o.TraceID = rec.TraceID()
	}
	defer out.Close()
	reject := func(detail string) int {
		agg := aggregator.New(func(e events.Event) error { return out.Event(e) }, time.Now)
		end := agg.Finish(aggregator.Outcome{Status: events.StatusRejected, Detail: detail, Started: started})
		if o.SummaryPath != "" {
			// Every exit path leaves the summary a Pod's controller reads
			// (as far as the flags were parsed before the bad one).
			s := podcontract.FromEnd(end, agg.Counters())
			s.TraceID = o.TraceID
			_ = runner.WriteSummary(runner.FilesFor(o.Cwd), o.SummaryPath, s)
		}
		return exitCodes[events.StatusRejected]
	}
	switch {
	case parseErr != nil:
		return reject(fmt.Sprintf("%v; run agentrun run -h for the flags", parseErr))
	case ferr != nil:
		return reject(ferr.Error())
	case fs.NArg() > 1:
		return reject(fmt.Sprintf("expected one prompt argument, got %d (%q ...): quote the prompt, and put every flag before it", fs.NArg(), fs.Arg(0)))
	case timeout < 0:
		return reject("--timeout must be a positive number of seconds (or 0 for none)")
	}
	o.Prompt = fs.Arg(0)
	o.Timeout = time.Duration(timeout) * time.Second
	o.Started = started

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	end := runner.Run(ctx, o, out, runtimeStderr)
	return exitCodes[end.Status]
}
