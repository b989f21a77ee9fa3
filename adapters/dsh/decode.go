package dsh

import (
	"reflect"

	"github.com/agentrun-dev/agentrun/internal/wirejson"
)

// The wire structs' decoders (internal/wirejson): the result of
// json.Unmarshal into the same structs, to the byte (decode_test.go holds
// them to it), in one pass over the line. A json.RawMessage is a slice of
// the line: valid while the line is, which is all Translate needs.

var (
	lineFields     = wirejson.FieldsOf(reflect.TypeFor[wireLine]())
	headerFields   = wirejson.FieldsOf(reflect.TypeFor[wireHeader]())
	eventFields    = wirejson.FieldsOf(reflect.TypeFor[wireEvent]())
	dataFields     = wirejson.FieldsOf(reflect.TypeFor[wireData]())
	sourceFields   = wirejson.FieldsOf(reflect.TypeFor[wireSource]())
	chunkFields    = wirejson.FieldsOf(reflect.TypeFor[wireChunk]())
	messageFields  = wirejson.FieldsOf(reflect.TypeFor[wireMessage]())
	blockFields    = wirejson.FieldsOf(reflect.TypeFor[wireBlock]())
	reasonFields   = wirejson.FieldsOf(reflect.TypeFor[wireReason]())
	failureFields  = wirejson.FieldsOf(reflect.TypeFor[wireFailure]())
	usageFields    = wirejson.FieldsOf(reflect.TypeFor[wireUsage]())
	toolArgsFields = wirejson.FieldsOf(reflect.TypeFor[toolArgs]())
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
		case "agentrun":
			return d.String(&l.Agentrun)
		case "header":
			return wirejson.Ptr(d, &l.Header, decodeWireHeader)
		case "session":
			return d.String(&l.Session)
		case "event":
			return wirejson.Ptr(d, &l.Event, decodeWireEvent)
		case "text":
			return wirejson.Ptr(d, &l.Text, (*wirejson.Decoder).String)
		}
		return d.Skip()
	})
}

func decodeWireHeader(d *wirejson.Decoder, h *wireHeader) error {
	return d.Object(headerFields, func(name string) error {
		switch name {
		case "id":
			return d.String(&h.ID)
		case "parentSession":
			return d.Raw(&h.ParentSession)
		case "delegationDepth":
			return d.Int(&h.DelegationDepth)
		}
		return d.Skip()
	})
}

func decodeWireEvent(d *wirejson.Decoder, e *wireEvent) error {
	return d.Object(eventFields, func(name string) error {
		switch name {
		case "type":
			return d.String(&e.Type)
		case "data":
			return decodeWireData(d, &e.Data)
		}
		return d.Skip()
	})
}

func decodeWireData(d *wirejson.Decoder, x *wireData) error {
	return d.Object(dataFields, func(name string) error {
		switch name {
		case "turn":
			return d.Int(&x.Turn)
		case "step":
			return d.Int(&x.Step)
		case "content":
			return d.Raw(&x.Content)
		case "source":
			return wirejson.Ptr(d, &x.Source, decodeWireSource)
		case "chunk":
			return wirejson.Ptr(d, &x.Chunk, decodeWireChunk)
		case "message":
			return wirejson.Ptr(d, &x.Message, decodeWireMessage)
		case "usage":
			return wirejson.Ptr(d, &x.Usage, decodeWireUsage)
		case "callId":
			return d.String(&x.CallID)
		case "name":
			return d.String(&x.Name)
		case "arguments":
			return d.String(&x.Arguments)
		case "model":
			return d.String(&x.Model)
		case "reason":
			return wirejson.Ptr(d, &x.Reason, decodeWireReason)
		}
		return d.Skip()
	})
}

func decodeWireSource(d *wirejson.Decoder, s *wireSource) error {
	return d.Object(sourceFields, func(name string) error {
		switch name {
		case "kind":
			return d.String(&s.Kind)
		case "model":
			return d.String(&s.Model)
		case "callId":
			return d.String(&s.CallID)
		}
		return d.Skip()
	})
}

func decodeWireChunk(d *wirejson.Decoder, c *wireChunk) error {
	return d.Object(chunkFields, func(name string) error {
		switch name {
		case "type":
			return d.String(&c.Type)
		case "blockType":
			return d.String(&c.BlockType)
		case "text":
			return d.String(&c.Text)
		case "usage":
			return wirejson.Ptr(d, &c.Usage, decodeWireUsage)
		case "reason":
			return wirejson.Ptr(d, &c.Reason, decodeWireReason)
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
			return decodeBlocks(d, &m.Content)
		case "source":
			return wirejson.Ptr(d, &m.Source, decodeWireSource)
		}
		return d.Skip()
	})
}

// decodeBlocks reads content blocks: a message's, a tool result's.
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
		case "toolCallId":
			return d.String(&b.ToolCallID)
		case "content":
			return d.Raw(&b.Content)
		case "isError":
			return wirejson.Ptr(d, &b.IsError, (*wirejson.Decoder).Bool)
		}
		return d.Skip()
	})
}

func decodeWireReason(d *wirejson.Decoder, r *wireReason) error {
	return d.Object(reasonFields, func(name string) error {
		switch name {
		case "kind":
			return d.String(&r.Kind)
		case "error":
			return wirejson.Ptr(d, &r.Error, decodeWireFailure)
		case "failure":
			return wirejson.Ptr(d, &r.Failure, decodeWireFailure)
		}
		return d.Skip()
	})
}

func decodeWireFailure(d *wirejson.Decoder, f *wireFailure) error {
	return d.Object(failureFields, func(name string) error {
		switch name {
		case "message":
			return d.String(&f.Message)
		case "code":
			return d.String(&f.Code)
		}
		return d.Skip()
	})
}

func decodeWireUsage(d *wirejson.Decoder, u *wireUsage) error {
	return d.Object(usageFields, func(name string) error {
		switch name {
		case "inputTokens":
			return wirejson.Ptr(d, &u.InputTokens, (*wirejson.Decoder).Int64)
		case "outputTokens":
			return wirejson.Ptr(d, &u.OutputTokens, (*wirejson.Decoder).Int64)
		case "cacheReadTokens":
			return wirejson.Ptr(d, &u.CacheReadTokens, (*wirejson.Decoder).Int64)
		case "cacheWriteTokens":
			return wirejson.Ptr(d, &u.CacheWriteTokens, (*wirejson.Decoder).Int64)
		}
		return d.Skip()
	})
}

func decodeToolArgs(d *wirejson.Decoder, a *toolArgs) error {
	return d.Object(toolArgsFields, func(name string) error {
		switch name {
		case "command":
			return d.String(&a.Command)
		case "file_path":
			return d.String(&a.FilePath)
		case "path":
			return d.String(&a.Path)
		case "pattern":
			return d.String(&a.Pattern)
		case "description":
			return d.String(&a.Description)
		case "objective":
			return d.String(&a.Objective)
		case "name":
			return d.String(&a.Name)
		case "queries":
			return wirejson.Slice(d, &a.Queries, (*wirejson.Decoder).String)
		case "job_id":
			return d.String(&a.JobID)
		}
		return d.Skip()
	})
}
