// Package phases times the steps of one sandbox start for
// hack/bench-sandbox.sh: with AGENTRUN_PHASES=FILE in agentrun's
// environment, each Mark ends the step before it and WriteTo writes the
// timeline as one line of "name=milliseconds" pairs, which the caller
// appends to FILE (Path); without it every Mark is a no-op that costs a
// branch. The steps run one after another on one goroutine, so a timeline
// of marks is the whole profile.
package phases

import (
	"fmt"
	"io"
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

// Path is the file the timeline is for ("" when none is recorded).
func Path() string { return path }

// WriteTo ends the last step and writes the timeline to w as one line:
// first "init" (from the package's start to the first mark: the Go
// runtime's and agentrun's own start), then each step in order. A step
// marked more than once appears as often (the reader adds them up). The
// next timeline starts empty.
func WriteTo(w io.Writer) error {
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
	marks = nil
	_, err := fmt.Fprintln(w, strings.TrimSpace(b.String()))
	return err
}
