package telemetry

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Protocols of OTEL_EXPORTER_OTLP_PROTOCOL that agentrun exports with.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Defaults of the bounds (docs/telemetry.md, "Limits").
const (
	// FlushTimeout bounds the export at the end of a run: what is not sent
	// by then is dropped, with one warning line.
	FlushTimeout = 2 * time.Second
	// MaxSpans bounds the spans of one run (the root included): tracing
	// back ends and their views handle a few thousand spans per trace
	// well, and each span costs the runner about 25 µs of CPU in all
	// (making, exporting, collecting), which past this is the agent's
	// flood, not the run's story.
	MaxSpans = 4096
	// MaxDeniedEvents bounds the denied-destination span events on the root.
	MaxDeniedEvents = 128
	// MaxContentBytes bounds each exported piece of content (opt-in).
	MaxContentBytes = 4096
)

// The environment variables agentrun reads beyond the exporters' own
// OTEL_EXPORTER_OTLP_* (which the OTLP exporters read themselves).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvSemconvOptIn   = "OTEL_SEMCONV_STABILITY_OPT_IN"
	// EnvCaptureContent opts in to prompts, texts and the result, as the
	// GenAI instrumentations name it.
	EnvCaptureContent = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
	EnvTraceParent    = "TRACEPARENT"
	EnvTraceState     = "TRACESTATE"
)

// IsTelemetryVar reports whether an environment variable configures
// telemetry (OTEL_*, TRACEPARENT, TRACESTATE): agentrun's exporter reads
// them, and they never reach the agent's environment.
func IsTelemetryVar(name string) bool {
	return strings.HasPrefix(name, "OTEL_") || name == EnvTraceParent || name == EnvTraceState
}

// Config is what one run exports, and where.
type Config struct {
	// Endpoint is --otlp-endpoint: the collector's base URL (the OTLP/HTTP
	// exporter adds /v1/traces and /v1/metrics). Empty: the exporters'
	// own variables say where.
	Endpoint string
	// Enabled: an endpoint is given, by the flag or the variables.
	Enabled  bool
	Protocol string
	// TraceParent and TraceState continue a caller's trace (W3C Trace
	// Context); TraceID starts a new trace with a given id instead (the
	// controller derives it from the AgentRun, to show it in the status
	// before the run starts).
	TraceParent, TraceState string
	TraceID                 string
	// CaptureContent exports the prompt, the agent's texts and the result
	// (each cut at MaxContentBytes).
	CaptureContent bool
	// Semconv is the version of the GenAI conventions the attributes follow.
	Semconv Semconv

	// Bounds; zero values are the defaults above.
	FlushTimeout    time.Duration
	MaxSpans        int
	MaxDeniedEvents int
}

// FromEnv reads the configuration from the standard variables (getenv is
// os.Getenv) and the --otlp-endpoint flag (endpoint, may be empty).
// Problems with the variables are returned as warnings and leave telemetry
// off or at a default: the environment is ambient, and a bad variable must
// not fail a run. A bad flag is an error.
func FromEnv(getenv func(string) string, endpoint string) (Config, []string, error) {
	var warns []string
	c := Config{Endpoint: endpoint, Protocol: ProtocolHTTP, TraceParent: getenv(EnvTraceParent), TraceState: getenv(EnvTraceState)}
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, nil, fmt.Errorf("--otlp-endpoint %q: pass the collector's URL, for example http://collector:4318 (OTLP/HTTP) or http://collector:4317 with OTEL_EXPORTER_OTLP_PROTOCOL=grpc", endpoint)
		}
	}
	c.Enabled = endpoint != "" || getenv(EnvEndpoint) != "" || getenv(EnvTracesEndpoint) != ""
	if strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		c.Enabled = false
	}
	switch p := strings.TrimSpace(firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", EnvProtocol)); p {
	case "", ProtocolHTTP:
	case ProtocolGRPC:
		c.Protocol = ProtocolGRPC
	case "http/json":
		warns = append(warns, "telemetry: OTEL_EXPORTER_OTLP_PROTOCOL=http/json is not supported; exporting OTLP/HTTP with protobuf, which every OTLP/HTTP receiver accepts")
	default:
		warns = append(warns, fmt.Sprintf("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL=%q is not grpc or http/protobuf; exporting http/protobuf", p))
	}
	c.CaptureContent = strings.EqualFold(strings.TrimSpace(getenv(EnvCaptureContent)), "true")
	c.Semconv = semconvFromOptIn(getenv(EnvSemconvOptIn))
	if c.TraceParent != "" {
		if _, err := ParseTraceParent(c.TraceParent); err != nil {
			warns = append(warns, fmt.Sprintf("telemetry: TRACEPARENT ignored: %v", err))
			c.TraceParent, c.TraceState = "", ""
		}
	}
	return c, warns, nil
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// ParseTraceParent checks a W3C traceparent (version 00:
// 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>) and returns its
// trace id. The all-zero ids are invalid.
func ParseTraceParent(tp string) (string, error) {
	parts := strings.Split(strings.TrimSpace(tp), "-")
	if len(parts) < 4 || len(parts[0]) != 2 || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return "", fmt.Errorf("%q is not a W3C traceparent (00-<32 hex digits>-<16 hex digits>-<2 hex digits>)", tp)
	}
	if parts[0] == "ff" || (parts[0] == "00" && len(parts) != 4) {
		return "", fmt.Errorf("%q: unsupported traceparent version", tp)
	}
	for _, p := range parts[:4] {
		if _, err := hex.DecodeString(p); err != nil || strings.ToLower(p) != p {
			return "", fmt.Errorf("%q is not a W3C traceparent: lower-case hex digits only", tp)
		}
	}
	if strings.Trim(parts[1], "0") == "" || strings.Trim(parts[2], "0") == "" {
		return "", fmt.Errorf("%q is not a W3C traceparent: an all-zero id", tp)
	}
	return parts[1], nil
}

// ValidTraceID reports whether id is a trace id: 32 lower-case hex digits,
// not all zero.
func ValidTraceID(id string) bool {
	if len(id) != 32 || strings.ToLower(id) != id || strings.Trim(id, "0") == "" {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}
