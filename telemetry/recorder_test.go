package telemetry

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/telemetry/telemetrytest"
)

// record runs a stream through a Recorder and closes it, collecting the
// warning lines.
func record(t *testing.T, c Config, evs []events.Event, beforeClose func(*Recorder)) (*Recorder, []string, error) {
	t.Helper()
	var mu sync.Mutex
	var warns []string
	r, err := Start(c, func(s string) { mu.Lock(); warns = append(warns, s); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := r.Event(e); err != nil {
			t.Fatal(err)
		}
	}
	if beforeClose != nil {
		beforeClose(r)
	}
	err = r.Close()
	mu.Lock()
	defer mu.Unlock()
	return r, warns, err
}

func TestExportsToARealCollector(t *testing.T) {
	col := telemetrytest.StartCollector(t)
	for _, tc := range []struct {
		name, protocol, endpoint, traceID string
	}{
		{"OTLP/HTTP", ProtocolHTTP, col.HTTPURL(), "0af7651916cd43dd8448eb211c80319c"},
		{"OTLP/gRPC", ProtocolGRPC, col.GRPCURL(), "1af7651916cd43dd8448eb211c80319d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := exampleStream(t)
			r, warns, err := record(t, Config{Endpoint: tc.endpoint, Protocol: tc.protocol, Enabled: true,
				TraceParent: "00-" + tc.traceID + "-b7ad6b7169203331-01"}, evs, nil)
			if err != nil || len(warns) != 0 {
				t.Fatalf("close: %v, warnings %q", err, warns)
			}
			if r.TraceID() != tc.traceID {
				t.Fatalf("trace id %s, want the TRACEPARENT's", r.TraceID())
			}
			spans, metrics := col.WaitSpans(t, r.TraceID(), 20*time.Second)
			for _, err := range telemetrytest.Check(spans, evs, "b7ad6b7169203331") {
				t.Error(err)
			}
			if len(spans) == 0 || spans[0].Service != ServiceName {
				t.Errorf("service.name %q", spans[0].Service)
			}
			seen := map[string]bool{}
			for _, m := range metrics {
				seen[m.Name] = true
			}
			for _, name := range []string{MetricTokenUsage, MetricDuration, MetricRuns, MetricCost} {
				if !seen[name] {
					t.Errorf("metric %s not exported (got %v)", name, seen)
				}
			}
			if t.Failed() {
				t.Logf("collector:\n%s", col.Log())
			}
		})
	}
}

func TestNewTraceWithAGivenID(t *testing.T) {
	col := telemetrytest.StartCollector(t)
	const id = "5b8efff798038103d269b633813fc60c"
	evs := exampleStream(t)
	r, _, err := record(t, Config{Endpoint: col.HTTPURL(), Enabled: true, TraceID: id}, evs, nil)
	if err != nil || r.TraceID() != id {
		t.Fatalf("close %v, trace id %s", err, r.TraceID())
	}
	spans, _ := col.WaitSpans(t, id, 20*time.Second)
	for _, err := range telemetrytest.Check(spans, evs, "") {
		t.Error(err)
	}
}

// TestCollectorDownOrHanging: a collector that refuses connections or
// accepts and never answers costs the run nothing but one warning line, and
// the final flush ends by its own deadline.
func TestCollectorDownOrHanging(t *testing.T) {
	hole := telemetrytest.StartBlackHole(t)
	for _, tc := range []struct {
		name, protocol, endpoint string
		hangs                    bool
	}{
		{"refused, HTTP", ProtocolHTTP, telemetrytest.ClosedPort(t), false},
		{"refused, gRPC", ProtocolGRPC, telemetrytest.ClosedPort(t), false},
		{"black hole, HTTP", ProtocolHTTP, hole.URL(), true},
		{"black hole, gRPC", ProtocolGRPC, hole.URL(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked time.Duration
			var flushCtx context.Context
			_, warns, err := record(t, Config{Endpoint: tc.endpoint, Protocol: tc.protocol, Enabled: true}, floodStream(2000), func(r *Recorder) {
				inner := r.deadline
				r.deadline = func(d time.Duration) (context.Context, context.CancelFunc) {
					asked = d
					if tc.hangs {
						// The deadline comes at once: the flush must end
						// by it, not wait for the collector. (Not one
						// already past: with that the SDK's
						// TracerProvider.Shutdown returns before it shuts
						// its span processor down, whose goroutine and
						// connection then never end; goleak saw them.)
						ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
						flushCtx = ctx
						return ctx, cancel
					}
					return inner(d)
				}
			})
			if asked != FlushTimeout || FlushTimeout != 2*time.Second {
				t.Errorf("the flush was given %v, want the documented %v (2s)", asked, FlushTimeout)
			}
			if err == nil {
				t.Fatal("close reported no failure")
			}
			if tc.hangs && (!errors.Is(err, ErrFlushTimeout) || flushCtx.Err() == nil) {
				t.Errorf("close: %v, want the flush ended by its deadline", err)
			}
			if len(warns) != 1 || !strings.Contains(warns[0], "were not sent") || !strings.Contains(warns[0], "dropped") {
				t.Errorf("warnings %q, want exactly one", warns)
			}
		})
	}
	if hole.Accepted() == 0 {
		t.Error("nothing ever reached the black hole: the test did not test it")
	}
}

func TestEnvironment(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if c, _, err := FromEnv(getenv, ""); err != nil || c.Enabled {
		t.Errorf("no variables: %+v %v", c, err)
	}
	env[EnvEndpoint] = "http://collector:4318"
	env[EnvProtocol] = "grpc"
	env[EnvCaptureContent] = "true"
	env[EnvTraceParent] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	c, warns, err := FromEnv(getenv, "")
	if err != nil || !c.Enabled || c.Protocol != ProtocolGRPC || !c.CaptureContent || c.TraceParent == "" || len(warns) != 0 {
		t.Errorf("%+v %v %v", c, warns, err)
	}
	env[EnvTraceParent] = "00-00000000000000000000000000000000-b7ad6b7169203331-01"
	if c, warns, _ := FromEnv(getenv, ""); c.TraceParent != "" || len(warns) != 1 {
		t.Errorf("an all-zero trace id was taken: %+v %v", c, warns)
	}
	env[EnvSDKDisabled] = "true"
	if c, _, _ := FromEnv(getenv, ""); c.Enabled {
		t.Error("OTEL_SDK_DISABLED=true exports")
	}
	if _, _, err := FromEnv(getenv, "collector:4318"); err == nil {
		t.Error("--otlp-endpoint without a scheme accepted")
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "TRACEPARENT", "TRACESTATE", "OTEL_SERVICE_NAME"} {
		if !IsTelemetryVar(name) {
			t.Errorf("%s is not a telemetry variable", name)
		}
	}
	if IsTelemetryVar("HOTEL") || IsTelemetryVar("PATH") {
		t.Error("IsTelemetryVar too wide")
	}
}

// TestUnsampledCaller: a caller that did not sample its trace (flags 00)
// gets no spans of the run either, and that is no failure.
func TestUnsampledCaller(t *testing.T) {
	col := telemetrytest.StartCollector(t)
	const id = "2af7651916cd43dd8448eb211c80319e"
	r, warns, err := record(t, Config{Endpoint: col.HTTPURL(), Enabled: true, TraceParent: "00-" + id + "-b7ad6b7169203331-00"}, exampleStream(t), nil)
	if err != nil || len(warns) != 0 || r.TraceID() != id {
		t.Fatalf("close %v, warnings %q, trace %s", err, warns, r.TraceID())
	}
	if spans, _ := col.WaitSpans(t, id, 2*time.Second); len(spans) != 0 {
		t.Errorf("%d spans of an unsampled trace exported", len(spans))
	}
}
