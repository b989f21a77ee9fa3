package runner

import (
	"fmt"
	"os"
	"time"
)

// TimingEnv, set to "1" in the runner's environment, makes it write the
// moments of its own start-up to its stderr, one line each:
//
//	[agentrun] timing PHASE 2026-12-02T03:40:00.123456789Z
//
// PHASE is "started" (agentrun began parsing its command line), "sandbox"
// (the request is prepared: the sandbox is being built) and "ready" (the
// sandbox reported ready and the CLI runs in it; without a sandbox, the CLI
// was started). hack/bench-start.sh reads them from the agent container's
// log: object timestamps have only a second's resolution and the event
// stream's times a millisecond's. Off by default, the lines are for
// measurements, not a contract the way the event stream is.
const TimingEnv = "AGENTRUN_TIMING"

// timingOn says whether TimingEnv asks for the timing lines.
func timingOn() bool { return os.Getenv(TimingEnv) == "1" }

// mark writes the timing line of phase at t when TimingEnv asks for it.
func (r *run) mark(phase string, t time.Time) {
	if r.timing {
		fmt.Fprintf(r.stderr, "[agentrun] timing %s %s\n", phase, t.UTC().Format(time.RFC3339Nano))
	}
}
