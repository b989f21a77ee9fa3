// Package adapters defines what every runtime adapter does: build the launch
// command for its CLI, translate each raw output line into records, and decide
// success or failure from the last state and the exit code. One subpackage
// per runtime; Lookup finds them by the runtime's name.
package adapters

import (
	"fmt"
	"regexp"
	"sort"
	"sync"

	"github.com/agentrun-dev/agentrun/events/records"
	"github.com/agentrun-dev/agentrun/internal/safefile"
)

// LaunchSpec is what the caller asks of a run, runtime-neutral.
type LaunchSpec struct {
	Binary      string   // the CLI to execute (resolved by the runner)
	Prompt      string   // the user's prompt
	Images      []string // image paths as the caller gave them
	Model       string   // "" = the runtime's default
	NoSubagents bool     // take the subagent tool away
	Cwd         string   // the workspace, absolute
	// SessionID is the id for a new session when it is to be saved; Resume is
	// the id of a saved session to continue. Both "" when nothing is saved.
	SessionID string
	Resume    string
	// StateDir is a private, writable directory for this run (the runtime's
	// config home); the runner creates and removes it.
	StateDir string
	// Env is the environment the runtime will start with, before the
	// adapter's own variables: in the sandbox its base variables plus the
	// user's --pass-env, --env-file and --env, without one agentrun's
	// environment plus those. Adapters take from it the settings a CLI reads only from its
	// config files (a model provider's base URL), so that the config they
	// write agrees with what the CLI itself sees.
	Env map[string]string
}

// Files opens what the run reads and writes where the agent can write (its
// workspace and its state directory) without following links it planted;
// adapters read images and sessions through it.
func (s LaunchSpec) Files() safefile.Guard {
	var dirs []string
	for _, d := range []string{s.Cwd, s.StateDir} {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return safefile.Guard{Untrusted: dirs}
}

// Launch is how to start the runtime.
type Launch struct {
	Argv  []string // argv[0] is the binary
	Env   []string // K=V pairs the adapter needs on top of the base environment
	Stdin []byte   // written to the runtime's stdin, which is then closed
	// EchoesPrompt is false when the runtime does not echo the prompt; the
	// runner then emits the prompt record itself right after start.
	EchoesPrompt bool
}

// Exit is how the runtime process ended.
type Exit struct {
	Code     int  // exit code; meaningful when !Signaled
	Signaled bool // killed by a signal (agentrun's own kill included)
}

// Verdict is the adapter's judgement of a run that was not stopped by
// agentrun (timeout, limit and interrupt take precedence and are decided by
// the runner).
type Verdict struct {
	Failed bool
	// Detail is the runtime's own error message when Failed, or "" when it
	// gave none (the runner then falls back to the end of stderr).
	Detail string
	// Unfinished: the output stops before the runtime's end of the turn
	// (its result line), and Detail says so in words for a live run ("...
	// exited without a result"); a replay words it for a saved file.
	Unfinished bool
}

// Emit receives the records of one line.
type Emit func(records.Record)

// Adapter translates one run of one runtime. It is stateful: a new Adapter
// is made for every run (or replay).
type Adapter interface {
	// Launch builds the command for spec.
	Launch(spec LaunchSpec) (*Launch, error)
	// Translate handles one raw line (without its LF). Lines it does not
	// understand produce no records and no error.
	Translate(line []byte, emit Emit)
	// Close emits what is still owed at the end of the output (for example
	// the usage of a model call whose end never came).
	Close(emit Emit)
	// Verdict decides failure from the last state and the exit.
	Verdict(exit Exit) Verdict
}

// Runtime describes one supported runtime.
type Runtime struct {
	Name string
	// Binary is the CLI's executable name (from clis.txt), looked up in
	// PATH unless the environment variable BinaryEnv names another path.
	Binary    string
	BinaryEnv string
	New       func() Adapter
}

var (
	mu       sync.RWMutex
	runtimes = map[string]Runtime{}
)

// Register makes a runtime available; adapters call it from init, and
// package adapters/all links them. Its CLI's executable is clis.txt's: a
// runtime without a pinned CLI could not be installed, so it panics.
func Register(r Runtime) {
	cli, ok := PinnedCLI(r.Name)
	if !ok {
		panic("adapters: runtime " + r.Name + " has no line in adapters/clis.txt")
	}
	r.Binary = cli.Binary
	mu.Lock()
	defer mu.Unlock()
	runtimes[r.Name] = r
}

// Lookup returns the runtime called name.
func Lookup(name string) (Runtime, error) {
	mu.RLock()
	defer mu.RUnlock()
	r, ok := runtimes[name]
	if !ok {
		return Runtime{}, fmt.Errorf("unknown runtime %q (known: %v)", name, namesLocked())
	}
	return r, nil
}

// Names lists the registered runtimes, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return namesLocked()
}

func namesLocked() []string {
	out := make([]string, 0, len(runtimes))
	for n := range runtimes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Replayer is implemented by adapters that must know what a run asked for
// to translate its saved output (agentrun translate): a runtime whose
// output names no model reports the --model value as the model.
type Replayer interface {
	// Replay readies the adapter for output saved from a run of spec; it
	// launches nothing and writes no file.
	Replay(spec LaunchSpec)
}

// sessionID is what a session id may look like: letters, digits, '-' and
// '_', at most 128 characters, as the ids of claude-code, codex and pi are
// (UUIDs). The id names a file (DIR/<runtime>/<id>.jsonl) and comes from
// the CLI's output, which the agent can write into (a tool may write to its
// parent's stdout through /proc/$PPID/fd/1): an id with a '/' or ".." would
// make it a path of the agent's choosing.
// Compiled on first use: its bounded repetition makes a large program,
// and every start of agentrun would pay for it.
var sessionID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`) })

// ValidSessionID reports whether id may name a saved session.
func ValidSessionID(id string) bool { return sessionID().MatchString(id) }

// MaxSessionBytes bounds a session file the runner copies in or out of the
// agent's state directory: far above a long transcript with images (tens
// of MB), it stops a sparse file of the agent's from filling the disk.
const MaxSessionBytes = 1 << 30

// MaxImageBytes bounds an --image file: the model APIs take a few MB to
// 20 MB per image.
const MaxImageBytes = 64 << 20

// SessionStore is implemented by adapters whose runtime keeps a session that
// a later run can resume (--session-dir, --resume).
type SessionStore interface {
	// SaveSession copies the session id that the run of spec left in its
	// state directory to file; false when the runtime left none.
	SaveSession(spec LaunchSpec, id, file string) (bool, error)
	// RestoreSession puts a saved session file where the runtime of spec
	// will find it for --resume.
	RestoreSession(spec LaunchSpec, file string) error
}
