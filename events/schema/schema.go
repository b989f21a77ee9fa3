// Package schema validates schema-1 events against the project's JSON Schema,
// docs/events.schema.json (draft 2020-12), with
// github.com/santhosh-tekuri/jsonschema. The schema checks one event at a
// time: required fields, types, null versus value, enums and the rules
// within an event. The rules between events and the field order are
// package contract's.
package schema

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/agentrun-dev/agentrun/docs"
)

// ID is the schema's $id.
const ID = "https://agentrun.dev/schemas/events-1.schema.json"

// JSON is the schema document itself (docs/events.schema.json).
func JSON() []byte { return bytes.Clone(docs.EventsSchema) }

var printer = message.NewPrinter(language.English)

var (
	once     sync.Once
	compiled *jsonschema.Schema
	errLoad  error
)

// Compiled returns the compiled schema. The schema is part of the binary,
// so an error here is a bug in docs/events.schema.json.
func Compiled() (*jsonschema.Schema, error) {
	once.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(docs.EventsSchema))
		if err != nil {
			errLoad = fmt.Errorf("docs/events.schema.json: %w", err)
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource(ID, doc); err != nil {
			errLoad = fmt.Errorf("docs/events.schema.json: %w", err)
			return
		}
		compiled, errLoad = c.Compile(ID)
	})
	return compiled, errLoad
}

// Validate checks one event, the JSON text of one line. It returns nil when
// the event is valid, else one message per violation, each naming the
// field ("/usage/by_model/x/cost_usd: ..."), sorted.
func Validate(line []byte) []string {
	sch, err := Compiled()
	if err != nil {
		return []string{err.Error()}
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		return []string{fmt.Sprintf("not JSON: %v", err)}
	}
	err = sch.Validate(v)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []string{err.Error()}
	}
	seen := map[string]bool{}
	var out []string
	for _, leaf := range leaves(ve) {
		msg := location(leaf.InstanceLocation) + ": " + leaf.ErrorKind.LocalizedString(printer)
		if !seen[msg] {
			seen[msg] = true
			out = append(out, msg)
		}
	}
	sort.Strings(out)
	return out
}

// leaves are the innermost causes: the violations themselves, without the
// "allOf failed" and "then failed" that lead to them.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// location writes an instance location as a JSON pointer, "(event)" for the
// event itself.
func location(tokens []string) string {
	if len(tokens) == 0 {
		return "(event)"
	}
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}
