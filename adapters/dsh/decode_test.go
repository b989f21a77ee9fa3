package dsh

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/internal/wirejson/wirejsontest"
)

// decode.go must give what json.Unmarshal gives into the same structs, to
// the byte: these tests compare the two on every line of the real captures
// (all runtimes': another CLI's output is input too), on seeded mutations
// of the dsh lines and of the tool arguments in them, and FuzzDecodeLine
// and FuzzToolArgs on what the fuzzer finds.

// compareDecode compares the two on line, then on the raw parts that are
// decoded later: a user message's content and a tool result's, and a tool
// call's arguments (JSON in a string).
func compareDecode(t *testing.T, line []byte) {
	t.Helper()
	l, ok := wirejsontest.Compare(t, line, decodeWireLine)
	if !ok || l.Event == nil {
		return
	}
	d := &l.Event.Data
	compareBlocks(t, d.Content)
	if m := d.Message; m != nil {
		for _, b := range m.Content {
			compareBlocks(t, b.Content)
		}
	}
	compareToolArgs(t, d.Arguments)
}

func compareBlocks(t *testing.T, raw json.RawMessage) {
	t.Helper()
	if len(raw) > 0 && raw[0] == '[' {
		wirejsontest.Compare(t, raw, decodeBlocks)
	}
}

// compareToolArgs holds toolArgsOf to json.Unmarshal as summary used it:
// on arguments that start with '{' after spaces, errors ignored.
func compareToolArgs(t *testing.T, raw string) {
	t.Helper()
	var want toolArgs
	if strings.HasPrefix(strings.TrimSpace(raw), "{") {
		_ = json.Unmarshal([]byte(raw), &want)
	}
	if got := toolArgsOf(raw); !reflect.DeepEqual(want, got) {
		t.Fatalf("%q: tool arguments:\nencoding/json %+v\ntoolArgsOf    %+v", raw, want, got)
	}
	if len(raw) > 0 && raw[0] == '{' {
		wirejsontest.Compare(t, []byte(raw), decodeToolArgs)
	}
}

func TestDecodeRealLines(t *testing.T) {
	for _, l := range adapterstest.RealLines(t) {
		compareDecode(t, l)
	}
}

// edits are what TestDecodeMutations puts into real lines: values of
// every kind, bits of syntax, and keys of the wire structs in other cases.
var edits = append([]string{`"AGENTRUN"`, `"Header"`, `"ParentSession"`, `"delegationdepth"`, `"Event"`, `"DATA"`,
	`"Content"`, `"Chunk"`, `"USAGE"`, "\"\u017fource\"", "\"\u212aind\"", `"callID"`, `"Arguments"`, `"Reason"`,
	`"isERROR"`, `"Queries"`, `"FILE_PATH"`}, wirejsontest.Edits...)

// TestDecodeMutations compares the two on seeded random edits of the real
// dsh lines and of the tool arguments in them (wirejsontest.Mutate).
func TestDecodeMutations(t *testing.T) {
	lines := append(adapterstest.RealLines(t, "dsh"), decodeSeeds...)
	args := toolArgSeeds(t, lines)
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		compareDecode(t, wirejsontest.Mutate(rng, lines[rng.Intn(len(lines))], edits))
		compareToolArgs(t, string(wirejsontest.Mutate(rng, args[rng.Intn(len(args))], edits)))
	}
}

// decodeSeeds are lines of what the captures lack: a subagent's session,
// a turn's error, a failed tool, arguments that are not an object.
var decodeSeeds = [][]byte{
	[]byte(lineSubSession), []byte(lineTurnError), []byte(lineResult), []byte(lineAnswer),
	[]byte(`{"agentrun":"event","session":"S1","event":{"type":"tool/call","data":{"callId":"c2","name":"web_search","arguments":"{\"queries\":[\"a\",\"b\"]}"}}}`),
	[]byte(`{"agentrun":"event","session":"S1","event":{"type":"tool/call","data":{"callId":"c3","name":"bash","arguments":" {\"command\":\"ls\"} x"}}}`),
}

// toolArgSeeds are the tool arguments in lines, and a few more.
func toolArgSeeds(t testing.TB, lines [][]byte) [][]byte {
	args := [][]byte{[]byte(`{"queries":["a",null,1],"job_id":"j"}`), []byte(`not json`), []byte(` {"path":"p"}`)}
	for _, line := range lines {
		var l wireLine
		if json.Unmarshal(line, &l) == nil && l.Event != nil && l.Event.Data.Arguments != "" {
			args = append(args, []byte(l.Event.Data.Arguments))
		}
	}
	if len(args) < 5 {
		t.Fatal("no tool arguments in the captures")
	}
	return args
}

func FuzzDecodeLine(f *testing.F) {
	for _, l := range append(adapterstest.RealLines(f, "dsh"), decodeSeeds...) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) { compareDecode(t, line) })
}

func FuzzToolArgs(f *testing.F) {
	for _, a := range toolArgSeeds(f, append(adapterstest.RealLines(f, "dsh"), decodeSeeds...)) {
		f.Add(string(a))
	}
	f.Fuzz(func(t *testing.T, raw string) { compareToolArgs(t, raw) })
}
