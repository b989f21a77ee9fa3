package codex

import (
	"reflect"

	"github.com/agentrun-dev/agentrun/internal/wirejson"
)

// The wire structs' decoders (internal/wirejson): the result of
// json.Unmarshal into the same structs, to the byte (decode_test.go holds
// them to it), in one pass over the line. A json.RawMessage is a slice of
// the line: valid while the line is, which is all Translate needs.

var (
	lineFields   = wirejson.FieldsOf(reflect.TypeFor[wireLine]())
	itemFields   = wirejson.FieldsOf(reflect.TypeFor[wireItem]())
	changeFields = wirejson.FieldsOf(reflect.TypeFor[wireChange]())
	errorFields  = wirejson.FieldsOf(reflect.TypeFor[wireError]())
	usageFields  = wirejson.FieldsOf(reflect.TypeFor[wireUsage]())
)

// decodeLine decodes one line into l; an error means the line is not JSON
// (and l is to be dropped). It calls decodeWireLine directly: through a
// function value l would escape to the heap, an allocation for every line.
func decodeLine(d *wirejson.Decoder, line []byte, l *wireLine) error {
	d.Reset(line)
	if err := decodeWireLine(d, l); err != nil {
		return err
	}
	return d.End()
}

func decodeWireLine(d *wirejson.Decoder, l *wireLine) error {
	return d.Object(lineFields, func(name string) error {
		switch name {
		case "type":
			return d.String(&l.Type)
		case "thread_id":
			return d.String(&l.ThreadID)
		case "item":
			return wirejson.Ptr(d, &l.Item, decodeWireItem)
		case "usage":
			return wirejson.Ptr(d, &l.Usage, decodeWireUsage)
		case "error":
			return wirejson.Ptr(d, &l.Error, decodeWireError)
		case "message":
			return d.String(&l.Message)
		}
		return d.Skip()
	})
}

func decodeWireItem(d *wirejson.Decoder, it *wireItem) error {
	return d.Object(itemFields, func(name string) error {
		switch name {
		case "id":
			return d.String(&it.ID)
		case "type":
			return d.String(&it.Type)
		case "text":
			return d.String(&it.Text)
		case "command":
			return d.String(&it.Command)
		case "exit_code":
			return wirejson.Ptr(d, &it.ExitCode, (*wirejson.Decoder).Int)
		case "status":
			return d.String(&it.Status)
		case "changes":
			return wirejson.Slice(d, &it.Changes, decodeWireChange)
		case "server":
			return d.String(&it.Server)
		case "tool":
			return d.String(&it.Tool)
		case "arguments":
			return d.Raw(&it.Arguments)
		case "error":
			return wirejson.Ptr(d, &it.Error, decodeWireError)
		case "query":
			return d.String(&it.Query)
		}
		return d.Skip()
	})
}

func decodeWireChange(d *wirejson.Decoder, c *wireChange) error {
	return d.Object(changeFields, func(name string) error {
		switch name {
		case "path":
			return d.String(&c.Path)
		case "kind":
			return d.String(&c.Kind)
		}
		return d.Skip()
	})
}

func decodeWireError(d *wirejson.Decoder, e *wireError) error {
	return d.Object(errorFields, func(name string) error {
		if name == "message" {
			return d.String(&e.Message)
		}
		return d.Skip()
	})
}

func decodeWireUsage(d *wirejson.Decoder, u *wireUsage) error {
	return d.Object(usageFields, func(name string) error {
		switch name {
		case "input_tokens":
			return wirejson.Ptr(d, &u.InputTokens, (*wirejson.Decoder).Int64)
		case "cached_input_tokens":
			return wirejson.Ptr(d, &u.CachedInputTokens, (*wirejson.Decoder).Int64)
		case "cache_write_input_tokens":
			return wirejson.Ptr(d, &u.CacheWriteInputTokens, (*wirejson.Decoder).Int64)
		case "output_tokens":
			return wirejson.Ptr(d, &u.OutputTokens, (*wirejson.Decoder).Int64)
		}
		return d.Skip()
	})
}
