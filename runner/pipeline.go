package runner

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/events/aggregator"
	"github.com/agentrun-dev/agentrun/events/records"
)

// pipeline is adapter → aggregator for one run. Lines come from the reader
// goroutine and network decisions from the proxy, so it is locked.
type pipeline struct {
	mu      sync.Mutex
	adapter adapters.Adapter
	agg     *aggregator.Aggregator
	add     adapters.Emit
}

func newPipeline(a adapters.Adapter, agg *aggregator.Aggregator) *pipeline {
	return &pipeline{adapter: a, agg: agg, add: agg.Add}
}

func (p *pipeline) record(r records.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.agg.Add(r)
}

// progress is what the limits are checked against after every line.
type progress struct {
	mainCalls int
	tokens    int64
	// modelSeen: the output shows a model at work (a call, tokens, a
	// tool call), for the no-model note (modelwatch.go).
	modelSeen bool
}

func (p *pipeline) line(b []byte) progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.adapter.Translate(b, p.add)
	pr := progress{mainCalls: p.agg.MainCalls(), tokens: p.agg.Tokens()}
	pr.modelSeen = pr.mainCalls > 0 || pr.tokens > 0 || p.agg.Counters().Tools > 0
	return pr
}

func (p *pipeline) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.adapter.Close(p.add)
}

// consume reads raw output to EOF: every byte goes to raw (when set) as it
// was read, every line to the adapter. onLine runs after each line with the
// run's progress; warn receives one line about each skipped oversize line,
// which says where the line is kept: in raw, when there is one (a live
// run), else in the input itself (a replay, replaying says so).
func (p *pipeline) consume(r io.Reader, raw io.Writer, onLine func(progress), warn func(string), replay bool) error {
	kept := "; it is not kept (no --raw)"
	switch {
	case replay:
		kept = ""
	case raw != nil:
		kept = "; it is kept in --raw"
	}
	what := "an output"
	if replay {
		what = "an input"
	}
	if raw != nil {
		r = io.TeeReader(r, raw)
	}
	lr := newLineReader(r, MaxLine)
	for {
		line, err := lr.next()
		var tooLong errLineTooLong
		switch {
		case errors.As(err, &tooLong):
			warn(fmt.Sprintf("skipped %s line of %d bytes (over the %d MiB limit)%s", what, tooLong.size, MaxLine>>20, kept))
			continue
		case errors.Is(err, io.EOF) || isDeadline(err):
			return nil
		case err != nil:
			return err
		}
		pr := p.line(line)
		if onLine != nil {
			onLine(pr)
		}
	}
}
