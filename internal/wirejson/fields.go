package wirejson

import (
	"fmt"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Fields are the JSON names of a struct's fields: Name finds the field a
// key stands for as encoding/json does.
type Fields struct {
	exact  map[string]string
	folded map[string]string
}

// FieldsOf returns the fields of struct type t from their json tags, as
// encoding/json names them. It is for the flat structs of wire formats and
// panics on what it does not handle (embedded fields, options other than
// omitempty), which a caller meets when it starts.
func FieldsOf(t reflect.Type) *Fields {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if sf.Anonymous || !sf.IsExported() {
			panic(fmt.Sprintf("wirejson: %v.%s: embedded or unexported fields are not handled", t, sf.Name))
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if opts != "" && opts != "omitempty" {
			panic(fmt.Sprintf("wirejson: %v.%s: option %q is not handled", t, sf.Name, opts))
		}
		if name == "" {
			name = sf.Name
		}
		names = append(names, name)
	}
	return NewFields(names...)
}

// NewFields returns the fields named names, in declaration order.
func NewFields(names ...string) *Fields {
	f := &Fields{exact: map[string]string{}, folded: map[string]string{}}
	for _, n := range names {
		f.exact[n] = n
		// The first field of a folded name takes it, as in encoding/json.
		k := string(fold(nil, []byte(n)))
		if _, ok := f.folded[k]; !ok {
			f.folded[k] = n
		}
	}
	return f
}

// Name returns the name of the field that key stands for, or "": the
// field of that exact name, else the first whose name folds as key does.
func (f *Fields) Name(key []byte) string {
	if n, ok := f.exact[string(key)]; ok {
		return n
	}
	var buf [64]byte
	return f.folded[string(fold(buf[:0], key))]
}

// fold is encoding/json's foldName: ASCII letters upper-cased, every other
// rune mapped to the upper case of its lower case (so 'ſ' folds to 'S' and
// the Kelvin sign to 'K'), invalid UTF-8 to U+FFFD.
func fold(out, in []byte) []byte {
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		out = utf8.AppendRune(out, unicode.ToUpper(unicode.ToLower(r)))
		i += n
	}
	return out
}
