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
	// maybe has a bit for the length and first byte of every field's
	// folded name (ASCII first bytes, lengths below filterLen): an ASCII
	// key that folds to neither names no field, and most keys of a line are
	// not the adapter's (claude-code's lines spent 18% of translate looking
	// them up in both maps).
	maybe [filterLen][2]uint64
	// byLen are the names by their length (below filterLen): a few string
	// comparisons find a key's exact name faster than hashing it.
	byLen [filterLen][]string
}

// filterLen bounds the key lengths that maybe covers.
const filterLen = 64

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
		if len(n) < filterLen {
			f.byLen[len(n)] = append(f.byLen[len(n)], n)
		}
		// The first field of a folded name takes it, as in encoding/json.
		k := string(fold(nil, []byte(n)))
		if _, ok := f.folded[k]; !ok {
			f.folded[k] = n
		}
		if len(k) < filterLen && (k == "" || k[0] < utf8.RuneSelf) {
			c := firstByte(k)
			f.maybe[len(k)][c>>6] |= 1 << (c & 63)
		}
	}
	return f
}

// firstByte is s's first byte, 0 for "".
func firstByte[S string | []byte](s S) byte {
	if len(s) == 0 {
		return 0
	}
	return s[0]
}

// Name returns the name of the field that key stands for, or "": the
// field of that exact name, else the first whose name folds as key does.
func (f *Fields) Name(key []byte) string {
	if len(key) < filterLen {
		if isASCII(key) {
			// An ASCII key folds to its upper case, of the same length: a
			// field it stands for, exactly or folded, has a folded name
			// of that length and first byte.
			c := firstByte(key)
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			if f.maybe[len(key)][c>>6]&(1<<(c&63)) == 0 {
				return ""
			}
		}
		for _, n := range f.byLen[len(key)] {
			if n == string(key) {
				return n
			}
		}
	} else if n, ok := f.exact[string(key)]; ok {
		return n
	}
	var buf [64]byte
	return f.folded[string(fold(buf[:0], key))]
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
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
