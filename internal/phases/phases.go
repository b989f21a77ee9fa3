// Package phases times the steps of one sandbox start for
// hack/bench-sandbox.sh: with AGENTRUN_PHASES=FILE in agentrun's
// environment, each Mark ends the step before it and Write appends the
// timeline to FILE as one line of "name=milliseconds" pairs; without it
// every call is a no-op that costs a branch. The steps run one after
// another on one goroutine, so a timeline of marks is the whole profile.
package phases

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// EnvVar names the file the timeline is appended to.
const EnvVar = "AGENTRUN_PHASES"

var (
	mu    sync.Mutex
	path  = os.Getenv(EnvVar)
	start = time.Now() // as near the process's start as Go lets a package be
	marks []mark
)

type mark struct {
	name string
	at   time.Time
}

// Enabled reports whether a timeline is being recorded.
func Enabled() bool { return path != "" }

// Mark ends the current step and begins the one called name.
func Mark(name string) {
	if path == "" {
		return
	}
	mu.Lock()
	marks = append(marks, mark{name, time.Now()})
	mu.Unlock()
}

// Write ends the last step and appends the timeline to the file: first
// "init" (from the package's start to the first mark: the Go runtime's
// and agentrun's own start), then each step in order. A step marked more
// than once adds up.
func Write() {
	if path == "" {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	end := time.Now()
	var b strings.Builder
	prev := mark{"init", start}
	for i := 0; i <= len(marks); i++ {
		next := mark{"", end}
		if i < len(marks) {
			next = marks[i]
		}
		fmt.Fprintf(&b, "%s=%.3f ", prev.name, float64(next.at.Sub(prev.at))/1e6)
		prev = next
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = fmt.Fprintln(f, strings.TrimSpace(b.String()))
	marks = nil
}
