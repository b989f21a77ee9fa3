package wirejsontest

import (
	"bytes"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/internal/wirejson"
)

// Compare is only worth its use if it fails on every kind of difference:
// these tests give it decoders that are wrong in one way each and check
// that it says so (and that it passes a right one).

type pair struct {
	A string `json:"a"`
	N int64  `json:"n"`
}

var pairFields = wirejson.FieldsOf(reflect.TypeFor[pair]())

func decodePair(d *wirejson.Decoder, p *pair) error {
	return d.Object(pairFields, func(name string) error {
		switch name {
		case "a":
			return d.String(&p.A)
		case "n":
			return d.Int64(&p.N)
		}
		return d.Skip()
	})
}

// recorder is a testing.TB whose Fatalf records the failure and stops the
// comparison, as the real one stops the test.
type recorder struct {
	testing.TB
	failed string
}

type stop struct{}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(stop{})
}

// compareFails runs Compare and returns its failure, "" when it passed.
func compareFails(t *testing.T, in string, decode func(*wirejson.Decoder, *pair) error) (failed string) {
	r := &recorder{TB: t}
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(stop); !ok {
				panic(v)
			}
			failed = r.failed
		}
	}()
	Compare(r, []byte(in), decode)
	return ""
}

func TestCompareFindsEveryDifference(t *testing.T) {
	tests := []struct {
		name, in string
		decode   func(*wirejson.Decoder, *pair) error
		fails    string // in Compare's message; "" when it must pass
	}{
		{"right", `{"a":"x","n":1}`, decodePair, ""},
		{"right with a type error", `{"a":"x","n":"1"}`, decodePair, ""},
		{"right on invalid JSON", `{"a":"x",}`, decodePair, ""},
		{"a value missed", `{"a":"x","n":1}`, func(d *wirejson.Decoder, p *pair) error {
			return d.Object(pairFields, func(string) error { return d.Skip() })
		}, "\nencoding/json"},
		{"a syntax error missed", `{"a":"x"} x`, func(d *wirejson.Decoder, p *pair) error {
			_ = decodePair(d, p)
			d.Reset([]byte("{}"))
			return d.Skip()
		}, "syntax error"},
		{"a type error missed", `{"a":"x","n":"1"}`, func(d *wirejson.Decoder, p *pair) error {
			return d.Object(pairFields, func(name string) error {
				if name == "a" {
					return d.String(&p.A)
				}
				return d.Skip() // an unknown key: no type error
			})
		}, "type error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compareFails(t, tt.in, tt.decode)
			switch {
			case tt.fails == "" && got != "":
				t.Errorf("Compare failed a right decoder: %s", got)
			case tt.fails != "" && !strings.Contains(got, tt.fails):
				t.Errorf("Compare's failure %q, want one about %q", got, tt.fails)
			}
		})
	}
}

func TestMutate(t *testing.T) {
	line := []byte(`{"type":"x","n":[1,2],"o":{"a":"b"}}`)
	orig := append([]byte(nil), line...)
	a, b := rand.New(rand.NewSource(7)), rand.New(rand.NewSource(7))
	changed := 0
	for i := 0; i < 1000; i++ {
		m := Mutate(a, line, Edits)
		if !bytes.Equal(m, Mutate(b, line, Edits)) {
			t.Fatal("Mutate is not the same for the same seed")
		}
		if len(m) == 0 {
			t.Fatal("Mutate returned nothing")
		}
		if !bytes.Equal(m, line) {
			changed++
		}
	}
	if !bytes.Equal(line, orig) {
		t.Errorf("Mutate changed its input: %q", line)
	}
	if changed < 900 {
		t.Errorf("only %d of 1000 mutations changed the line", changed)
	}
	if m := Mutate(rand.New(rand.NewSource(1)), nil, Edits); len(m) == 0 {
		t.Error("Mutate of an empty line returned nothing")
	}
}
