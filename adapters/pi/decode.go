package pi

import (
	"reflect"

	"github.com/agentrun-dev/agentrun/internal/wirejson"
)

// The wire structs' decoders (internal/wirejson): the result of
// json.Unmarshal into the same structs, to the byte (decode_test.go holds
// them to it), in one pass over the line. A json.RawMessage is a slice of
// the line: valid while the line is, which is all Translate needs.

var (
	lineFields       = wirejson.FieldsOf(reflect.TypeFor[wireLine]())
	updateLineFields = wirejson.FieldsOf(reflect.TypeFor[updateLine]())
	updateFields     = wirejson.FieldsOf(reflect.TypeFor[wireUpdate]())
	messageFields    = wirejson.FieldsOf(reflect.TypeFor[wireMessage]())
	blockFields      = wirejson.FieldsOf(reflect.TypeFor[wireBlock]())
	usageFields      = wirejson.FieldsOf(reflect.TypeFor[wireUsage]())
	costFields       = wirejson.FieldsOf(reflect.TypeFor[wireCost]())
	toolArgsFields   = wirejson.FieldsOf(reflect.TypeFor[toolArgs]())
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
		case "id":
			return d.String(&l.ID)
		case "message":
			return wirejson.Ptr(d, &l.Message, decodeWireMessage)
		case "assistantMessageEvent":
			return wirejson.Ptr(d, &l.Event, decodeWireUpdate)
		case "toolCallId":
			return d.String(&l.ToolCallID)
		case "toolName":
			return d.String(&l.ToolName)
		case "args":
			return d.Raw(&l.Args)
		case "isError":
			return wirejson.Ptr(d, &l.IsError, (*wirejson.Decoder).Bool)
		case "success":
			return wirejson.Ptr(d, &l.Success, (*wirejson.Decoder).Bool)
		case "finalError":
			return d.String(&l.FinalError)
		}
		return d.Skip()
	})
}

// decodeUpdate is decodeLine for a message_update line.
func decodeUpdate(d *wirejson.Decoder, line []byte, u *updateLine) error {
	d.Reset(line)
	if err := decodeUpdateLine(d, u); err != nil {
		return err
	}
	return d.End()
}

func decodeUpdateLine(d *wirejson.Decoder, l *updateLine) error {
	return d.Object(updateLineFields, func(name string) error {
		if name == "assistantMessageEvent" {
			return wirejson.Ptr(d, &l.Event, decodeWireUpdate)
		}
		return d.Skip()
	})
}

func decodeWireUpdate(d *wirejson.Decoder, u *wireUpdate) error {
	return d.Object(updateFields, func(name string) error {
		switch name {
		case "type":
			return d.String(&u.Type)
		case "delta":
			return d.String(&u.Delta)
		}
		return d.Skip()
	})
}

func decodeWireMessage(d *wirejson.Decoder, m *wireMessage) error {
	return d.Object(messageFields, func(name string) error {
		switch name {
		case "role":
			return d.String(&m.Role)
		case "content":
			return d.Raw(&m.Content)
		case "model":
			return d.String(&m.Model)
		case "usage":
			return wirejson.Ptr(d, &m.Usage, decodeWireUsage)
		case "stopReason":
			return d.String(&m.StopReason)
		case "errorMessage":
			return d.String(&m.ErrorMessage)
		}
		return d.Skip()
	})
}

// decodeBlocks reads a message's content when it is blocks.
func decodeBlocks(d *wirejson.Decoder, bs *[]wireBlock) error {
	return wirejson.Slice(d, bs, decodeWireBlock)
}

func decodeWireBlock(d *wirejson.Decoder, b *wireBlock) error {
	return d.Object(blockFields, func(name string) error {
		switch name {
		case "type":
			return d.String(&b.Type)
		case "text":
			return d.String(&b.Text)
		}
		return d.Skip()
	})
}

func decodeWireUsage(d *wirejson.Decoder, u *wireUsage) error {
	return d.Object(usageFields, func(name string) error {
		switch name {
		case "input":
			return wirejson.Ptr(d, &u.Input, (*wirejson.Decoder).Int64)
		case "output":
			return wirejson.Ptr(d, &u.Output, (*wirejson.Decoder).Int64)
		case "cacheRead":
			return wirejson.Ptr(d, &u.CacheRead, (*wirejson.Decoder).Int64)
		case "cacheWrite":
			return wirejson.Ptr(d, &u.CacheWrite, (*wirejson.Decoder).Int64)
		case "cost":
			return wirejson.Ptr(d, &u.Cost, decodeWireCost)
		}
		return d.Skip()
	})
}

func decodeWireCost(d *wirejson.Decoder, c *wireCost) error {
	return d.Object(costFields, func(name string) error {
		if name == "total" {
			return wirejson.Ptr(d, &c.Total, (*wirejson.Decoder).Float64)
		}
		return d.Skip()
	})
}

func decodeToolArgs(d *wirejson.Decoder, a *toolArgs) error {
	return d.Object(toolArgsFields, func(name string) error {
		switch name {
		case "command":
			return d.String(&a.Command)
		case "path":
			return d.String(&a.Path)
		case "pattern":
			return d.String(&a.Pattern)
		}
		return d.Skip()
	})
}
