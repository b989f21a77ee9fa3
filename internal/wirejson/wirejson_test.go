package wirejson

import (
	"encoding/json"
	"errors"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// The decoders here are only worth having if they give what encoding/json
// gives. These tests hold them to it on a struct with every kind of field
// the helpers handle, on hand-picked edge cases and on seeded mutations of
// them (and FuzzDecode on whatever the fuzzer finds): the same syntax
// errors, the same values, and Mismatch exactly when encoding/json reports
// a type error.

type inner struct {
	A string `json:"a"`
	N *int64 `json:"n"`
}

type all struct {
	S  string            `json:"s"`
	SP *string           `json:"sp"`
	B  bool              `json:"b"`
	BP *bool             `json:"bp"`
	I  int64             `json:"i"`
	IP *int64            `json:"ip"`
	N  int               `json:"num"`
	F  float64           `json:"f"`
	FP *float64          `json:"fp"`
	R  json.RawMessage   `json:"r"`
	SS []string          `json:"ss"`
	IS []inner           `json:"is"`
	M  map[string]inner  `json:"m"`
	MS map[string]string `json:"ms"`
	P  *inner            `json:"p"`
	V  inner             `json:"v"`
	// Names that fold alike: each exact name finds its field, any other
	// spelling the first.
	Ab string `json:"Ab"`
	AB string `json:"aB"`
	// "K" is matched by the Kelvin sign, "s" by the long s.
	K    string `json:"k"`
	Skip string `json:"-"`
	// Untagged: its Go name.
	Untagged string
}

var (
	allFields   = FieldsOf(reflect.TypeFor[all]())
	innerFields = FieldsOf(reflect.TypeFor[inner]())
)

func decodeInner(d *Decoder, x *inner) error {
	return d.Object(innerFields, func(name string) error {
		switch name {
		case "a":
			return d.String(&x.A)
		case "n":
			return Ptr(d, &x.N, (*Decoder).Int64)
		}
		return d.Skip()
	})
}

func decodeAll(d *Decoder, x *all) error {
	return d.Object(allFields, func(name string) error {
		switch name {
		case "s":
			return d.String(&x.S)
		case "sp":
			return Ptr(d, &x.SP, (*Decoder).String)
		case "b":
			return d.Bool(&x.B)
		case "bp":
			return Ptr(d, &x.BP, (*Decoder).Bool)
		case "i":
			return d.Int64(&x.I)
		case "ip":
			return Ptr(d, &x.IP, (*Decoder).Int64)
		case "num":
			return d.Int(&x.N)
		case "f":
			return d.Float64(&x.F)
		case "fp":
			return Ptr(d, &x.FP, (*Decoder).Float64)
		case "r":
			return d.Raw(&x.R)
		case "ss":
			return Slice(d, &x.SS, (*Decoder).String)
		case "is":
			return Slice(d, &x.IS, decodeInner)
		case "m":
			return Map(d, &x.M, decodeInner)
		case "ms":
			return Map(d, &x.MS, (*Decoder).String)
		case "p":
			return Ptr(d, &x.P, decodeInner)
		case "v":
			return decodeInner(d, &x.V)
		case "Ab":
			return d.String(&x.Ab)
		case "aB":
			return d.String(&x.AB)
		case "k":
			return d.String(&x.K)
		case "Untagged":
			return d.String(&x.Untagged)
		}
		return d.Skip()
	})
}

// compare decodes in with both and reports the first difference.
func compare(t *testing.T, in []byte) {
	t.Helper()
	var want all
	err := json.Unmarshal(in, &want)
	var syntax *json.SyntaxError
	wantSyntax := errors.As(err, &syntax)
	if err != nil && !wantSyntax {
		var typeErr *json.UnmarshalTypeError
		if !errors.As(err, &typeErr) {
			t.Fatalf("%q: encoding/json: unexpected error %v", in, err)
		}
	}
	var got all
	var d Decoder
	d.Reset(in)
	gotErr := decodeAll(&d, &got)
	if gotErr == nil {
		gotErr = d.End()
	}
	if wantSyntax != (gotErr != nil) {
		t.Fatalf("%q: syntax error: encoding/json %v, wirejson %v", in, err, gotErr)
	}
	if wantSyntax {
		return
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%q:\nencoding/json %#v\nwirejson      %#v", in, want, got)
	}
	if wantType := err != nil; wantType != d.Mismatch() {
		t.Fatalf("%q: type error: encoding/json %v, wirejson Mismatch %v", in, err, d.Mismatch())
	}
}

// cases are edge cases of syntax and of encoding/json's decoding rules.
var cases = []string{
	``, ` `, `{}`, ` {} `, "{}\n", `{`, `}`, `{}}`, `{} {}`, `[]`, `null`, `"x"`, `1`, `true`,
	`{"s":"a"}`, `{"s":"a",}`, `{,"s":"a"}`, `{"s" "a"}`, `{"s":}`, `{"s":"a" "b"}`, `{'s':1}`,
	`{"s":"a\"b\\c\/d\b\f\n\r\t"}`, `{"s":"\'"}`, `{"s":"\x"}`, `{"s":"\u00e9\u0041"}`, `{"s":"\u00G0"}`,
	`{"s":"\ud83d\ude00"}`, `{"s":"\ud83d"}`, `{"s":"\ud83dx"}`, `{"s":"\ude00\ud83d"}`, `{"s":"\ud83d\u0041"}`,
	`{"s":"\ud83d\ud83d\ude00"}`, `{"s":"\u0000"}`, "{\"s\":\"a\x01\"}", "{\"s\":\"a\x7f\"}",
	"{\"s\":\"\xff\"}", "{\"s\":\"\xc3\xa9\"}", "{\"s\":\"\xc3\"}", "{\"s\":\"\xed\xa0\x80\"}", "{\"s\":\"\xef\xbf\xbd\"}",
	"{\"s\":\"\xf4\x90\x80\x80\"}", "{\"s\":\"a\xffb\\n\xfe\"}",
	`{"s":1}`, `{"s":null}`, `{"s":"a","s":null}`, `{"s":"a","s":2}`, `{"s":["x"]}`, `{"s":{"a":1}}`,
	`{"S":"a"}`, `{"SP":"a"}`, `{"ſ":"a","s":"b"}`, "{\"\u017f\":\"long s\"}", "{\"\u212a\":\"kelvin\"}", `{"K":"k"}`,
	`{"ab":"x"}`, `{"AB":"x"}`, `{"Ab":"x","aB":"y"}`, `{"aB":"y","ab":"z"}`, `{"untagged":"u"}`, `{"Untagged":"u"}`,
	`{"Skip":"no"}`, `{"-":"no"}`, "{\"s\xff\":\"a\"}", `{"s\u0000":"a"}`, `{"\u0073":"escaped key"}`,
	`{"sp":"a"}`, `{"sp":null}`, `{"sp":1}`, `{"sp":"a","sp":null}`, `{"sp":null,"sp":"b"}`, `{"sp":{}}`, `{"sp":[]}`,
	`{"b":true}`, `{"b":false}`, `{"b":tru}`, `{"b":truex}`, `{"b":nul}`, `{"b":"true"}`, `{"b":1}`, `{"b":true,"b":null}`,
	`{"bp":true}`, `{"bp":"x"}`, `{"bp":null}`, `{"bp":false,"bp":7}`,
	`{"i":1}`, `{"i":-0}`, `{"i":-1}`, `{"i":01}`, `{"i":1.}`, `{"i":.5}`, `{"i":1.5}`, `{"i":1e2}`, `{"i":1E+2}`, `{"i":1e}`,
	`{"i":-}`, `{"i":+1}`, `{"i":9223372036854775807}`, `{"i":9223372036854775808}`, `{"i":-9223372036854775808}`,
	`{"i":-9223372036854775809}`, `{"i":123456789012345678}`, `{"i":1234567890123456789}`, `{"i":"1"}`, `{"i":5,"i":"x"}`,
	`{"ip":1}`, `{"ip":"1"}`, `{"ip":1.5}`, `{"ip":null}`, `{"ip":true}`, `{"ip":{}}`, `{"ip":[1]}`, `{"ip":3,"ip":1.5}`,
	`{"num":42}`, `{"num":1e1}`, `{"num":5,"num":0}`, `{"num":5,"num":"x"}`, `{"num":-9223372036854775808}`, `{"f":1.5}`, `{"f":-0.0}`, `{"f":1e400}`, `{"f":1e-400}`, `{"f":0.1e1}`, `{"f":"1"}`,
	`{"fp":2.5}`, `{"fp":1e999}`, `{"fp":null}`, `{"fp":"x"}`, `{"f":1e308,"f":-1e309}`,
	`{"r":{"a":[1,2,{"b":null}]}}`, `{"r": [ 1 , 2 ] }`, `{"r":null}`, `{"r":"x"}`, `{"r":1,"r":2}`, `{"r":{"a":}}`,
	`{"ss":["a","b"]}`, `{"ss":[]}`, `{"ss":null}`, `{"ss":"a"}`, `{"ss":[1,"b",null]}`, `{"ss":["a","b","c"],"ss":["x"]}`,
	`{"ss":["a","b","c"],"ss":["x"],"ss":[1,2]}`, `{"ss":["a"],"ss":[]}`, `{"ss":["a",]}`, `{"ss":[,"a"]}`, `{"ss":[`,
	`{"is":[{"a":"x","n":1},{"a":"y"}]}`, `{"is":[{"a":"x"},{"n":2}],"is":[{"n":3}]}`, `{"is":[1,{"a":"z"}]}`, `{"is":{}}`,
	`{"m":{"k1":{"a":"x"},"k2":{"n":1}}}`, `{"m":{"k":{"a":"x"},"k":{"n":1}}}`, `{"m":null}`, `{"m":{"k":1}}`, `{"m":[]}`,
	`{"m":{"k":{"a":"x"}},"m":{"j":{"a":"y"}}}`, "{\"m\":{\"\xff\":{}}}", `{"m":{"\u00e9":{}}}`, `{"m":{"k":null}}`,
	`{"ms":{"a":"x","b":1,"c":null}}`, `{"p":{"a":"x"}}`, `{"p":null}`, `{"p":1}`, `{"p":"x"}`, `{"p":[]}`,
	`{"p":{"a":"x"},"p":{"n":1}}`, `{"p":{"a":"x"},"p":null,"p":{"n":1}}`, `{"v":{"a":"x"}}`, `{"v":null}`, `{"v":1}`,
	`{"v":{"a":"x"},"v":{"n":2}}`, `{"x":{"y":[1,2,{"z":"w"}]},"s":"after"}`, `{"x":[[[[[]]]]],"s":"a"}`,
	`{"is":[null,{"a":"x"}]}`, `{"ms":{"a":null}}`, `{"p":{"n":"x"}}`, `{"v":[]}`, `{"v":"x"}`, `{"ss":[null]}`,
	`{"x":"any","y":[1,{"z":true}]}`, `{"num":1.0}`, `{"num":-0}`, `{"i":1e-400}`, `{"f":1e-400}`, `{"fp":-1e400}`,
	`{"x":tru}`, `{"x":[1 2]}`, `{"x":{"a" 1}}`, `{"x":"unterminated}`, `{"s":"a"}x`, `{"s":"a"}` + "\t\r\n ",
	"{ \"s\" :\t\"a\" ,\n\"b\"\r: true }", `{"x":-01}`, `{"x":1.e1}`, `{"x":0x10}`, `{"x":Infinity}`, `{"x":NaN}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	`{"x":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	`{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
	`{"x":` + strings.Repeat(`{"a":`, 9999) + `1` + strings.Repeat("}", 9999) + `}`,
	`{"x":` + strings.Repeat(`{"a":`, 10000) + `1` + strings.Repeat("}", 10000) + `}`,
}

func TestMatchesEncodingJSON(t *testing.T) {
	for _, c := range cases {
		compare(t, []byte(c))
	}
}

// TestMutations compares the two on seeded random edits of the cases: cut,
// byte changed, byte inserted, pieces of two cases spliced.
func TestMutations(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alphabet := []byte("{}[]\":,\\ntrfuel0123456789-+.eE \t\xff\xc3\xa9ud8")
	for i := 0; i < 200000; i++ {
		in := []byte(cases[rng.Intn(len(cases))])
		if len(in) > 200 {
			continue
		}
		for n := rng.Intn(3) + 1; n > 0; n-- {
			p := 0
			if len(in) > 0 {
				p = rng.Intn(len(in) + 1)
			}
			switch rng.Intn(4) {
			case 0:
				if p < len(in) {
					in = append(in[:p:p], in[p+1:]...)
				}
			case 1:
				if p < len(in) {
					in[p] = alphabet[rng.Intn(len(alphabet))]
				}
			case 2:
				in = append(in[:p:p], append([]byte{alphabet[rng.Intn(len(alphabet))]}, in[p:]...)...)
			case 3:
				other := cases[rng.Intn(len(cases))]
				if len(other) < 200 {
					q := rng.Intn(len(other) + 1)
					in = append(in[:p:p], other[q:]...)
				}
			}
		}
		compare(t, in)
	}
}

func FuzzDecode(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, in []byte) { compare(t, in) })
}
