package v1alpha1

import (
	"strings"
	"time"
)

// The spec's values with the CRD's defaults applied: the API server applies
// them to every object it serves, so these matter only for an object made
// without it (a test's, or a client that skipped defaulting).

// Stopped reports whether spec.stop asks the run to stop.
func (s AgentRunSpec) Stopped() bool { return s.Stop != "" }

// SandboxOrDefault is spec.sandbox, Bubblewrap when unset. An object stored
// before the modes were CamelCase (bubblewrap, none) reads as the same mode.
func (s AgentRunSpec) SandboxOrDefault() SandboxMode {
	if s.Sandbox == "" {
		return SandboxBubblewrap
	}
	if m, ok := SandboxModeFromFlag(string(s.Sandbox)); ok {
		return m
	}
	return s.Sandbox
}

// NetworkOrDefault is spec.network, mode Full when unset.
func (s AgentRunSpec) NetworkOrDefault() Network {
	var n Network
	if s.Network != nil {
		n = *s.Network
	}
	if n.Mode == "" {
		n.Mode = NetworkFull
	}
	if m, ok := NetworkModeFromFlag(string(n.Mode)); ok {
		n.Mode = m // stored before the modes were CamelCase
	}
	return n
}

// JobTTL is spec.retention.jobTTLAfterEnd; false when unset (the CRD
// validates it, so an unparsable value can only come from a client that
// skipped validation, and keeps the Job).
func (s AgentRunSpec) JobTTL() (time.Duration, bool) {
	if s.Retention == nil || s.Retention.JobTTLAfterEnd == "" {
		return 0, false
	}
	d, err := time.ParseDuration(s.Retention.JobTTLAfterEnd)
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}

// The modes' command-line spelling: agentrun's flags (--sandbox, --network)
// and its event stream write them in lower case, the API in CamelCase
// (docs/api.md, "Enum values").

// Flag is the mode as `agentrun run --sandbox` takes it.
func (m SandboxMode) Flag() string { return strings.ToLower(string(m)) }

// Flag is the mode as `agentrun run --network` takes it.
func (m NetworkMode) Flag() string { return strings.ToLower(string(m)) }

// SandboxModeFromFlag is the API's mode for a --sandbox value or a stream's
// start.sandbox; false for one the API does not have.
func SandboxModeFromFlag(v string) (SandboxMode, bool) {
	for _, m := range []SandboxMode{SandboxBubblewrap, SandboxNone} {
		if m.Flag() == v {
			return m, true
		}
	}
	return "", false
}

// NetworkModeFromFlag is the API's mode for a --network value or a
// stream's start.network.mode; false for one the API does not have.
func NetworkModeFromFlag(v string) (NetworkMode, bool) {
	for _, m := range []NetworkMode{NetworkNone, NetworkFull, NetworkCustom} {
		if m.Flag() == v {
			return m, true
		}
	}
	return "", false
}
