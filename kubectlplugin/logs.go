package kubectlplugin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/format"
	"github.com/agentrun-dev/agentrun/events/format/rich"
	"github.com/agentrun-dev/agentrun/events/format/text"
	"github.com/agentrun-dev/agentrun/sidecar/tail"
)

// The --format values of logs and run.
const (
	formatText  = "text"
	formatRich  = "rich"
	formatJSONL = "jsonl"
)

// exitInterrupted is the exit code after Ctrl-C, as a shell reports a
// command that SIGINT ended.
const exitInterrupted = 130

func formatFlag(fs *pflag.FlagSet) *string {
	return fs.String("format", formatText, "text, rich (a live view when stdout is a terminal, else text) or jsonl (the stream as the sidecar wrote it)")
}

func checkFormat(name string) error {
	switch name {
	case formatText, formatRich, formatJSONL:
		return nil
	}
	return fmt.Errorf("--format %q: use text, rich or jsonl", name)
}

// logsCmd shows the events sidecar's stream of a run.
func logsCmd(ctx context.Context, e *Env, fs *pflag.FlagSet, kf *kubeFlags, args []string) int {
	follow := fs.BoolP("follow", "f", false, "follow a run in progress to its end, waiting for its Pod")
	formatName := formatFlag(fs)
	if code, done := parse(e, fs, kf, args, "kubectl agentrun logs NAME [-f] [--format text|rich|jsonl]"); done {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(e, fs, "expected one run name, got %d arguments", fs.NArg())
	}
	if err := checkFormat(*formatName); err != nil {
		return usageError(e, fs, "%v", err)
	}
	k, err := kf.connect(e)
	if err != nil {
		return fail(e, fs, err)
	}
	f := newFollower(e, k, fs.Arg(0), *formatName, *follow)
	res, err := f.show(ctx)
	f.out.close()
	switch {
	case ctx.Err() != nil:
		return exitInterrupted
	case err != nil:
		return fail(e, fs, err)
	case res.sawEnd:
	case res.complete:
		f.notef("the event log of agentrun %s has no end event; its status: %s", res.run.Name, outcome(res.run))
	default:
		f.notef("agentrun %s is in progress (%s): -f follows it to its end", res.run.Name, phase(res.run))
	}
	return 0
}

// follower shows one run's event log: it finds the Pod, waits for it with
// -f, reads the events container's log and renders it, and reconnects
// when a followed stream breaks off before the end event.
type follower struct {
	e        *Env
	k        *kube
	name     string
	follow   bool
	out      lineSink
	lastNote string
}

// lineSink is where a follower puts what it reads: the terminal's
// renderer (streamOut) for logs and run, the web page for ui.
type lineSink interface {
	// line takes one line of the log, its newline included, and reports
	// whether it was the end event; an error stops the follower.
	line(b []byte) (end bool, err error)
	// note tells a person where the follower waits or why it reads again.
	note(msg string)
	close()
}

func newFollower(e *Env, k *kube, name, formatName string, follow bool) *follower {
	return newFollowerTo(e, k, name, &streamOut{e: e, format: formatName}, follow)
}

func newFollowerTo(e *Env, k *kube, name string, out lineSink, follow bool) *follower {
	return &follower{e: e, k: k, name: name, follow: follow, out: out}
}

// shown says how the log ended.
type shown struct {
	run      *v1alpha1.AgentRun // as last read
	sawEnd   bool               // the end event was rendered
	complete bool               // the whole log was read: the container has terminated
}

// show renders the run's event log. Without -f it reads what the log holds
// now; with -f it waits for the Pod and its events container, and reads
// until the end event, or until the container has terminated without one.
// A missing Pod is an error that says why there is no log.
func (f *follower) show(ctx context.Context) (shown, error) {
	seen := 0 // complete lines already rendered, skipped when reconnecting
	for {
		run := &v1alpha1.AgentRun{}
		if err := f.k.c.Get(ctx, client.ObjectKey{Namespace: f.k.ns, Name: f.name}, run); err != nil {
			if apierrors.IsNotFound(err) {
				return shown{}, runNotFound{f.name, f.k.ns}
			}
			return shown{}, err
		}
		res := shown{run: run}
		pod, gone, err := f.findPod(ctx, run)
		if err != nil {
			return res, err
		}
		state, waiting := containerState(pod, eventsContainer)
		switch {
		case pod == nil && ended(run):
			return res, noLogError(run)
		case pod == nil && gone && !f.follow:
			return res, fmt.Errorf("the Pod %s of agentrun %s is gone, and its event log with it; the run ends without it (%s)", run.Status.PodName, run.Name, outcome(run))
		case pod == nil && gone:
			f.notef("the Pod %s is gone; waiting for the run's end in its status", run.Status.PodName)
		case pod == nil && !f.follow:
			return res, fmt.Errorf("agentrun %s has no Pod yet (%s): -f waits for it", run.Name, phase(run))
		case pod == nil:
			f.notef("waiting for the run's Pod (%s)", phase(run))
		case state == notStarted && ended(run):
			return res, fmt.Errorf("agentrun %s ended before the events container of its Pod %s started: %s", run.Name, pod.Name, outcome(run))
		case state == notStarted && !f.follow:
			return res, fmt.Errorf("the Pod %s has not started its events container yet (%s): -f waits for it", pod.Name, waiting)
		case state == notStarted:
			f.notef("waiting for the Pod %s to start (%s)", pod.Name, waiting)
		default:
			// A terminated container's log is all there is: one read
			// without follow, and the log is complete.
			streaming := f.follow && state == running
			sawEnd, n, err := f.read(ctx, pod.Name, seen, streaming, state == terminated)
			// Every read starts from the top: n counts the lines seen
			// before again.
			seen = max(seen, n)
			res.sawEnd, res.complete = sawEnd, state == terminated
			switch {
			case sawEnd:
				return res, nil
			case ctx.Err() != nil:
				return res, ctx.Err()
			case err != nil && (!f.follow || isWrite(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)):
				return res, err
			case err != nil && ended(run):
				// Nothing more will be written: a log that cannot be
				// read now (its node gone, say) will not become readable.
				return res, err
			case err != nil:
				f.notef("the event log broke off (%v); reading on", err)
			case !streaming:
				return res, nil
			}
			// The followed stream ended before the end event: the
			// container terminated (the next round reads what is left)
			// or the connection broke (the next round follows again).
		}
		if !sleep(ctx, f.e.Poll) {
			return res, ctx.Err()
		}
	}
}

// findPod is the run's Pod: the one its status names, else the newest
// Pod labelled with the run's uid. gone is true when the status names a
// Pod the API server no longer has (or one of another run of the same
// name).
func (f *follower) findPod(ctx context.Context, run *v1alpha1.AgentRun) (pod *corev1.Pod, gone bool, err error) {
	if name := run.Status.PodName; name != "" {
		p := &corev1.Pod{}
		err := f.k.c.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: name}, p)
		switch {
		case err == nil && p.Labels[labelUID] == string(run.UID):
			return p, false, nil
		case err == nil || apierrors.IsNotFound(err):
			return nil, true, nil
		default:
			return nil, false, err
		}
	}
	list := &corev1.PodList{}
	if err := f.k.c.List(ctx, list, client.InNamespace(run.Namespace), client.MatchingLabels{labelUID: string(run.UID)}); err != nil {
		return nil, false, err
	}
	for i := range list.Items {
		if pod == nil || list.Items[i].CreationTimestamp.After(pod.CreationTimestamp.Time) {
			pod = &list.Items[i]
		}
	}
	return pod, false, nil
}

// noLogError says why an ended run has no event log to show, and where
// its outcome is instead.
func noLogError(run *v1alpha1.AgentRun) error {
	keep := fmt.Sprintf("The AgentRun keeps the outcome, %s: kubectl agentrun get %s; the whole result: kubectl get agentrun %s -o jsonpath='{.status.result}'",
		outcome(run), run.Name, run.Name)
	switch {
	case run.Status.PodName == "":
		return fmt.Errorf("agentrun %s ended without a Pod, so there is no event log. %s", run.Name, keep)
	case run.Spec.Retention != nil && run.Spec.Retention.JobTTLAfterEnd != "":
		return fmt.Errorf("the Pod %s of agentrun %s is gone, and its event log with it: spec.retention.jobTTLAfterEnd (%s) removes the Job and Pod after the end. %s",
			run.Status.PodName, run.Name, run.Spec.Retention.JobTTLAfterEnd, keep)
	default:
		return fmt.Errorf("the Pod %s of agentrun %s is gone, and its event log with it (it was deleted). %s", run.Status.PodName, run.Name, keep)
	}
}

type cstate int

const (
	notStarted cstate = iota
	running
	terminated
)

// containerState is where the container is; for one not started, why (its
// waiting reason, else the Pod's phase). The events container is a native
// sidecar, so its status is among the init containers'.
func containerState(pod *corev1.Pod, name string) (cstate, string) {
	if pod == nil {
		return notStarted, ""
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range list {
			if s.Name != name {
				continue
			}
			switch {
			case s.State.Running != nil:
				return running, ""
			case s.State.Terminated != nil:
				return terminated, ""
			case s.State.Waiting != nil && s.State.Waiting.Reason != "":
				return notStarted, s.State.Waiting.Reason
			}
		}
	}
	return notStarted, orNone(string(pod.Status.Phase))
}

// read renders one read of the log, after its first skip complete lines
// (rendered by an earlier read: the log always starts from the top). It
// returns whether the end event came, and how many complete lines it read.
// A last line without its newline is rendered only when final (the
// container has terminated); otherwise it is still being written.
func (f *follower) read(ctx context.Context, pod string, skip int, follow, final bool) (sawEnd bool, lines int, err error) {
	rc, err := f.k.logs.Open(ctx, f.k.ns, pod, eventsContainer, follow)
	if err != nil {
		return false, 0, err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	for {
		line, rerr := br.ReadBytes('\n')
		complete := len(line) > 0 && line[len(line)-1] == '\n'
		if complete {
			lines++
		}
		if (complete && lines > skip) || (!complete && len(line) > 0 && final) {
			end, werr := f.out.line(line)
			if werr != nil {
				return false, lines, werr
			}
			if end {
				return true, lines, nil
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return false, lines, nil
			}
			return false, lines, rerr
		}
	}
}

// notef writes a note for people to stderr (into rich's scroll area while
// it draws), once: a waiting follower says where it waits only when that
// changes.
func (f *follower) notef(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	if msg == f.lastNote {
		return
	}
	f.lastNote = msg
	f.out.note(msg)
}

// sleep waits d, or returns false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// runNotFound: there is no run of that name (any more).
type runNotFound struct{ name, ns string }

func (e runNotFound) Error() string {
	return fmt.Sprintf("agentrun %q not found in namespace %q", e.name, e.ns)
}

// writeError is a failure to write the rendered stream: stdout is gone, so
// reading on is pointless.
type writeError struct{ err error }

func (w writeError) Error() string { return "writing the stream: " + w.err.Error() }
func (w writeError) Unwrap() error { return w.err }

func isWrite(err error) bool {
	var w writeError
	return errors.As(err, &w)
}

// streamOut renders log lines in the chosen format. The renderer is made
// at the first event, so that rich's live view does not draw over the
// notes of a follower still waiting for the Pod.
type streamOut struct {
	e      *Env
	format string
	r      format.Renderer
	lineNo int
}

// line renders one line of the log and reports whether it was the end
// event. jsonl passes the line through as it is; text and rich decode it,
// and a line that is not an event is reported and skipped, as `agentrun
// render` does, so the rest of the stream still shows.
func (s *streamOut) line(b []byte) (end bool, err error) {
	s.lineNo++
	b = bytes.TrimRight(b, "\r\n")
	if len(bytes.TrimSpace(b)) == 0 {
		return false, nil
	}
	if s.format == formatJSONL {
		if _, err := s.e.Stdout.Write(append(b, '\n')); err != nil {
			return false, writeError{err}
		}
		return tail.IsEnd(b[:min(len(b), 256)]), nil
	}
	ev, err := events.Decode(b)
	if err != nil {
		fmt.Fprintf(s.stderr(), "line %d of the event log: %v\n", s.lineNo, err)
		return false, nil
	}
	if ev == nil {
		return false, nil // a type this plugin does not know (a newer runner's)
	}
	if err := s.renderer().Event(ev); err != nil {
		return false, writeError{err}
	}
	_, end = ev.(*events.End)
	return end, nil
}

func (s *streamOut) renderer() format.Renderer {
	if s.r != nil {
		return s.r
	}
	out, isFile := s.e.Stdout.(*os.File)
	if s.format == formatRich && isFile {
		errFile, ok := s.e.Stderr.(*os.File)
		if !ok {
			errFile = os.Stderr
		}
		s.r = rich.New(out, errFile, rich.Options{})
	} else {
		// rich on anything but a terminal is text, as rich.New decides
		// for files.
		s.r = text.New(s.e.Stdout, text.Options{})
	}
	return s.r
}

// stderr is where notes go: rich's scroll area while it draws.
func (s *streamOut) stderr() io.Writer {
	if w, ok := s.r.(interface{ StderrWriter() io.Writer }); ok && w.StderrWriter() != nil {
		return w.StderrWriter()
	}
	return s.e.Stderr
}

// note writes a follower's note for people.
func (s *streamOut) note(msg string) { fmt.Fprintln(s.stderr(), msg) }

func (s *streamOut) close() {
	if s.r != nil {
		s.r.Close()
	}
}
