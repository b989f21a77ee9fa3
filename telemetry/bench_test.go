package telemetry

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentrun-dev/agentrun/events"
)

// BenchmarkBuilder is the span builder's and the metrics' cost per event
// of a long run (the span cap reached early, as in a flood), the work
// hack/bench-telemetry.sh measures end to end.
func BenchmarkBuilder(b *testing.B) {
	evs := floodStream(20000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()), sdktrace.WithRawSpanLimits(spanLimits()))
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		in, _ := newInstruments(mp.Meter(scopeName))
		bl := newBuilder(context.Background(), tp.Tracer(scopeName), Config{}, in, NewModels())
		for _, e := range evs {
			bl.event(e)
		}
		_ = tp.Shutdown(context.Background())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}

var _ = events.TypeEnd
