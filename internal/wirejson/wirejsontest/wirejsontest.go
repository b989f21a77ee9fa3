// Package wirejsontest holds decoders written with internal/wirejson to
// encoding/json: every adapter that decodes its lines with wirejson
// compares the two on its real captures, on seeded mutations of them and
// in a fuzz target, with Compare and Mutate.
package wirejsontest

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand"
	"reflect"
	"testing"

	"github.com/agentrun-dev/agentrun/internal/wirejson"
)

// Compare decodes in into a zero T twice, with json.Unmarshal and with
// decode (from in's start, then only whitespace: an adapter's decodeLine),
// and fails t at the first difference: a
// syntax error or not, a type error or not (Decoder.Mismatch), the values
// (reflect.DeepEqual). It returns encoding/json's value and whether in was
// valid JSON, for comparing what is decoded later from its raw parts.
func Compare[T any](t testing.TB, in []byte, decode func(*wirejson.Decoder, *T) error) (T, bool) {
	t.Helper()
	var want T
	err := json.Unmarshal(in, &want)
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	wantSyntax := errors.As(err, &syntax)
	if err != nil && !wantSyntax && !errors.As(err, &typeErr) {
		t.Fatalf("%q: encoding/json: unexpected error %v", in, err)
	}
	var d wirejson.Decoder
	var got T
	d.Reset(in)
	gotErr := decode(&d, &got)
	if gotErr == nil {
		gotErr = d.End()
	}
	if wantSyntax != (gotErr != nil) {
		t.Fatalf("%q: syntax error: encoding/json %v, wirejson %v", in, err, gotErr)
	}
	if wantSyntax {
		return want, false
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%q:\nencoding/json %+v\nwirejson      %+v", in, want, got)
	}
	if (typeErr != nil) != d.Mismatch() {
		t.Fatalf("%q: type error: encoding/json %v, wirejson Mismatch %v", in, err, d.Mismatch())
	}
	return want, true
}

// Edits are what Mutate puts into lines: values of every kind (for fields
// of another), escapes, invalid UTF-8 and lone surrogates, bits of syntax.
// An adapter adds its own keys in other cases ("TYPE", "Message") and
// spellings that fold to them ("\u017fession", the long s).
var Edits = []string{
	`null`, `true`, `false`, `0`, `-1`, `1.5`, `1e400`, `99999999999999999999`, `""`, `"x"`, `[]`, `{}`,
	`[1,"a",null]`, `{"a":1}`, `"\ud800"`, "\"\xff\xfe\"", `"\u00e9\n"`, `,`, `:`, `"`, `\`, ` `,
}

// Mutate returns a seeded random edit of line, which it leaves as it is:
// one to three of a token replaced by one of edits (from a byte to the
// next quote, colon, comma or bracket), a value put in after a key, the
// line's first member repeated at its end (later keys decode into what
// earlier ones left), a byte changed or cut.
func Mutate(rng *rand.Rand, line []byte, edits []string) []byte {
	l := append([]byte(nil), line...)
	if len(l) == 0 {
		l = []byte("{")
	}
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
	return l
}
