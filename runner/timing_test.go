package runner

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestMark(t *testing.T) {
	at := time.Date(2026, 12, 2, 3, 40, 0, 123456789, time.FixedZone("x", 3600))
	var off, on bytes.Buffer
	(&run{stderr: &off}).mark("started", at)
	if off.Len() != 0 {
		t.Errorf("without %s: %q, want nothing", TimingEnv, off.String())
	}
	(&run{stderr: &on, timing: true}).mark("sandbox", at)
	const want = "[agentrun] timing sandbox 2026-12-02T02:40:00.123456789Z\n"
	if on.String() != want {
		t.Errorf("got %q, want %q", on.String(), want)
	}
	f := strings.Fields(on.String())
	if got, err := time.Parse(time.RFC3339Nano, f[3]); err != nil || !got.Equal(at) {
		t.Errorf("the time does not read back: %v %v", got, err)
	}
}

func TestTimingOn(t *testing.T) {
	for v, want := range map[string]bool{"1": true, "": false, "0": false, "true": false} {
		t.Setenv(TimingEnv, v)
		if timingOn() != want {
			t.Errorf("%s=%q: %v, want %v", TimingEnv, v, !want, want)
		}
	}
}
