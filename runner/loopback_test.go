package runner

import (
	"strings"
	"testing"

	"github.com/agentrun-dev/agentrun/podcontract"
)

func TestLocalURLs(t *testing.T) {
	env := [][2]string{
		{"ANTHROPIC_BASE_URL", "http://api.example.com"}, // the last value counts
		{"OPENAI_BASE_URL", "http://127.0.0.1:8099/v1"},
		{"ANTHROPIC_BASE_URL", "http://LOCALHOST:8100"},
		{"MY_BASE_URL", "https://[::1]/x"},
		{"ZERO_BASE_URL", "http://0.0.0.0:81"},
		{"OTHER_URL", "http://127.0.0.1:9"},       // not a base URL
		{"FILE_BASE_URL", "file:///127.0.0.1"},    // not http
		{"REMOTE_BASE_URL", "http://10.0.0.5:80"}, // private, not local
		{"BAD_BASE_URL", "http://127.0.0.1:x"},
	}
	var got []string
	for _, u := range localURLs(env) {
		got = append(got, u.name+"="+u.addr())
	}
	want := "ANTHROPIC_BASE_URL=localhost:8100 OPENAI_BASE_URL=127.0.0.1:8099 MY_BASE_URL=[::1]:443 ZERO_BASE_URL=0.0.0.0:81"
	if strings.Join(got, " ") != want {
		t.Errorf("localURLs = %q, want %q", strings.Join(got, " "), want)
	}
}

// TestLoopbackBaseURL: a base URL on the loopback goes through the proxy
// (its host leaves NO_PROXY, allowed or not, so a refusal is a network
// event and not a silent dial of the sandbox's empty loopback), and the
// [note] says whether it is reached or what to pass.
func TestLoopbackBaseURL(t *testing.T) {
	tests := []struct {
		name    string
		flags   podcontract.SandboxFlags
		url     string
		noProxy string
		note    string
	}{
		{"allowed address", podcontract.SandboxFlags{AllowHosts: []string{"127.0.0.1:8099"}}, "http://127.0.0.1:8099/v1",
			"localhost,::1", "the agent reaches this machine's 127.0.0.1:8099 (MY_BASE_URL) through the proxy, as --allow-host 127.0.0.1:8099 allows"},
		{"allowed localhost", podcontract.SandboxFlags{AllowHosts: []string{"localhost:8099"}}, "http://localhost:8099",
			"127.0.0.1,::1", "the agent reaches this machine's localhost:8099 (MY_BASE_URL) through the proxy, as --allow-host localhost:8099 allows"},
		{"another port allowed", podcontract.SandboxFlags{AllowHosts: []string{"127.0.0.1:8098"}}, "http://127.0.0.1:8099",
			"localhost,::1", "MY_BASE_URL points at 127.0.0.1:8099 on the loopback, which inside the sandbox is the sandbox's own: the proxy refuses it. Pass --allow-host 127.0.0.1:8099"},
		{"full network", podcontract.SandboxFlags{}, "http://127.0.0.1:8099",
			"localhost,::1", "the proxy refuses it. Pass --allow-host 127.0.0.1:8099 to reach this machine's 127.0.0.1:8099 through the proxy"},
		{"network none", podcontract.SandboxFlags{Network: "none"}, "http://[::1]:8099",
			"", "MY_BASE_URL points at [::1]:8099 on the loopback, and --network none lets no connection out of the sandbox: drop --network none and pass --allow-host [::1]:8099"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.flags.Sandbox = "bubblewrap"
			iso, err := newIsolation(tt.flags, openWS(t, t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			user := [][2]string{{"MY_BASE_URL", tt.url}}
			iso.local = localURLs(user)
			if env := envMap(iso.env("/h", nil, user)); env["NO_PROXY"] != tt.noProxy {
				t.Errorf("NO_PROXY %q, want %q", env["NO_PROXY"], tt.noProxy)
			}
			notes := strings.Join(iso.notes("", "/w"), "\n")
			if !strings.Contains(notes, tt.note) {
				t.Errorf("notes %q, want %q", notes, tt.note)
			}
		})
	}
}

// TestLoopbackRefusedInPod: in a Pod the loopback holds the events
// sidecar, so what could only open it is rejected before the run, and a
// base URL there gets a note that points at a Service.
func TestLoopbackRefusedInPod(t *testing.T) {
	for _, tt := range []struct {
		allow, add []string
		want       string
	}{
		{[]string{"127.0.0.1:8788"}, nil, "--allow-host 127.0.0.1:8788: in a Pod the loopback"},
		{[]string{"localhost:8788"}, nil, "--allow-host localhost:8788"},
		{[]string{"127.0.0.0/8:8788"}, nil, "--allow-host 127.0.0.0/8:8788"},
		{[]string{"[::1]:8788"}, nil, "--allow-host [::1]:8788"},
		{[]string{"0.0.0.0:8788"}, nil, "--allow-host 0.0.0.0:8788"},
		{[]string{"model.test:80"}, []string{"model.test=127.0.0.1"}, "--add-host model.test=127.0.0.1"},
	} {
		iso, err := newIsolation(podcontract.SandboxFlags{Sandbox: "bubblewrap", AllowHosts: tt.allow, AddHosts: tt.add}, openWS(t, t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		err = refuseLocalInPod(iso, tt.add)
		if _, ok := err.(rejection); !ok || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v %v: err %v, want a rejection with %q", tt.allow, tt.add, err, tt.want)
		}
	}
	// A CIDR wider than the loopback is no loopback entry (the proxy
	// refuses the loopback inside it at the connection).
	iso, _ := newIsolation(podcontract.SandboxFlags{Sandbox: "bubblewrap", AllowHosts: []string{"0.0.0.0/0:443"}}, openWS(t, t.TempDir()))
	if err := refuseLocalInPod(iso, nil); err != nil {
		t.Errorf("0.0.0.0/0:443 rejected: %v", err)
	}
	iso.policy.RefuseLocal = true
	iso.local = localURLs([][2]string{{"OPENAI_BASE_URL", "http://127.0.0.1:8788"}})
	if n := strings.Join(iso.notes("", "/w"), "\n"); !strings.Contains(n, "in a Pod holds agentrun's own servers") {
		t.Errorf("notes %q", n)
	}
	if d := iso.policy.Decide("127.0.0.1", 8788, iso.resolver); d.Allowed {
		t.Error("a Pod's proxy let the loopback through")
	}
}
