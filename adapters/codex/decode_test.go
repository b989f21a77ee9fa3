package codex

import (
	"math/rand"
	"testing"

	"github.com/agentrun-dev/agentrun/adapters/adapterstest"
	"github.com/agentrun-dev/agentrun/internal/wirejson/wirejsontest"
)

// decode.go must give what json.Unmarshal gives into the same structs, to
// the byte: these tests compare the two on every line of the real captures
// (all runtimes': another CLI's output is input too), on seeded mutations
// of the codex lines, and FuzzDecodeLine on what the fuzzer finds.

func TestDecodeRealLines(t *testing.T) {
	for _, l := range adapterstest.RealLines(t) {
		wirejsontest.Compare(t, l, decodeWireLine)
	}
}

// edits are what TestDecodeMutations puts into real lines: values of
// every kind, bits of syntax, and keys of the wire structs in other cases.
var edits = append([]string{`"TYPE"`, `"Item"`, `"ID"`, `"Exit_Code"`, `"USAGE"`, `"cached_INPUT_tokens"`,
	"\"\u017ftatus\"", "\"\u212aind\"", `"Changes"`, `"ERROR"`, `"Message"`}, wirejsontest.Edits...)

// TestDecodeMutations compares the two on seeded random edits of the real
// codex lines (wirejsontest.Mutate).
func TestDecodeMutations(t *testing.T) {
	lines := append(adapterstest.RealLines(t, "codex"), decodeSeeds...)
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		wirejsontest.Compare(t, wirejsontest.Mutate(rng, lines[rng.Intn(len(lines))], edits), decodeWireLine)
	}
}

// decodeSeeds are lines of the item types the captures lack: a file
// change, an MCP call, a web search, a failed command.
var decodeSeeds = [][]byte{
	[]byte(linePatch), []byte(lineMCPStart), []byte(lineMCPEnd), []byte(lineSearch), []byte(lineCmdFailed),
}

func FuzzDecodeLine(f *testing.F) {
	for _, l := range append(adapterstest.RealLines(f, "codex"), decodeSeeds...) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) { wirejsontest.Compare(t, line, decodeWireLine) })
}
