// Command mockmodel runs the deterministic mock Anthropic Messages server.
//
//	mockmodel [--addr 127.0.0.1:0] [--request-log FILE] [--ledger FILE]
//
// It prints its URL on the first line of stdout, serves until SIGINT or
// SIGTERM, then writes the ledger of served model calls as JSON lines to
// stderr (or to --ledger FILE).
package main

import (
	"encoding/json"
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

func run() int {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback only)")
	reqLog := flag.String("request-log", "", "append each request as a JSON line to this file")
	ledger := flag.String("ledger", "", "write the ledger here on exit instead of stderr")
	slow := flag.Duration("slow-interval", 0, "interval between text deltas of the slow scenario (default 500ms)")
	subDelay := flag.Duration("subagent-delay", 0, "delay of each background-subagent reply (default 1s; negative: none)")
	noSafeguards := flag.Bool("no-safeguards", false, "do not answer the server-side auto-mode safety check (safeguard_results)")
	keyEnv := flag.String("api-key-env", "", "answer 401 to model calls without the key this environment variable holds")
	flag.Parse()

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
