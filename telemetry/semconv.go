package telemetry

import (
	"strings"

	"go.opentelemetry.io/otel/attribute"
)

// Semconv is the version of the GenAI semantic conventions the spans and
// metrics follow. The conventions ask instrumentations to keep emitting
// v1.36.0 by default and to emit the latest experimental version instead
// when OTEL_SEMCONV_STABILITY_OPT_IN lists gen_ai_latest_experimental.
type Semconv int

const (
	// SemconvV1_36 is the default: gen_ai.system, no cache token attributes.
	SemconvV1_36 Semconv = iota
	// SemconvLatest is v1.40.0 (gen_ai_latest_experimental):
	// gen_ai.provider.name and the cache token attributes.
	SemconvLatest
)

// OptInLatest is the OTEL_SEMCONV_STABILITY_OPT_IN value for the latest
// experimental GenAI conventions.
const OptInLatest = "gen_ai_latest_experimental"

// SchemaURL is the semantic conventions' schema of the version.
func (s Semconv) SchemaURL() string {
	if s == SemconvLatest {
		return "https://opentelemetry.io/schemas/1.40.0"
	}
	return "https://opentelemetry.io/schemas/1.36.0"
}

// Version is the conventions' version, for docs and tests.
func (s Semconv) Version() string {
	if s == SemconvLatest {
		return "1.40.0"
	}
	return "1.36.0"
}

func semconvFromOptIn(v string) Semconv {
	for _, p := range strings.Split(v, ",") {
		if strings.TrimSpace(p) == OptInLatest {
			return SemconvLatest
		}
	}
	return SemconvV1_36
}

// GenAI attribute keys (the same in both versions unless noted).
const (
	keyOperation      = attribute.Key("gen_ai.operation.name")
	keyProviderName   = attribute.Key("gen_ai.provider.name") // v1.37+
	keySystem         = attribute.Key("gen_ai.system")        // v1.36 and before
	keyAgentName      = attribute.Key("gen_ai.agent.name")
	keyAgentID        = attribute.Key("gen_ai.agent.id")
	keyAgentDesc      = attribute.Key("gen_ai.agent.description")
	keyConversationID = attribute.Key("gen_ai.conversation.id")
	keyRequestModel   = attribute.Key("gen_ai.request.model")
	keyResponseModel  = attribute.Key("gen_ai.response.model")
	keyInputTokens    = attribute.Key("gen_ai.usage.input_tokens")
	keyOutputTokens   = attribute.Key("gen_ai.usage.output_tokens")
	keyCacheRead      = attribute.Key("gen_ai.usage.cache_read.input_tokens")     // v1.40
	keyCacheCreation  = attribute.Key("gen_ai.usage.cache_creation.input_tokens") // v1.40
	keyToolName       = attribute.Key("gen_ai.tool.name")
	keyToolCallID     = attribute.Key("gen_ai.tool.call.id")
	keyToolType       = attribute.Key("gen_ai.tool.type")
	keyTokenType      = attribute.Key("gen_ai.token.type")
	keyInputMessages  = attribute.Key("gen_ai.input.messages")  // opt-in content
	keyOutputMessages = attribute.Key("gen_ai.output.messages") // opt-in content
	keyErrorType      = attribute.Key("error.type")
	keyServerAddress  = attribute.Key("server.address")
	keyServerPort     = attribute.Key("server.port")
)

// agentrun's own attributes: the event stream's facts that the GenAI
// conventions have no name for, in the stream's own meaning.
const (
	keyRuntime         = attribute.Key("agentrun.runtime")
	keySandbox         = attribute.Key("agentrun.sandbox")
	keyNetworkMode     = attribute.Key("agentrun.network.mode")
	keyNetworkEnforced = attribute.Key("agentrun.network.enforced")
	keyEndStatus       = attribute.Key("agentrun.end.status")
	keyExitCode        = attribute.Key("agentrun.end.exit_code")
	keyDurationMs      = attribute.Key("agentrun.end.duration_ms")
	keyUsageInput      = attribute.Key("agentrun.usage.input_tokens")
	keyUsageOutput     = attribute.Key("agentrun.usage.output_tokens")
	keyUsageCacheRead  = attribute.Key("agentrun.usage.cache_read_tokens")
	keyUsageCacheWrite = attribute.Key("agentrun.usage.cache_write_tokens")
	keyUsageCost       = attribute.Key("agentrun.usage.cost_usd")
	keyUnattributed    = attribute.Key("agentrun.usage.unattributed")
	keyToolSummary     = attribute.Key("agentrun.tool.summary")
	keyToolDenied      = attribute.Key("agentrun.tool.denied")
	keyToolError       = attribute.Key("agentrun.tool.error")
	keySubagentNumber  = attribute.Key("agentrun.subagent.number")
	keySubagentStatus  = attribute.Key("agentrun.subagent.status")
	keyParentID        = attribute.Key("agentrun.parent")
	keyDeniedReason    = attribute.Key("agentrun.network.reason")
	keyDeniedCount     = attribute.Key("agentrun.network.denied")
	keySuppressed      = attribute.Key("agentrun.network.suppressed")
	keySpansDropped    = attribute.Key("agentrun.telemetry.spans_dropped")
	keyDeniedDropped   = attribute.Key("agentrun.telemetry.denied_events_dropped")
)

// Operation names.
const (
	opInvokeAgent = "invoke_agent"
	opChat        = "chat"
	opExecuteTool = "execute_tool"
)

func (s Semconv) provider(name string) attribute.KeyValue {
	if s == SemconvLatest {
		return keyProviderName.String(name)
	}
	return keySystem.String(name)
}

// providerOf is the GenAI provider a runtime talks to by default: the
// provider is what the runtime's API speaks, since agentrun does not see
// which host serves it (codex and pi speak OpenAI's APIs to any endpoint).
func providerOf(runtime string) string {
	switch runtime {
	case "claude-code":
		return "anthropic"
	case "codex", "pi":
		return "openai"
	case "dsh":
		return "deepseek"
	}
	return "_OTHER"
}
