package docs_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/contract"
	"github.com/agentrun-dev/agentrun/events/format/text"
	"github.com/agentrun-dev/agentrun/events/schema"
)

// The tests here keep docs/events.md true to the code: its examples are
// valid streams that render as it shows, and its field tables list the
// fields in the order agentrun writes them.

// block is one fenced code block of events.md.
type block struct {
	info   string // the info string: jsonl, json, text, sh
	body   string
	marker string // the HTML comment on the line before the fence, if any
}

func readBlocks(t *testing.T) (string, []block) {
	t.Helper()
	b, err := os.ReadFile("events.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var out []block
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		info, ok := strings.CutPrefix(lines[i], "```")
		if !ok || info == "" {
			continue
		}
		bl := block{info: info}
		if i > 0 && strings.HasPrefix(lines[i-1], "<!--") {
			bl.marker = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(lines[i-1], "<!--"), "-->"))
		}
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		bl.body = strings.Join(body, "\n") + "\n"
		out = append(out, bl)
	}
	return doc, out
}

// TestExampleStreams: every jsonl block is a whole stream as agentrun
// writes it, valid against the schema and the stream rules.
func TestExampleStreams(t *testing.T) {
	_, blocks := readBlocks(t)
	n := 0
	for _, b := range blocks {
		if b.info != "jsonl" {
			continue
		}
		n++
		for _, p := range contract.Check([]byte(b.body), contract.Options{Exact: true}) {
			t.Errorf("jsonl example %d: %v", n, p)
		}
	}
	if n == 0 {
		t.Fatal("no jsonl example in events.md")
	}
}

// TestExampleEvents: every json block holds events (formatted over several
// lines) that are valid, in field order, and are lines of the example
// stream.
func TestExampleEvents(t *testing.T) {
	_, blocks := readBlocks(t)
	var stream string
	for _, b := range blocks {
		if b.info == "jsonl" && stream == "" {
			stream = b.body
		}
	}
	n := 0
	for _, b := range blocks {
		if b.info != "json" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(b.body))
		for {
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("json example: %v", err)
			}
			n++
			var line bytes.Buffer
			if err := json.Compact(&line, raw); err != nil {
				t.Fatal(err)
			}
			for _, msg := range schema.Validate(line.Bytes()) {
				t.Errorf("json example %d: %s", n, msg)
			}
			var head events.Base
			_ = json.Unmarshal(raw, &head)
			var want []string
			keys, _ := contract.KeyOrder(raw)
			for _, k := range contract.FieldOrder[head.Type] {
				if !contract.Optional[head.Type+"."+k] || slices.Contains(keys, k) {
					want = append(want, k)
				}
			}
			if !slices.Equal(keys, want) {
				t.Errorf("json example %d: %s fields %v, want %v", n, head.Type, keys, want)
			}
			if !strings.Contains(stream, line.String()+"\n") {
				t.Errorf("json example %d (%s) is not a line of the example stream", n, head.Type)
			}
		}
	}
	if n == 0 {
		t.Fatal("no json example in events.md")
	}
}

// TestRenderedExample: the text block marked as rendered from the example
// stream is what the text format writes for it.
func TestRenderedExample(t *testing.T) {
	_, blocks := readBlocks(t)
	var stream, shown string
	for _, b := range blocks {
		switch {
		case b.info == "jsonl" && stream == "":
			stream = b.body
		case b.info == "text" && b.marker == "rendered from the example stream":
			shown = b.body
		}
	}
	if shown == "" {
		t.Fatal("no rendered example in events.md")
	}
	var out bytes.Buffer
	r := text.New(&out, text.Options{})
	rd := events.NewReader(strings.NewReader(stream))
	for {
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Event(e); err != nil {
			t.Fatal(err)
		}
	}
	if out.String() != shown {
		t.Errorf("the text format of the example stream is\n%s\nevents.md shows\n%s", out.String(), shown)
	}
}

var fieldRow = regexp.MustCompile("^\\| `([a-z_.]+)` \\|")

// tableFields returns the fields of the first table after the heading, in
// order, without the nested ones (network.mode).
func tableFields(t *testing.T, doc, heading string) []string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("events.md has no heading %q", heading)
	}
	var fields []string
	inTable := false
	for _, line := range strings.Split(doc[i+len(heading)+2:], "\n") {
		if strings.HasPrefix(line, "|") {
			inTable = true
			if m := fieldRow.FindStringSubmatch(line); m != nil && !strings.Contains(m[1], ".") {
				fields = append(fields, m[1])
			}
			continue
		}
		if inTable || strings.HasPrefix(line, "#") {
			break
		}
	}
	return fields
}

// TestFieldTables: each event's table lists its fields in the order of the
// contract (and so of the Go types and the schema).
func TestFieldTables(t *testing.T) {
	doc, _ := readBlocks(t)
	if got := tableFields(t, doc, "### Common fields"); !slices.Equal(got, []string{"schema", "type", "time"}) {
		t.Errorf("common fields %v", got)
	}
	for typ, order := range contract.FieldOrder {
		if got := tableFields(t, doc, "### "+typ); !slices.Equal(got, order[3:]) {
			t.Errorf("the table of %s lists %v, want %v", typ, got, order[3:])
		}
	}
	if got := tableFields(t, doc, "### Usage totals"); !slices.Equal(got, contract.UsageOrder) {
		t.Errorf("the usage totals table lists %v, want %v", got, contract.UsageOrder)
	}
}

// TestStatuses: the end status table lists the statuses of the schema, in
// the order of precedence of events.
func TestStatuses(t *testing.T) {
	doc, _ := readBlocks(t)
	got := tableFields(t, doc, "## The end status")
	want := []string{events.StatusRejected, events.StatusTimeout, events.StatusLimit, events.StatusInterrupted, events.StatusFailed, events.StatusFinished}
	if !slices.Equal(got, want) {
		t.Errorf("the end status table lists %v, want %v", got, want)
	}
}
