package claudecode

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/internal/wirejson/wirejsontest"
)

// decode.go must give what json.Unmarshal gives into the same structs, to
// the byte: these tests compare the two on every line of the real captures
// (all runtimes': another CLI's output is input too), on seeded mutations
// of the claude-code lines, and FuzzDecodeLine on what the fuzzer finds.

func compareDecode(t *testing.T, line []byte) {
	t.Helper()
	want, ok := wirejsontest.Compare(t, line, decodeWireLine)
	if !ok {
		return
	}
	a := &Adapter{} // only its decoder is used
	// The nested parts decoded later from the line's raw fields.
	for _, m := range []*wireMessage{want.Message, eventMessage(want.Event)} {
		if m == nil || len(m.Content) == 0 {
			continue
		}
		if m.Content[0] == '[' {
			var blocks []wireBlock
			_ = json.Unmarshal(m.Content, &blocks)
			if got := a.blocks(m.Content); !reflect.DeepEqual(blocks, got) {
				t.Fatalf("%q: blocks:\nencoding/json %+v\nwirejson      %+v", m.Content, blocks, got)
			}
		}
		if m.Content[0] == '"' {
			var s string
			_ = json.Unmarshal(m.Content, &s)
			if got := a.promptText(m.Content); s != got {
				t.Fatalf("%q: prompt text: encoding/json %q, wirejson %q", m.Content, s, got)
			}
		}
	}
	if r := want.ToolUseResult; len(r) > 0 && r[0] == '{' {
		var res agentResult
		_ = json.Unmarshal(r, &res)
		if got := a.agentResult(r); !reflect.DeepEqual(res, got) {
			t.Fatalf("%q: agent result:\nencoding/json %+v\nwirejson      %+v", r, res, got)
		}
	}
}

func eventMessage(e *wireStreamEvent) *wireMessage {
	if e == nil {
		return nil
	}
	return e.Message
}

func TestDecodeRealLines(t *testing.T) {
	for _, l := range adapterstest.RealLines(t) {
		compareDecode(t, l)
	}
}

// edits are what TestDecodeMutations puts into real lines: values of
// every kind, bits of syntax, and keys of the wire structs in other cases.
var edits = append([]string{`"TYPE"`, `"Message"`, `"ID"`, `"Input_Tokens"`, "\"\u017fession_id\"", "\"\u212aind\"",
	`"conTent"`, `"USAGE"`}, wirejsontest.Edits...)

// TestDecodeMutations compares the two on seeded random edits of the real
// claude-code lines (wirejsontest.Mutate).
func TestDecodeMutations(t *testing.T) {
	lines := adapterstest.RealLines(t, "claudecode")
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		compareDecode(t, wirejsontest.Mutate(rng, lines[rng.Intn(len(lines))], edits))
	}
}

func FuzzDecodeLine(f *testing.F) {
	for _, l := range adapterstest.RealLines(f, "claudecode") {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) { compareDecode(t, line) })
}
