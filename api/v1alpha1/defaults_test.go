package v1alpha1

import (
	"testing"
	"time"
)

func TestSpecDefaults(t *testing.T) {
	for _, tt := range []struct {
		name    string
		spec    AgentRunSpec
		sandbox SandboxMode
		network NetworkMode
		ttl     time.Duration
		ttlSet  bool
		stopped bool
	}{
		{name: "nothing set", sandbox: SandboxBubblewrap, network: NetworkFull},
		{name: "set", spec: AgentRunSpec{Sandbox: SandboxNone, Network: &Network{Mode: NetworkCustom}, Retention: &Retention{JobTTLAfterEnd: "10m"}, Stop: StopGraceful},
			sandbox: SandboxNone, network: NetworkCustom, ttl: 10 * time.Minute, ttlSet: true, stopped: true},
		{name: "a network without a mode", spec: AgentRunSpec{Network: &Network{AllowHosts: []string{"a.test"}}}, sandbox: SandboxBubblewrap, network: NetworkFull},
		{name: "stored before CamelCase", spec: AgentRunSpec{Sandbox: "none", Network: &Network{Mode: "custom"}}, sandbox: SandboxNone, network: NetworkCustom},
		{name: "a TTL of 0s deletes at once", spec: AgentRunSpec{Retention: &Retention{JobTTLAfterEnd: "0s"}}, sandbox: SandboxBubblewrap, network: NetworkFull, ttlSet: true},
		{name: "a TTL that skipped validation keeps the Job", spec: AgentRunSpec{Retention: &Retention{JobTTLAfterEnd: "a day"}}, sandbox: SandboxBubblewrap, network: NetworkFull},
		{name: "retention without a TTL", spec: AgentRunSpec{Retention: &Retention{}}, sandbox: SandboxBubblewrap, network: NetworkFull},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.spec
			ttl, set := s.JobTTL()
			if got := s.SandboxOrDefault(); got != tt.sandbox {
				t.Errorf("sandbox %q, want %q", got, tt.sandbox)
			}
			if got := s.NetworkOrDefault().Mode; got != tt.network {
				t.Errorf("network %q, want %q", got, tt.network)
			}
			if ttl != tt.ttl || set != tt.ttlSet {
				t.Errorf("JobTTL %v %v, want %v %v", ttl, set, tt.ttl, tt.ttlSet)
			}
			if s.Stopped() != tt.stopped {
				t.Errorf("Stopped %v", s.Stopped())
			}
		})
	}
}

func TestModeFlags(t *testing.T) {
	for _, m := range []SandboxMode{SandboxBubblewrap, SandboxNone} {
		if back, ok := SandboxModeFromFlag(m.Flag()); !ok || back != m {
			t.Errorf("sandbox %s: flag %q reads back as %q %v", m, m.Flag(), back, ok)
		}
	}
	for _, m := range []NetworkMode{NetworkNone, NetworkFull, NetworkCustom} {
		if back, ok := NetworkModeFromFlag(m.Flag()); !ok || back != m {
			t.Errorf("network %s: flag %q reads back as %q %v", m, m.Flag(), back, ok)
		}
	}
	if SandboxBubblewrap.Flag() != "bubblewrap" || NetworkFull.Flag() != "full" {
		t.Errorf("flags %q %q, want the runner's bubblewrap and full", SandboxBubblewrap.Flag(), NetworkFull.Flag())
	}
	for _, v := range []string{"Bubblewrap", "seatbelt", ""} {
		if _, ok := SandboxModeFromFlag(v); ok {
			t.Errorf("SandboxModeFromFlag(%q) accepted it", v)
		}
	}
}
