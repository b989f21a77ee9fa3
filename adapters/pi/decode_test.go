package pi

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/internal/wirejson"
	"github.com/agentrun-dev/agentrun/internal/wirejson/wirejsontest"
)

// decode.go must give what json.Unmarshal gives into the same structs, to
// the byte: these tests compare the two on every line of the real captures
// (all runtimes': another CLI's output is input too), on seeded mutations
// of the pi lines, and FuzzDecodeLine on what the fuzzer finds.

// compareDecode compares the two on line as each decoder of a line reads
// it (the message_update lines with decodeUpdateLine, whose type errors
// drop the update, the rest with decodeWireLine), then on the raw parts
// that are decoded later: a message's content, a tool call's arguments.
func compareDecode(t *testing.T, line []byte) {
	t.Helper()
	wirejsontest.Compare(t, line, decodeUpdateLine)
	l, ok := wirejsontest.Compare(t, line, decodeWireLine)
	if !ok {
		return
	}
	if m := l.Message; m != nil && len(m.Content) > 0 {
		switch m.Content[0] {
		case '[':
			wirejsontest.Compare(t, m.Content, decodeBlocks)
		case '"':
			wirejsontest.Compare(t, m.Content, (*wirejson.Decoder).String)
		}
	}
	if len(l.Args) > 0 && l.Args[0] == '{' {
		wirejsontest.Compare(t, l.Args, decodeToolArgs)
	}
}

func TestDecodeRealLines(t *testing.T) {
	for _, l := range adapterstest.RealLines(t) {
		compareDecode(t, l)
	}
}

// edits are what TestDecodeMutations puts into real lines: values of
// every kind, bits of syntax, and keys of the wire structs in other cases.
var edits = append([]string{`"TYPE"`, `"Message"`, `"AssistantMessageEvent"`, `"DELTA"`, `"Content"`, `"USAGE"`,
	"\"\u017ftopReason\"", `"cacheread"`, `"Cost"`, `"TOTAL"`, `"toolcallid"`, `"Args"`, `"IsError"`, `"PATTERN"`, `"Path"`}, wirejsontest.Edits...)

// TestDecodeMutations compares the two on seeded random edits of the real
// pi lines (wirejsontest.Mutate). The message_update lines are most of
// them, and long (each carries its whole message so far); the others are
// picked as often, so that every line type is edited.
func TestDecodeMutations(t *testing.T) {
	var updates, others [][]byte
	for _, l := range append(adapterstest.RealLines(t, "pi"), decodeSeeds...) {
		if bytes.HasPrefix(l, updatePrefix) {
			updates = append(updates, l)
		} else {
			others = append(others, l)
		}
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		lines := others
		if i%2 == 0 {
			lines = updates
		}
		compareDecode(t, wirejsontest.Mutate(rng, lines[rng.Intn(len(lines))], edits))
	}
}

// decodeSeeds are lines of what the captures lack: content as a string,
// retries, a failed tool, the arguments of other tools.
var decodeSeeds = [][]byte{
	[]byte(`{"type":"message_end","message":{"role":"user","content":"fix it","timestamp":1}}`),
	[]byte(lineRetryFail), []byte(lineReadStart), []byte(lineReadEnd), []byte(lineAPIError),
	[]byte(`{"type":"tool_execution_start","toolCallId":"c2","toolName":"grep","args":{"pattern":"TODO","path":"src"}}`),
}

func FuzzDecodeLine(f *testing.F) {
	for _, l := range append(adapterstest.RealLines(f, "pi"), decodeSeeds...) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) { compareDecode(t, line) })
}
