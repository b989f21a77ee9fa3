package telemetry

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentrun-dev/agentrun/events"
)

// ServiceName is service.name unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES say otherwise.
const ServiceName = "agentrun"

// scopeName is the instrumentation scope of the spans and metrics.
const scopeName = "github.com/agentrun-dev/agentrun/telemetry"

// spanQueue bounds the finished spans waiting for export; when the
// collector is slow, newer spans are dropped rather than held.
const spanQueue = 4096

// Recorder exports one run's events as a trace and metrics. It is a
// format.Renderer: the runner tees the event stream into it.
type Recorder struct {
	cfg     Config
	warn    func(string)
	traceID string
	target  string

	mu     sync.Mutex // orders Event and Close
	closed bool
	b      *builder

	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
	spans  *countingSpans
	metric *countingMetrics

	closeOnce sync.Once
	closeErr  error
	// deadline makes the flush's context; a test replaces it to see the
	// flush end by its own deadline.
	deadline func(time.Duration) (context.Context, context.CancelFunc)
}

// Start sets up the exporters (which connect lazily: nothing here waits
// for the collector) and the span builder.
func Start(cfg Config, warn func(string)) (*Recorder, error) {
	quietSDK()
	if warn == nil {
		warn = func(string) {}
	}
	ctx := context.Background()
	parent := context.Background()
	var traceID trace.TraceID
	if cfg.TraceParent != "" {
		carrier := propagation.MapCarrier{"traceparent": cfg.TraceParent}
		if cfg.TraceState != "" {
			carrier["tracestate"] = cfg.TraceState
		}
		parent = propagation.TraceContext{}.Extract(parent, carrier)
		traceID = trace.SpanContextFromContext(parent).TraceID()
	} else if ValidTraceID(cfg.TraceID) {
		traceID, _ = trace.TraceIDFromHex(cfg.TraceID)
	} else {
		_, _ = rand.Read(traceID[:])
	}
	spanExp, metricExp, target, err := exporters(ctx, cfg)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", ServiceName)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if res == nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	flush := orDur(cfg.FlushTimeout, FlushTimeout)
	r := &Recorder{cfg: cfg, warn: warn, traceID: traceID.String(), target: target,
		spans: &countingSpans{SpanExporter: spanExp}, metric: &countingMetrics{Exporter: metricExp},
		deadline: func(d time.Duration) (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), d)
		}}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(&idGenerator{traceID: traceID}),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		sdktrace.WithRawSpanLimits(spanLimits()),
		sdktrace.WithBatcher(r.spans, sdktrace.WithMaxQueueSize(spanQueue), sdktrace.WithMaxExportBatchSize(512),
			sdktrace.WithBatchTimeout(time.Second), sdktrace.WithExportTimeout(flush)))
	r.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(r.metric, sdkmetric.WithTimeout(flush))))
	tracer := r.tp.Tracer(scopeName, trace.WithSchemaURL(cfg.Semconv.SchemaURL()))
	in, err := newInstruments(r.mp.Meter(scopeName, metric.WithSchemaURL(cfg.Semconv.SchemaURL())))
	if err != nil {
		return nil, err
	}
	r.b = newBuilder(parent, tracer, cfg, in, NewModels())
	return r, nil
}

func orDur(v, d time.Duration) time.Duration {
	if v <= 0 {
		return d
	}
	return v
}

// spanLimits bound what one span may carry; the agent writes tool names,
// summaries and model names.
func spanLimits() sdktrace.SpanLimits {
	l := sdktrace.NewSpanLimits()
	l.AttributeValueLengthLimit = 2 * MaxContentBytes
	l.EventCountLimit = MaxDeniedEvents
	return l
}

// exporters are the OTLP span and metric exporters of the protocol, to
// --otlp-endpoint or where the OTEL_EXPORTER_OTLP_* variables say. They
// never retry: a run's telemetry is sent once, and a collector that is
// down must not turn the run into a stream of reconnections.
func exporters(ctx context.Context, c Config) (sdktrace.SpanExporter, sdkmetric.Exporter, string, error) {
	flush := orDur(c.FlushTimeout, FlushTimeout)
	base := strings.TrimRight(c.Endpoint, "/")
	if c.Protocol == ProtocolGRPC {
		to := []otlptracegrpc.Option{otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}), otlptracegrpc.WithTimeout(flush)}
		mo := []otlpmetricgrpc.Option{otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: false}), otlpmetricgrpc.WithTimeout(flush)}
		if base != "" {
			to = append(to, otlptracegrpc.WithEndpointURL(base))
			mo = append(mo, otlpmetricgrpc.WithEndpointURL(base))
		}
		se, err := otlptracegrpc.New(ctx, to...)
		if err != nil {
			return nil, nil, "", fmt.Errorf("telemetry: OTLP/gRPC trace exporter: %w", err)
		}
		me, err := otlpmetricgrpc.New(ctx, mo...)
		if err != nil {
			return nil, nil, "", fmt.Errorf("telemetry: OTLP/gRPC metric exporter: %w", err)
		}
		return se, me, target(base, "gRPC"), nil
	}
	to := []otlptracehttp.Option{otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}), otlptracehttp.WithTimeout(flush)}
	mo := []otlpmetrichttp.Option{otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false}), otlpmetrichttp.WithTimeout(flush)}
	if base != "" {
		to = append(to, otlptracehttp.WithEndpointURL(base+"/v1/traces"))
		mo = append(mo, otlpmetrichttp.WithEndpointURL(base+"/v1/metrics"))
	}
	se, err := otlptracehttp.New(ctx, to...)
	if err != nil {
		return nil, nil, "", fmt.Errorf("telemetry: OTLP/HTTP trace exporter: %w", err)
	}
	me, err := otlpmetrichttp.New(ctx, mo...)
	if err != nil {
		return nil, nil, "", fmt.Errorf("telemetry: OTLP/HTTP metric exporter: %w", err)
	}
	return se, me, target(base, "HTTP"), nil
}

func target(base, proto string) string {
	if base == "" {
		return "the OTLP/" + proto + " collector of OTEL_EXPORTER_OTLP_*"
	}
	return "the OTLP/" + proto + " collector at " + base
}

var quiet sync.Once

// quietSDK keeps the SDK's own error lines off stderr: a collector that is
// down would otherwise log every failed export. The recorder counts what
// failed and says it once.
func quietSDK() {
	quiet.Do(func() {
		otel.SetLogger(logr.Discard())
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	})
}

// TraceID is the run's trace id (32 hex digits): the caller's trace when
// continued, else a new one.
func (r *Recorder) TraceID() string { return r.traceID }

// Note implements format.Renderer; notes are not telemetry.
func (r *Recorder) Note(string) error { return nil }

// Event hands e to the span builder. It never waits for the collector.
// The builder runs in the caller's goroutine: it does no I/O and costs
// about 2 µs an event, less than handing each event to another goroutine
// (a wake-up per event) did.
func (r *Recorder) Event(e events.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.b.event(e)
	}
	return nil
}

// ErrFlushTimeout: the final export did not finish within FlushTimeout;
// what was left is dropped.
var ErrFlushTimeout = errors.New("telemetry: the final export did not finish in time")

// Close builds the last spans and exports what is left, for at most
// FlushTimeout in all; what is not sent by then is dropped, with one
// warning line. It returns that error (the run goes on as it was).
func (r *Recorder) Close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		ctx, cancel := r.deadline(orDur(r.cfg.FlushTimeout, FlushTimeout))
		defer cancel()
		var wg sync.WaitGroup
		var terr, merr error
		wg.Add(2)
		go func() { defer wg.Done(); terr = r.tp.Shutdown(ctx) }()
		go func() { defer wg.Done(); merr = r.mp.Shutdown(ctx) }()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			// The providers return at the deadline themselves; this
			// guards against one that does not.
		}
		timedOut := ctx.Err() != nil
		made, sent := r.b.sampledSpans(), r.spans.sent.Load()
		exportErr := errors.Join(r.spans.firstErr(), r.metric.firstErr())
		switch {
		case timedOut:
			r.closeErr = ErrFlushTimeout
		case exportErr != nil || sent < made:
			r.closeErr = fmt.Errorf("telemetry: export failed: %w", errors.Join(exportErr, terr, merr))
		}
		if r.closeErr != nil {
			why := "it did not answer within " + orDur(r.cfg.FlushTimeout, FlushTimeout).String()
			if !timedOut && exportErr != nil {
				why = oneLine(exportErr.Error())
			}
			what := "the run's metrics were"
			if lost := made - min(sent, made); lost > 0 || timedOut {
				what = fmt.Sprintf("%d of %d spans and the run's metrics were", lost, made)
			}
			r.warn(fmt.Sprintf("telemetry: %s not sent to %s (%s); dropped", what, r.target, why))
		}
	})
	return r.closeErr
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return cut(s, 300)
}

// countingSpans counts what reached the collector.
type countingSpans struct {
	sdktrace.SpanExporter
	sent atomic.Int64
	mu   sync.Mutex
	err  error
}

func (c *countingSpans) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		c.mu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
		return err
	}
	c.sent.Add(int64(len(spans)))
	return nil
}

func (c *countingSpans) firstErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

type countingMetrics struct {
	sdkmetric.Exporter
	mu  sync.Mutex
	err error
}

func (c *countingMetrics) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := c.Exporter.Export(ctx, rm)
	if err != nil {
		c.mu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
	}
	return err
}

func (c *countingMetrics) firstErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// idGenerator gives the root span the run's trace id; every other span
// has a parent and gets only a new span id.
type idGenerator struct {
	traceID trace.TraceID
}

func (g *idGenerator) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	return g.traceID, g.NewSpanID(context.Background(), g.traceID)
}

func (g *idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var id trace.SpanID
	for id == (trace.SpanID{}) {
		_, _ = rand.Read(id[:])
	}
	return id
}
