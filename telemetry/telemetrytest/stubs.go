package telemetrytest

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// FromStubs converts the SDK's in-memory spans (tracetest.InMemoryExporter)
// to Spans.
func FromStubs(stubs tracetest.SpanStubs) []Span {
	var out []Span
	for _, s := range stubs {
		sp := Span{TraceID: s.SpanContext.TraceID().String(), SpanID: s.SpanContext.SpanID().String(),
			Name: s.Name, Kind: s.SpanKind.String(), Start: s.StartTime.UTC(), End: s.EndTime.UTC(),
			Attrs: attrs(s.Attributes), Resource: map[string]any{}}
		if s.Parent.IsValid() {
			sp.ParentID = s.Parent.SpanID().String()
		}
		switch s.Status.Code {
		case codes.Error:
			sp.Status = "Error"
		case codes.Ok:
			sp.Status = "Ok"
		}
		if s.Resource != nil {
			sp.Resource = attrs(s.Resource.Attributes())
			sp.Service, _ = sp.Resource["service.name"].(string)
		}
		for _, e := range s.Events {
			sp.Events = append(sp.Events, Event{Name: e.Name, Time: e.Time.UTC(), Attrs: attrs(e.Attributes)})
		}
		out = append(out, sp)
	}
	return out
}

func attrs(kvs []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		switch kv.Value.Type() {
		case attribute.STRING:
			m[string(kv.Key)] = kv.Value.AsString()
		case attribute.INT64:
			m[string(kv.Key)] = kv.Value.AsInt64()
		case attribute.FLOAT64:
			m[string(kv.Key)] = kv.Value.AsFloat64()
		case attribute.BOOL:
			m[string(kv.Key)] = kv.Value.AsBool()
		default:
			m[string(kv.Key)] = kv.Value.String()
		}
	}
	return m
}
