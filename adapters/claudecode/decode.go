package claudecode

import (
	"reflect"

	"github.com/agentrun-dev/agentrun/internal/wirejson"
)

// The wire structs' decoders (internal/wirejson): the result of
// json.Unmarshal into the same structs, to the byte (decode_test.go holds
// them to it), in one pass over the line. A json.RawMessage is a slice of
// the line: valid while the line is, which is all Translate needs.

var (
	lineFields        = wirejson.FieldsOf(reflect.TypeFor[wireLine]())
	metaFields        = wirejson.FieldsOf(reflect.TypeFor[wireToolResultMeta]())
	patchFields       = wirejson.FieldsOf(reflect.TypeFor[wirePatch]())
	taskUsageFields   = wirejson.FieldsOf(reflect.TypeFor[wireTaskUsage]())
	denialFields      = wirejson.FieldsOf(reflect.TypeFor[wireDenial]())
	messageFields     = wirejson.FieldsOf(reflect.TypeFor[wireMessage]())
	blockFields       = wirejson.FieldsOf(reflect.TypeFor[wireBlock]())
	usageFields       = wirejson.FieldsOf(reflect.TypeFor[wireUsage]())
	eventFields       = wirejson.FieldsOf(reflect.TypeFor[wireStreamEvent]())
	deltaFields       = wirejson.FieldsOf(reflect.TypeFor[wireDelta]())
	modelUsageFields  = wirejson.FieldsOf(reflect.TypeFor[wireModelUsage]())
	agentResultFields = wirejson.FieldsOf(reflect.TypeFor[agentResult]())
)

// decodeLine decodes one stream-json line into l; an error means the line
// is not JSON (and l is to be dropped).
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
		case "subtype":
			return d.String(&l.Subtype)
		case "session_id":
			return d.String(&l.SessionID)
		case "message":
			return wirejson.Ptr(d, &l.Message, decodeWireMessage)
		case "parent_tool_use_id":
			return wirejson.Ptr(d, &l.ParentToolUseID, (*wirejson.Decoder).String)
		case "isReplay":
			return d.Bool(&l.IsReplay)
		case "isSynthetic":
			return d.Bool(&l.IsSynthetic)
		case "is_api_error_message":
			return d.Bool(&l.IsAPIError)
		case "error":
			return d.Raw(&l.Error)
		case "tool_use_result":
			return d.Raw(&l.ToolUseResult)
		case "tool_result_meta":
			return wirejson.Slice(d, &l.ToolResultMeta, decodeWireToolResultMeta)
		case "event":
			return wirejson.Ptr(d, &l.Event, decodeWireStreamEvent)
		case "model":
			return d.String(&l.Model)
		case "tool_name":
			return d.String(&l.ToolName)
		case "tool_use_id":
			return d.String(&l.ToolUseID)
		case "task_id":
			return d.String(&l.TaskID)
		case "task_type":
			return d.String(&l.TaskType)
		case "description":
			return d.String(&l.Description)
		case "subagent_type":
			return d.String(&l.SubagentType)
		case "is_backgrounded":
			return wirejson.Ptr(d, &l.IsBackgrounded, (*wirejson.Decoder).Bool)
		case "status":
			return d.String(&l.Status)
		case "patch":
			return wirejson.Ptr(d, &l.Patch, decodeWirePatch)
		case "usage":
			return wirejson.Ptr(d, &l.Usage, decodeWireTaskUsage)
		case "is_error":
			return d.Bool(&l.IsError)
		case "result":
			return wirejson.Ptr(d, &l.Result, (*wirejson.Decoder).String)
		case "errors":
			return wirejson.Slice(d, &l.Errors, (*wirejson.Decoder).String)
		case "terminal_reason":
			return d.String(&l.TerminalReason)
		case "total_cost_usd":
			return wirejson.Ptr(d, &l.TotalCostUSD, (*wirejson.Decoder).Float64)
		case "modelUsage":
			return wirejson.Map(d, &l.ModelUsage, decodeWireModelUsage)
		case "permission_denials":
			return wirejson.Slice(d, &l.PermissionDenials, decodeWireDenial)
		}
		return d.Skip()
	})
}

func decodeWireToolResultMeta(d *wirejson.Decoder, m *wireToolResultMeta) error {
	return d.Object(metaFields, func(name string) error {
		switch name {
		case "id":
			return d.String(&m.ID)
		case "non_execution_kind":
			return d.String(&m.NonExecutionKind)
		}
		return d.Skip()
	})
}

func decodeWirePatch(d *wirejson.Decoder, p *wirePatch) error {
	return d.Object(patchFields, func(name string) error {
		if name == "status" {
			return d.String(&p.Status)
		}
		return d.Skip()
	})
}

func decodeWireTaskUsage(d *wirejson.Decoder, u *wireTaskUsage) error {
	return d.Object(taskUsageFields, func(name string) error {
		if name == "total_tokens" {
			return wirejson.Ptr(d, &u.TotalTokens, (*wirejson.Decoder).Int64)
		}
		return d.Skip()
	})
}

func decodeWireDenial(d *wirejson.Decoder, x *wireDenial) error {
	return d.Object(denialFields, func(name string) error {
		if name == "tool_use_id" {
			return d.String(&x.ToolUseID)
		}
		return d.Skip()
	})
}

func decodeWireMessage(d *wirejson.Decoder, m *wireMessage) error {
	return d.Object(messageFields, func(name string) error {
		switch name {
		case "id":
			return d.String(&m.ID)
		case "model":
			return d.String(&m.Model)
		case "content":
			return d.Raw(&m.Content)
		case "usage":
			return wirejson.Ptr(d, &m.Usage, decodeWireUsage)
		case "stop_reason":
			return wirejson.Ptr(d, &m.StopReason, (*wirejson.Decoder).String)
		}
		return d.Skip()
	})
}

func decodeWireBlock(d *wirejson.Decoder, b *wireBlock) error {
	return d.Object(blockFields, func(name string) error {
		switch name {
		case "type":
			return d.String(&b.Type)
		case "text":
			return d.String(&b.Text)
		case "id":
			return d.String(&b.ID)
		case "name":
			return d.String(&b.Name)
		case "input":
			return d.Raw(&b.Input)
		case "tool_use_id":
			return d.String(&b.ToolUseID)
		case "is_error":
			return wirejson.Ptr(d, &b.IsError, (*wirejson.Decoder).Bool)
		}
		return d.Skip()
	})
}

func decodeWireUsage(d *wirejson.Decoder, u *wireUsage) error {
	return d.Object(usageFields, func(name string) error {
		switch name {
		case "input_tokens":
			return wirejson.Ptr(d, &u.InputTokens, (*wirejson.Decoder).Int64)
		case "output_tokens":
			return wirejson.Ptr(d, &u.OutputTokens, (*wirejson.Decoder).Int64)
		case "cache_read_input_tokens":
			return wirejson.Ptr(d, &u.CacheReadInputTokens, (*wirejson.Decoder).Int64)
		case "cache_creation_input_tokens":
			return wirejson.Ptr(d, &u.CacheCreationInputTokens, (*wirejson.Decoder).Int64)
		}
		return d.Skip()
	})
}

func decodeWireStreamEvent(d *wirejson.Decoder, e *wireStreamEvent) error {
	return d.Object(eventFields, func(name string) error {
		switch name {
		case "type":
			return d.String(&e.Type)
		case "message":
			return wirejson.Ptr(d, &e.Message, decodeWireMessage)
		case "usage":
			return wirejson.Ptr(d, &e.Usage, decodeWireUsage)
		case "delta":
			return wirejson.Ptr(d, &e.Delta, decodeWireDelta)
		}
		return d.Skip()
	})
}

func decodeWireDelta(d *wirejson.Decoder, x *wireDelta) error {
	return d.Object(deltaFields, func(name string) error {
		switch name {
		case "type":
			return d.String(&x.Type)
		case "text":
			return d.String(&x.Text)
		}
		return d.Skip()
	})
}

func decodeWireModelUsage(d *wirejson.Decoder, u *wireModelUsage) error {
	return d.Object(modelUsageFields, func(name string) error {
		switch name {
		case "inputTokens":
			return wirejson.Ptr(d, &u.InputTokens, (*wirejson.Decoder).Int64)
		case "outputTokens":
			return wirejson.Ptr(d, &u.OutputTokens, (*wirejson.Decoder).Int64)
		case "cacheReadInputTokens":
			return wirejson.Ptr(d, &u.CacheReadInputTokens, (*wirejson.Decoder).Int64)
		case "cacheCreationInputTokens":
			return wirejson.Ptr(d, &u.CacheCreationInputTokens, (*wirejson.Decoder).Int64)
		case "costUSD":
			return wirejson.Ptr(d, &u.CostUSD, (*wirejson.Decoder).Float64)
		}
		return d.Skip()
	})
}

func decodeWireAgentResult(d *wirejson.Decoder, r *agentResult) error {
	return d.Object(agentResultFields, func(name string) error {
		switch name {
		case "status":
			return d.String(&r.Status)
		case "usage":
			return wirejson.Ptr(d, &r.Usage, decodeWireUsage)
		}
		return d.Skip()
	})
}
