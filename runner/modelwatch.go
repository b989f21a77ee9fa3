package runner

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentrun-dev/agentrun/proxy"
)

// NoModelNoteAfter is how long after the start a run may go without a
// sign of a model request before a [note] says so: long enough for a CLI
// to start and send its first call (a few seconds), short enough that a
// CLI retrying an endpoint it cannot reach (claude-code for minutes,
// codex without end) is not mistaken for a slow model. The run goes on:
// there is no default timeout.
const NoModelNoteAfter = 30 * time.Second

// modelWatch tells whether the run has shown a sign of a model request:
// a connection the proxy let through, or a model call or text in the
// runtime's output. Until then it remembers the proxy's last refusal,
// which the note names.
type modelWatch struct {
	mu      sync.Mutex
	seen    bool
	refused int
	last    proxy.Access // the last refusal
}

func (w *modelWatch) access(a proxy.Access) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if a.Allowed {
		w.seen = true
		return
	}
	n := a.Suppressed
	if n == 0 {
		n = 1
	}
	w.refused += n
	w.last = a
}

func (w *modelWatch) output(pr progress) {
	if pr.modelSeen {
		w.mu.Lock()
		w.seen = true
		w.mu.Unlock()
	}
}

// note is the [note] line when nothing was seen, "" otherwise. runtime
// names the CLI; proxied says whether its connections go through the
// proxy (in the sandbox, with a network); local are the base URLs on the
// loopback.
func (w *modelWatch) note(runtime string, proxied bool, local []localURL, timeout time.Duration) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen {
		return ""
	}
	secs := int(NoModelNoteAfter / time.Second)
	var b strings.Builder
	fmt.Fprintf(&b, "no model request in %d s: %s reported no model call", secs, runtime)
	switch {
	case !proxied:
		b.WriteString(" yet. A slow model may still answer; else check the model's base URL and key variables (docs/runtimes.md)")
	case w.refused > 0:
		fmt.Fprintf(&b, ", and the proxy let no connection through: it refused %d, the last to %s (%s; see the network events). Allow the model's host with --allow-host HOST:PORT, or point the base URL at an allowed one",
			w.refused, net.JoinHostPort(w.last.Host, strconv.Itoa(w.last.Port)), w.last.Reason)
	default:
		b.WriteString(", and it asked the proxy for no connection. Check the model's base URL and key variables (docs/runtimes.md): a host listed in --env NO_PROXY is dialled inside the sandbox, where only the proxy leads out")
	}
	for _, u := range local {
		fmt.Fprintf(&b, "; %s points at %s on the loopback", u.name, u.addr())
	}
	if timeout > 0 {
		fmt.Fprintf(&b, ". The run goes on until --timeout %s", timeout)
	} else {
		b.WriteString(". The run goes on (no --timeout)")
	}
	return b.String()
}

// watchModel writes the note NoModelNoteAfter after the start when no
// model request was seen by then and the runtime still runs.
func (r *run) watchModel() {
	t := time.AfterFunc(NoModelNoteAfter, func() {
		select {
		case <-r.proc.exited:
			return
		default:
		}
		p := r.p
		n := r.model.note(r.o.Runtime, p.iso.sandboxed() && p.iso.policy.Mode != proxy.ModeNone, p.iso.local, r.o.Timeout)
		if n == "" {
			return
		}
		r.pipe.mu.Lock()
		defer r.pipe.mu.Unlock()
		if !r.ending { // after end, no line
			_ = r.out.Note(n)
		}
	})
	prev := r.cleanup
	r.cleanup = func() { t.Stop(); prev() }
}
