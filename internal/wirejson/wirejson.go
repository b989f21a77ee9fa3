// Package wirejson decodes the JSON lines a runtime CLI writes into an
// adapter's wire structs in one pass, with the result encoding/json's
// Unmarshal gives for the same struct, to the byte: the same syntax accepted
// (RFC 8259, nesting at most 10000 deep), keys matched exactly and then
// case-insensitively as encoding/json folds them, null leaving plain values
// alone and clearing pointers, slices and maps, a value of the wrong kind
// skipped (a pointer to it allocated first, as encoding/json does), later
// duplicate keys decoding into what earlier ones left, invalid UTF-8 and
// lone surrogates replaced by U+FFFD.
//
// It exists because translate spends most of its time in encoding/json: a
// line is validated in full (checkValid) and then scanned again to decode
// it, and every nested json.RawMessage is validated once more when it is
// decoded. Here each byte is read once, and a RawMessage is a slice of the
// line (valid until the line's buffer is reused), not a copy.
//
// The decode functions of a struct are written by hand in its adapter
// (adapters/<runtime>/decode.go) with the helpers below; each
// adapter's differential tests hold them to encoding/json on real captures
// and on fuzzed input. A type error is not an error: the adapters ignore
// encoding/json's UnmarshalTypeError (the rest of the line still counts),
// so only a syntax error, which makes the line unusable, is one. Mismatch
// tells whether there was one, for the few places that drop a value
// encoding/json reported a type error for.
package wirejson

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrSyntax is the error for input that is not one JSON value.
var ErrSyntax = errors.New("wirejson: invalid JSON")

// maxDepth is encoding/json's limit of nested arrays and objects.
const maxDepth = 10000

// Decoder reads one JSON text.
type Decoder struct {
	data  []byte
	pos   int
	depth int
	// scratch holds a key that needed unquoting.
	scratch []byte
	// mismatch: a value was of the wrong kind or a number did not fit.
	mismatch bool
}

// Reset makes d read data from its start.
func (d *Decoder) Reset(data []byte) {
	d.data, d.pos, d.depth, d.mismatch = data, 0, 0, false
}

// Mismatch reports whether, since Reset, a value was skipped for being of
// the wrong kind for what it was decoded into, or a number left as it was
// for not fitting: whether json.Unmarshal of valid JSON into the same
// value would have returned an *UnmarshalTypeError.
func (d *Decoder) Mismatch() bool { return d.mismatch }

// wrongKind skips a value that is not null and not of the kind asked for.
func (d *Decoder) wrongKind() error {
	d.mismatch = true
	return d.Skip()
}

// skipNull skips a value that is not of the kind asked for: null is
// decoded into nothing, anything else is of the wrong kind.
func (d *Decoder) skipNull(c byte) error {
	if c == 'n' {
		return d.literal("null")
	}
	return d.wrongKind()
}

// End checks that only whitespace is left after the value.
func (d *Decoder) End() error {
	d.ws()
	if d.pos != len(d.data) {
		return ErrSyntax
	}
	return nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func (d *Decoder) ws() {
	for d.pos < len(d.data) && isSpace(d.data[d.pos]) {
		d.pos++
	}
}

// peek returns the first byte of the next value (0 at the end).
func (d *Decoder) peek() byte {
	d.ws()
	if d.pos < len(d.data) {
		return d.data[d.pos]
	}
	return 0
}

// Skip reads (and validates) the next value.
func (d *Decoder) Skip() error {
	switch c := d.peek(); c {
	case '{':
		return d.skipObject()
	case '[':
		return d.skipArray()
	case '"':
		return d.skipString()
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	default:
		_, err := d.number()
		return err
	}
}

func (d *Decoder) enter() error {
	d.depth++
	if d.depth > maxDepth {
		return ErrSyntax
	}
	d.pos++
	return nil
}

func (d *Decoder) skipObject() error {
	if err := d.enter(); err != nil {
		return err
	}
	for n := 0; ; n++ {
		more, err := d.member(n)
		if err != nil || !more {
			return err
		}
		if err := d.skipString(); err != nil {
			return err
		}
		if err := d.colon(); err != nil {
			return err
		}
		if err := d.Skip(); err != nil {
			return err
		}
	}
}

// member reads what comes before the n-th member of an object: '}' (no
// more members, the object is left) or, after the first, a ','. It leaves
// d at the member's key.
func (d *Decoder) member(n int) (bool, error) {
	c := d.peek()
	if c == '}' {
		d.pos++
		d.depth--
		return false, nil
	}
	if n > 0 {
		if c != ',' {
			return false, ErrSyntax
		}
		d.pos++
		c = d.peek()
	}
	if c != '"' {
		return false, ErrSyntax
	}
	return true, nil
}

// element is member for arrays.
func (d *Decoder) element(n int) (bool, error) {
	c := d.peek()
	if c == ']' && n == 0 {
		d.pos++
		d.depth--
		return false, nil
	}
	if n > 0 {
		switch c {
		case ']':
			d.pos++
			d.depth--
			return false, nil
		case ',':
			d.pos++
		default:
			return false, ErrSyntax
		}
	}
	return true, nil
}

func (d *Decoder) colon() error {
	if d.peek() != ':' {
		return ErrSyntax
	}
	d.pos++
	return nil
}

func (d *Decoder) skipArray() error {
	if err := d.enter(); err != nil {
		return err
	}
	for n := 0; ; n++ {
		more, err := d.element(n)
		if err != nil || !more {
			return err
		}
		if err := d.Skip(); err != nil {
			return err
		}
	}
}

func (d *Decoder) literal(word string) error {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		return ErrSyntax
	}
	d.pos += len(word)
	return nil
}

// number reads a number and returns its text.
func (d *Decoder) number() ([]byte, error) {
	start, i, data := d.pos, d.pos, d.data
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && '1' <= data[i] && data[i] <= '9':
		i = skipDigits(data, i+1)
	default:
		return nil, ErrSyntax
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || !isDigit(data[i]) {
			return nil, ErrSyntax
		}
		i = skipDigits(data, i+1)
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return nil, ErrSyntax
		}
		i = skipDigits(data, i+1)
	}
	d.pos = i
	return data[start:i], nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// plain marks the bytes a string holds as they are: not a quote, a
// backslash, a control character or the start of a multi-byte sequence.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipString reads a string without decoding it.
func (d *Decoder) skipString() error {
	data := d.data
	i := d.pos + 1
	for {
		for i < len(data) && (plain[data[i]] || data[i] >= utf8.RuneSelf) {
			i++
		}
		if i >= len(data) {
			return ErrSyntax
		}
		switch data[i] {
		case '"':
			d.pos = i + 1
			return nil
		case '\\':
			n, err := escapeLen(data[i:])
			if err != nil {
				return err
			}
			i += n
		default: // a control character
			return ErrSyntax
		}
	}
}

// escapeLen validates the escape at the start of s and returns its length.
func escapeLen(s []byte) (int, error) {
	if len(s) < 2 {
		return 0, ErrSyntax
	}
	switch s[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
		if getu4(s) < 0 {
			return 0, ErrSyntax
		}
		return 6, nil
	}
	return 0, ErrSyntax
}

// str reads a string and returns its decoded bytes: a slice of the input
// when nothing needed decoding, else of buf (appended to from its length 0).
func (d *Decoder) str(buf []byte) ([]byte, []byte, error) {
	data := d.data
	start := d.pos + 1
	i := start
	// The fast path: printable ASCII and valid UTF-8 only.
	for i < len(data) {
		c := data[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			break
		}
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	if i < len(data) && data[i] == '"' {
		d.pos = i + 1
		return data[start:i], buf, nil
	}
	b := append(buf[:0], data[start:i]...)
	for {
		if i >= len(data) {
			return nil, buf, ErrSyntax
		}
		c := data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return b, b, nil
		case c == '\\':
			n, err := escapeLen(data[i:])
			if err != nil {
				return nil, buf, err
			}
			switch data[i+1] {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := getu4(data[i:])
				if utf16.IsSurrogate(rr) {
					rr1 := getu4(data[i+6:])
					if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
						// A valid pair.
						b = utf8.AppendRune(b, dec)
						i += 12
						continue
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
			default: // '"', '\\', '/'
				b = append(b, data[i+1])
			}
			i += n
		case c < ' ':
			return nil, buf, ErrSyntax
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			// Invalid UTF-8 becomes U+FFFD, one for each byte.
			r, size := utf8.DecodeRune(data[i:])
			b = utf8.AppendRune(b, r)
			i += size
		}
	}
}

func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c = c - '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// object reads an object whose '{' is next, calling each at every
// member's value with its key (valid until each returns).
func (d *Decoder) object(each func(key []byte) error) error {
	if err := d.enter(); err != nil {
		return err
	}
	for n := 0; ; n++ {
		more, err := d.member(n)
		if err != nil || !more {
			return err
		}
		var key []byte
		key, d.scratch, err = d.str(d.scratch)
		if err != nil {
			return err
		}
		if err := d.colon(); err != nil {
			return err
		}
		if err := each(key); err != nil {
			return err
		}
	}
}

// Object reads an object into a struct whose fields are fields: member is
// called at each value with the name of its key's field; the value of a
// key that names no field is skipped. A null leaves the struct as it is;
// any other value is skipped.
func (d *Decoder) Object(fields *Fields, member func(name string) error) error {
	switch d.peek() {
	case '{':
	case 'n':
		return d.literal("null")
	default:
		return d.wrongKind()
	}
	return d.object(func(key []byte) error {
		if name := fields.Name(key); name != "" {
			return member(name)
		}
		return d.Skip()
	})
}

// Map reads an object into a map: each value is decoded into a zero T and
// stored under its key, replacing what a duplicate key stored before. A
// null makes the map nil; any other value is skipped.
func Map[T any](d *Decoder, m *map[string]T, elem func(*Decoder, *T) error) error {
	switch d.peek() {
	case '{':
	case 'n':
		*m = nil
		return d.literal("null")
	default:
		return d.wrongKind()
	}
	if *m == nil {
		*m = map[string]T{}
	}
	return d.object(func(key []byte) error {
		k := string(key)
		var v T
		if err := elem(d, &v); err != nil {
			return err
		}
		(*m)[k] = v
		return nil
	})
}

// Slice reads an array into a slice, decoding each element into what the
// slice's array holds there (as encoding/json does when a key repeats). A
// null makes the slice nil, an empty array an empty slice; any other value
// is skipped.
func Slice[T any](d *Decoder, s *[]T, elem func(*Decoder, *T) error) error {
	switch d.peek() {
	case '[':
	case 'n':
		*s = nil
		return d.literal("null")
	default:
		return d.wrongKind()
	}
	if err := d.enter(); err != nil {
		return err
	}
	v := *s
	i := 0
	for ; ; i++ {
		more, err := d.element(i)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		switch {
		case i < len(v):
		case i < cap(v):
			v = v[:i+1]
		default:
			var zero T
			v = append(v, zero)
		}
		if err := elem(d, &v[i]); err != nil {
			return err
		}
	}
	if i == 0 {
		v = []T{}
	}
	*s = v[:i]
	return nil
}

// Ptr reads a value into what p points to, allocating it when p is nil
// (also for a value of the wrong kind, as encoding/json does). A null makes
// p nil.
func Ptr[T any](d *Decoder, p **T, decode func(*Decoder, *T) error) error {
	if d.peek() == 'n' {
		*p = nil
		return d.literal("null")
	}
	if *p == nil {
		*p = new(T)
	}
	return decode(d, *p)
}

// String reads a string; null and values of other kinds leave s as it is.
func (d *Decoder) String(s *string) error {
	if c := d.peek(); c != '"' {
		return d.skipNull(c)
	}
	var b []byte
	var err error
	b, d.scratch, err = d.str(d.scratch)
	if err != nil {
		return err
	}
	*s = string(b)
	return nil
}

// Bool reads true or false; null and values of other kinds leave b as it is.
func (d *Decoder) Bool(b *bool) error {
	switch d.peek() {
	case 't':
		*b = true
		return d.literal("true")
	case 'f':
		*b = false
		return d.literal("false")
	case 'n':
		return d.literal("null")
	}
	return d.wrongKind()
}

// Int64 reads an integer; a number that is not an int64 (a fraction, an
// exponent, out of range), null and values of other kinds leave n as it is.
func (d *Decoder) Int64(n *int64) error {
	c := d.peek()
	if c != '-' && !isDigit(c) {
		return d.skipNull(c)
	}
	item, err := d.number()
	if err != nil {
		return err
	}
	if v, ok := parseInt(item); ok {
		*n = v
	} else {
		d.mismatch = true
	}
	return nil
}

// Int is Int64 for an int: a number out of int's range leaves n as it is.
func (d *Decoder) Int(n *int) error {
	v := int64(*n)
	if err := d.Int64(&v); err != nil {
		return err
	}
	if int64(int(v)) == v {
		*n = int(v)
	} else {
		d.mismatch = true
	}
	return nil
}

// parseInt is strconv.ParseInt(item, 10, 64) without the string.
func parseInt(item []byte) (int64, bool) {
	if len(item) > 0 && len(item) < 19 {
		neg := item[0] == '-'
		digits := item
		if neg {
			digits = item[1:]
		}
		var v int64
		for _, c := range digits {
			if !isDigit(c) {
				return 0, false
			}
			v = v*10 + int64(c-'0')
		}
		if len(digits) == 0 {
			return 0, false
		}
		if neg {
			v = -v
		}
		return v, true
	}
	v, err := strconv.ParseInt(string(item), 10, 64)
	return v, err == nil
}

// Float64 reads a number; one out of float64's range, null and values of
// other kinds leave f as it is.
func (d *Decoder) Float64(f *float64) error {
	c := d.peek()
	if c != '-' && !isDigit(c) {
		return d.skipNull(c)
	}
	item, err := d.number()
	if err != nil {
		return err
	}
	if v, err := strconv.ParseFloat(string(item), 64); err == nil {
		*f = v
	} else {
		d.mismatch = true
	}
	return nil
}

// Raw reads any value (null too) as its bytes: a slice of the input, valid
// as long as the input is (json.RawMessage would copy).
func (d *Decoder) Raw(r *json.RawMessage) error {
	d.ws()
	start := d.pos
	if err := d.Skip(); err != nil {
		return err
	}
	*r = d.data[start:d.pos:d.pos]
	return nil
}

// skipDigits is the index of the first byte from i on that is not a digit.
func skipDigits(data []byte, i int) int {
	for i < len(data) && isDigit(data[i]) {
		i++
	}
	return i
}
