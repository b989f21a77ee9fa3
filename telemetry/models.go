package telemetry

// The model a usage event names comes from the runtime's output, which
// the agent can write into: as a metric label it would let an agent make
// any number of series. So the label is a model from this list (or one the
// caller adds, such as the manager's price table), else "other".

// OtherModel is the label of every model that is not known.
const OtherModel = "other"

// knownModels are the models of the four runtimes' providers that agentrun
// documents and tests with, by their API names.
var knownModels = []string{
	// Anthropic (claude-code)
	"claude-opus-4-7", "claude-opus-4-5", "claude-opus-4-1", "claude-sonnet-5-5", "claude-sonnet-5",
	"claude-sonnet-4-5", "claude-haiku-4-5", "claude-haiku-4-5-20251001",
	// OpenAI (codex, pi)
	"gpt-6", "gpt-5.5", "gpt-5", "gpt-5-mini", "gpt-4o",
	// DeepSeek (dsh)
	"deepseek-v4-pro", "deepseek-v4-flash",
	// the runtimes' own aliases
	"sonnet", "opus", "haiku",
}

// MaxExtraModels bounds the models a caller may add to the list.
const MaxExtraModels = 200

// Models is a set of model names kept as metric labels.
type Models map[string]bool

// NewModels is the built-in list plus extra (at most MaxExtraModels of
// them, the first given).
func NewModels(extra ...string) Models {
	m := Models{"unknown": true}
	for _, n := range knownModels {
		m[n] = true
	}
	for i, n := range extra {
		if i >= MaxExtraModels {
			break
		}
		if n != "" {
			m[n] = true
		}
	}
	return m
}

// Label is model as a metric label: itself when known, else OtherModel;
// "" (not reported) is "unknown", as in end.usage.by_model.
func (m Models) Label(model string) string {
	if model == "" {
		return "unknown"
	}
	if m[model] {
		return model
	}
	return OtherModel
}
