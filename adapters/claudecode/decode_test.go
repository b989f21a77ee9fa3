package claudecode

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// decode.go must give what json.Unmarshal gives into the same structs, to
// the byte: these tests compare the two on every line of the real captures
// (all runtimes': another CLI's output is input too), on seeded mutations
// of the claude-code lines, and FuzzDecodeLine on what the fuzzer finds.

func compareDecode(t *testing.T, line []byte) {
	t.Helper()
	var want wireLine
	err := json.Unmarshal(line, &want)
	var syntax *json.SyntaxError
	wantSyntax := errors.As(err, &syntax)
	var typeErr *json.UnmarshalTypeError
	if err != nil && !wantSyntax && !errors.As(err, &typeErr) {
		t.Fatalf("%q: encoding/json: unexpected error %v", line, err)
	}
	a := &Adapter{} // only its decoder is used
	var got wireLine
	gotErr := decodeLine(&a.dec, line, &got)
	if wantSyntax != (gotErr != nil) {
		t.Fatalf("%q: syntax error: encoding/json %v, decodeLine %v", line, err, gotErr)
	}
	if wantSyntax {
		return
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%q:\nencoding/json %+v\ndecodeLine    %+v", line, want, got)
	}
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

// realLines are the lines of every runtime's real captures.
func realLines(t testing.TB, runtimes ...string) [][]byte {
	var lines [][]byte
	for _, rt := range runtimes {
		files, err := filepath.Glob(filepath.Join("..", rt, "testdata", "real", "*.jsonl"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no captures of %s: %v", rt, err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range bytes.Split(data, []byte("\n")) {
				if len(l) > 0 {
					lines = append(lines, l)
				}
			}
		}
	}
	return lines
}

func TestDecodeRealLines(t *testing.T) {
	lines := realLines(t, "claudecode", "codex", "pi", "dsh")
	for _, l := range lines {
		compareDecode(t, l)
	}
}

// edits are what TestDecodeMutations puts into real lines: values of every
// kind (for fields of another), keys in other cases, escapes, bad UTF-8.
var edits = []string{
	`null`, `true`, `false`, `0`, `-1`, `1.5`, `1e400`, `99999999999999999999`, `""`, `"x"`, `[]`, `{}`,
	`[1,"a",null]`, `{"a":1}`, `"\ud800"`, "\"\xff\xfe\"", `"\u00e9\n"`, `"TYPE"`, `"Message"`, `"ID"`,
	`"Input_Tokens"`, "\"\u017fession_id\"", "\"\u212aind\"", `"conTent"`, `"USAGE"`, `,`, `:`, `"`, `\`, ` `,
}

// TestDecodeMutations compares the two on seeded random edits of the real
// claude-code lines: a value or key replaced, a member repeated (later keys
// decode into what earlier ones left), a byte changed or cut.
func TestDecodeMutations(t *testing.T) {
	lines := realLines(t, "claudecode")
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		l := append([]byte(nil), lines[rng.Intn(len(lines))]...)
		for n := rng.Intn(3) + 1; n > 0; n-- {
			p := rng.Intn(len(l))
			switch rng.Intn(5) {
			case 0: // a token replaced: from a quote, colon or comma to the next
				end := p + 1
				for end < len(l) && !bytes.ContainsRune([]byte(`",:{}[]`), rune(l[end])) {
					end++
				}
				l = append(l[:p:p], append([]byte(edits[rng.Intn(len(edits))]), l[end:]...)...)
			case 1: // a value after a key
				if k := bytes.Index(l[p:], []byte(`":`)); k >= 0 {
					at := p + k + 2
					l = append(l[:at:at], append([]byte(edits[rng.Intn(len(edits))]+`,"x":`), l[at:]...)...)
				}
			case 2: // the line's first member repeated at its end
				if k := bytes.IndexByte(l, ','); k > 1 && l[len(l)-1] == '}' {
					l = append(l[:len(l)-1:len(l)-1], append(append([]byte{','}, l[1:k]...), '}')...)
				}
			case 3:
				l[p] = edits[rng.Intn(len(edits))][0]
			case 4:
				l = append(l[:p:p], l[p+1:]...)
			}
			if len(l) == 0 {
				l = []byte("{")
			}
		}
		compareDecode(t, l)
	}
}

func FuzzDecodeLine(f *testing.F) {
	for _, l := range realLines(f, "claudecode") {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) { compareDecode(t, line) })
}
