package telemetry

import (
	"context"
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/agentrun-dev/agentrun/events"
)

// The metrics (docs/telemetry.md, "Metrics"). The manager serves the same
// ones on its Prometheus endpoint under the names an OTLP-to-Prometheus
// translation gives (controllers/metrics.go), so a dashboard reads either.
const (
	MetricTokenUsage = "gen_ai.client.token.usage"
	MetricDuration   = "gen_ai.client.operation.duration"
	MetricRuns       = "agentrun.runs"
	MetricCost       = "agentrun.cost_usd"
	MetricDropped    = "agentrun.telemetry.dropped_spans"
)

// Bucket boundaries the GenAI conventions advise.
var (
	TokenUsageBuckets = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	DurationBuckets   = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
)

// The attributes of agentrun.runs and agentrun.cost_usd are the labels of
// the manager's agentrun_runs_total and agentrun_cost_usd_total.
const (
	AttrRunRuntime = attribute.Key("runtime")
	AttrRunStatus  = attribute.Key("status")
	AttrRunModel   = attribute.Key("model")
)

// ProviderOf is the gen_ai provider of a runtime (see providerOf).
func ProviderOf(runtime string) string { return providerOf(runtime) }

// ProviderKey is the attribute key of the provider in the version.
func (s Semconv) ProviderKey() string {
	if s == SemconvLatest {
		return string(keyProviderName)
	}
	return string(keySystem)
}

// Token types of gen_ai.client.token.usage: the conventions' two, input
// counting the cache.
const (
	TokenInput  = "input"
	TokenOutput = "output"
)

type instruments struct {
	tokens   metric.Int64Histogram
	duration metric.Float64Histogram
	runs     metric.Int64Counter
	cost     metric.Float64Counter
	dropped  metric.Int64Counter
	// sets are the attribute sets of the per-call points, made once: the
	// model labels are capped, so there are few, and building a set
	// (sorting, hashing) per call was the metrics' main cost.
	sets map[setKey]attribute.Set
}

type setKey struct{ op, request, response, tokenType, errorType string }

func newInstruments(m metric.Meter) (*instruments, error) {
	var in instruments
	var err error
	if in.tokens, err = m.Int64Histogram(MetricTokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Number of input and output tokens used."),
		metric.WithExplicitBucketBoundaries(TokenUsageBuckets...)); err != nil {
		return nil, err
	}
	if in.duration, err = m.Float64Histogram(MetricDuration, metric.WithUnit("s"),
		metric.WithDescription("GenAI operation duration."),
		metric.WithExplicitBucketBoundaries(DurationBuckets...)); err != nil {
		return nil, err
	}
	if in.runs, err = m.Int64Counter(MetricRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Runs ended, by runtime and end status.")); err != nil {
		return nil, err
	}
	if in.cost, err = m.Float64Counter(MetricCost, metric.WithUnit("{USD}"),
		metric.WithDescription("Cost in US dollars of runs, as the runtimes reported it, by runtime and model.")); err != nil {
		return nil, err
	}
	if in.dropped, err = m.Int64Counter(MetricDropped, metric.WithUnit("{span}"),
		metric.WithDescription("Spans a run did not make: over the span cap.")); err != nil {
		return nil, err
	}
	in.sets = map[setKey]attribute.Set{}
	return &in, nil
}

// set is the attribute set of a point: the operation, the provider, the
// runtime, the models (already labels) and the token type or error type.
func (in *instruments) set(b *builder, k setKey) attribute.Set {
	if s, ok := in.sets[k]; ok {
		return s
	}
	attrs := []attribute.KeyValue{keyOperation.String(k.op), b.conv.provider(providerOf(b.runtime)), keyRuntime.String(b.runtime)}
	if k.request != "" {
		attrs = append(attrs, keyRequestModel.String(k.request))
	}
	if k.response != "" {
		attrs = append(attrs, keyResponseModel.String(k.response))
	}
	if k.tokenType != "" {
		attrs = append(attrs, keyTokenType.String(k.tokenType))
	}
	if k.errorType != "" {
		attrs = append(attrs, keyErrorType.String(k.errorType))
	}
	s := attribute.NewSet(attrs...)
	in.sets[k] = s
	return s
}

func (in *instruments) requestLabel(b *builder, model string) string {
	if model == "" {
		return ""
	}
	return b.models.Label(model)
}

// call records one model call.
func (in *instruments) call(b *builder, requestModel, model string, c events.TokenCounts, d time.Duration) {
	k := setKey{op: opChat, request: in.requestLabel(b, requestModel), response: b.models.Label(model)}
	in.recordTokens(b, k, c)
	in.duration.Record(context.Background(), d.Seconds(), metric.WithAttributeSet(in.set(b, k)))
}

func (in *instruments) recordTokens(b *builder, k setKey, c events.TokenCounts) {
	ctx := context.Background()
	if n := wholeInput(c); n != nil {
		k.tokenType = TokenInput
		in.tokens.Record(ctx, *n, metric.WithAttributeSet(in.set(b, k)))
	}
	if c.OutputTokens != nil {
		k.tokenType = TokenOutput
		in.tokens.Record(ctx, *c.OutputTokens, metric.WithAttributeSet(in.set(b, k)))
	}
}

// run records the run's end: its tokens per model (operation
// invoke_agent), its duration, its end status and its cost.
func (in *instruments) run(b *builder, e *events.End) {
	ctx := context.Background()
	request := in.requestLabel(b, b.model)
	byModel := e.Usage.ByModel
	for _, m := range sortedKeys(byModel) {
		in.recordTokens(b, setKey{op: opInvokeAgent, request: request, response: b.models.Label(m)}, byModel[m])
		if c := byModel[m].CostUSD; c != nil && *c > 0 {
			in.cost.Add(ctx, *c, metric.WithAttributes(AttrRunRuntime.String(b.runtime), AttrRunModel.String(b.models.Label(m))))
		}
	}
	k := setKey{op: opInvokeAgent, request: request}
	if e.Status != events.StatusFinished {
		k.errorType = e.Status
	}
	in.duration.Record(ctx, float64(e.DurationMs)/1000, metric.WithAttributeSet(in.set(b, k)))
	in.runs.Add(ctx, 1, metric.WithAttributes(AttrRunRuntime.String(b.runtime), AttrRunStatus.String(e.Status)))
	if b.dropped > 0 {
		in.dropped.Add(ctx, b.dropped, metric.WithAttributes(keyRuntime.String(b.runtime)))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
