// Command mockmodel runs the deterministic mock model: the Anthropic
// Messages API, OpenAI's Responses and Chat Completions, on loopback only.
//
//	mockmodel [--addr 127.0.0.1:0] [--request-log FILE] [--ledger FILE]
//
// It prints its URL on the first line of stdout, serves until SIGINT or
// SIGTERM, then writes the ledger of served model calls as JSON lines to
// stderr (or to --ledger FILE). --help lists the flags and the scenarios.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentrun-dev/agentrun/internal/mockmodel"
)

func main() {
	os.Exit(run())
}

// usage is --help: the flags, then the scenarios a prompt picks.
func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Usage: mockmodel [flags]

A deterministic mock model on 127.0.0.1 for trying agentrun and its CLIs
offline: the Anthropic Messages API (claude-code) and OpenAI's Responses
(codex) and Chat Completions (pi, dsh; base URL .../v1). It prints its URL,
serves until Ctrl-C, then writes the ledger of the calls it served.

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprint(w, "\nScenarios: put scenario:NAME in the prompt (without one the mock answers\n\"OK\", or \"Mock session\" on the Anthropic API):\n")
	for _, s := range mockmodel.Scenarios {
		fmt.Fprintf(w, "  %-11s %s\n", s.Name, s.What)
	}
	fmt.Fprint(w, "\nAgainst agentrun: docs/local.md, \"Trying it with the mock model\".\n")
}

func run() int {
	fs := flag.NewFlagSet("mockmodel", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (loopback only)")
	reqLog := fs.String("request-log", "", "append each request as a JSON line to this file")
	ledger := fs.String("ledger", "", "write the ledger here on exit instead of stderr")
	slow := fs.Duration("slow-interval", 0, "interval between text deltas of the slow scenario (default 500ms)")
	subDelay := fs.Duration("subagent-delay", 0, "delay of each background-subagent reply (default 1s; negative: none)")
	noSafeguards := fs.Bool("no-safeguards", false, "do not answer the server-side auto-mode safety check (safeguard_results)")
	keyEnv := fs.String("api-key-env", "", "answer 401 to model calls without the key this environment variable holds")
	switch err := fs.Parse(os.Args[1:]); {
	case errors.Is(err, flag.ErrHelp):
		usage(os.Stdout, fs)
		return 0
	case err != nil:
		fmt.Fprintf(os.Stderr, "mockmodel: %v; mockmodel --help lists the flags and scenarios\n", err)
		return 2
	case fs.NArg() > 0:
		fmt.Fprintf(os.Stderr, "mockmodel: unexpected argument %q; mockmodel --help lists the flags and scenarios\n", fs.Arg(0))
		return 2
	}

	opts := mockmodel.Options{Addr: *addr, SlowInterval: *slow, NoSafeguards: *noSafeguards, SubagentDelay: *subDelay}
	if *keyEnv != "" {
		if opts.APIKey = os.Getenv(*keyEnv); opts.APIKey == "" {
			fmt.Fprintf(os.Stderr, "mockmodel: -api-key-env %s: the variable is empty\n", *keyEnv)
			return 2
		}
	}
	if *reqLog != "" {
		f, err := os.OpenFile(*reqLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mockmodel:", err)
			return 1
		}
		defer f.Close()
		opts.RequestLog = f
	}
	srv, err := mockmodel.Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(srv.URL())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	_ = srv.Close()

	var out io.Writer = os.Stderr
	if *ledger != "" {
		f, err := os.Create(*ledger)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mockmodel:", err)
			return 1
		}
		defer f.Close()
		out = f
	}
	enc := json.NewEncoder(out)
	for _, c := range srv.Ledger() {
		if err := enc.Encode(c); err != nil {
			fmt.Fprintln(os.Stderr, "mockmodel:", err)
			return 1
		}
	}
	return 0
}
