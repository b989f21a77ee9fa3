package runner

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentrun-dev/agentrun/adapters"
	"github.com/agentrun-dev/agentrun/events"
	"github.com/agentrun-dev/agentrun/events/aggregator"
	"github.com/agentrun-dev/agentrun/events/format"
	"github.com/agentrun-dev/agentrun/events/records"
	"github.com/agentrun-dev/agentrun/internal/safefile"
	"github.com/agentrun-dev/agentrun/podcontract"
	"github.com/agentrun-dev/agentrun/proxy"
	"github.com/agentrun-dev/agentrun/proxy/credentials"
	"github.com/agentrun-dev/agentrun/proxy/meter"
	live "github.com/agentrun-dev/agentrun/sidecar/progress"
)

// NoSandboxNote is the [note] line of a run without a sandbox.
const NoSandboxNote = "no sandbox (--sandbox none): the agent can read and write everything this user can, see agentrun's environment, and reach any host"

// Run executes one run and returns its end event. The event stream goes to
// out; the runtime's stderr (and agentrun's own warnings) to stderr. The run
// stops with "interrupted" when ctx is cancelled (the caller cancels it on
// SIGINT or SIGTERM).
func Run(ctx context.Context, o Options, out format.Renderer, stderr io.Writer) *events.End {
	r := &run{o: o, started: o.Started, out: out, stderr: stderr, cleanup: func() {}, id: o.Resume, timing: timingOn()}
	if r.id == "" {
		r.id = newUUID()
	}
	if r.started.IsZero() {
		r.started = time.Now()
	}
	r.mark("started", r.started)
	r.agg = aggregator.New(func(e events.Event) error { return out.Event(e) }, time.Now)
	if l, ok := out.(format.Live); ok {
		// The text being written reaches the live view only.
		r.agg.OnPartial(func(p events.Partial) { _ = l.Partial(p) })
	}
	end := r.run(ctx)
	if o.SummaryPath != "" {
		// The end summary goes where a Pod's termination message is read.
		s := podcontract.FromEnd(end, r.agg.Counters())
		s.Isolation = r.isolation()
		s.TraceID = o.TraceID
		if err := WriteSummary(FilesFor(o.Cwd), o.SummaryPath, s); err != nil {
			r.outputLost(errors.New(CreateError("--summary", o.SummaryPath, err)))
		}
	}
	return end
}

func (r *run) run(ctx context.Context) *events.End {
	defer func() {
		r.cleanup() // the phases extend cleanup as they go
		r.p.close()
		r.repo.close()
	}()
	if end := r.cloneRepo(ctx); end != nil {
		return end
	}
	for _, phase := range []func() *events.End{r.prepare, r.build, r.start} {
		if end := phase(); end != nil {
			return end
		}
	}
	r.watch(ctx)
	r.watchModel()
	r.consume()
	return r.finish()
}

// run is the state of one Run, filled phase by phase.
type run struct {
	o       Options
	started time.Time
	out     format.Renderer
	stderr  io.Writer
	agg     *aggregator.Aggregator
	cleanup func()

	p        *prepared
	bin      string
	stateDir string
	adapter  adapters.Adapter
	store    adapters.SessionStore // nil when the runtime keeps no sessions
	spec     adapters.LaunchSpec
	launch   *adapters.Launch
	raw      io.Writer
	tail     *tail
	pipe     *pipeline
	proc     *process
	stop     *stopper
	// proxyStop is stop for the proxy's goroutines (the meter's limit),
	// which serve calls from the sandbox's start, before watch sets stop.
	proxyStop atomic.Pointer[stopper]
	meter     *meter.Meter // the model calls to credential hosts, nil without
	meterMu   sync.Mutex   // orders the writes of --meter-file
	// unmetered counts the calls the meter could not count, for the
	// bound on their warnings.
	unmetered atomic.Int32
	// unavailable: the sandbox could not be built (end.detail says why).
	unavailable bool
	// id is the run's id: its session id (the one given to the CLI, or
	// --resume's), and its branch's name without --branch.
	id string
	// repo is --repo's checkout, nil without.
	repo *repo
	// model watches for the first sign of a model request (modelwatch.go).
	model modelWatch
	// ending: end is being written (under pipe.mu); no [note] after it.
	ending bool
	// timing: write the start-up's timing lines (timing.go).
	timing bool
}

// cloneRepo clones --repo into the workspace, before anything else.
func (r *run) cloneRepo(ctx context.Context) *events.End {
	repo, err := prepareRepo(ctx, &r.o, r.id)
	if err != nil {
		var rj rejection
		if errors.As(err, &rj) {
			return r.end(events.StatusRejected, rj.msg)
		}
		return r.end(events.StatusFailed, err.Error())
	}
	r.repo = repo
	return nil
}

// isolation is the summary's account of how the agent ran; nil for a
// request rejected before its sandbox was tried.
func (r *run) isolation() *podcontract.Isolation {
	if r.p == nil {
		return nil
	}
	iso := r.p.iso
	return &podcontract.Isolation{Sandbox: iso.mode, NetworkMode: iso.policy.Mode, NetworkEnforced: iso.sandboxed(), Unavailable: r.unavailable}
}

// end finishes the stream early, before or instead of the runtime.
func (r *run) end(status, detail string) *events.End {
	return r.agg.Finish(aggregator.Outcome{Status: status, Detail: detail, Started: r.started})
}

func (r *run) warn(msg string) { fmt.Fprintf(r.stderr, "[agentrun] %s\n", msg) }

// prepare validates the request and finds the CLI.
func (r *run) prepare() *events.End {
	p, err := prepare(r.o)
	if err != nil {
		var rj rejection
		if errors.As(err, &rj) {
			return r.end(events.StatusRejected, rj.msg)
		}
		return r.end(events.StatusFailed, err.Error())
	}
	r.p = p
	if err := r.repo.allow(p); err != nil {
		return r.end(events.StatusRejected, err.Error())
	}
	if r.bin, err = resolveBinary(p.runtime); err != nil {
		return r.end(events.StatusFailed, err.Error())
	}
	return nil
}

// build makes the runtime's command in a private state directory,
// restoring a session to resume, and opens --raw.
func (r *run) build() *events.End {
	o := r.o
	stateDir, err := os.MkdirTemp("", "agentrun-")
	if err != nil {
		return r.end(events.StatusFailed, fmt.Sprintf("cannot create the run's state directory: %v", err))
	}
	r.stateDir = stateDir
	var closers []func()
	r.cleanup = func() {
		for _, c := range closers {
			c()
		}
		os.RemoveAll(stateDir)
	}
	r.adapter = r.p.runtime.New()
	r.spec = r.p.spec
	r.spec.Binary, r.spec.StateDir = r.bin, stateDir
	if o.SessionDir != "" && o.Resume == "" {
		r.spec.SessionID = r.id
	}
	r.store, _ = r.adapter.(adapters.SessionStore)
	if o.Resume != "" {
		if r.store == nil {
			return r.end(events.StatusRejected, fmt.Sprintf("--resume: %s sessions cannot be resumed by agentrun", o.Runtime))
		}
		if err := r.store.RestoreSession(r.spec, sessionFile(o.SessionDir, o.Runtime, o.Resume)); err != nil {
			return r.end(events.StatusFailed, fmt.Sprintf("--resume %s: %v", o.Resume, err))
		}
	}
	if c := r.p.creds; c != nil {
		r.meter = r.newMeter()
		closers = append(closers, c.close)
		var extra []credentials.Dest
		if r.repo != nil {
			extra = append(extra, r.repo.checkout.Dest())
		}
		if err := c.build(stateDir, r.meter, o.MaxTokens, extra...); err != nil {
			return r.end(events.StatusFailed, fmt.Sprintf("cannot set up the credentials: %v", err))
		}
		r.repo.newScope(c)
		r.writeMeterFile()
	}
	if err := r.repo.writeAgentConfig(stateDir, filepath.Join(stateDir, "agentrun-ca-bundle.pem")); err != nil {
		return r.end(events.StatusFailed, fmt.Sprintf("cannot write the agent's git configuration: %v", err))
	}
	// The adapter sees the environment the CLI will start with (its own
	// variables aside): codex and pi write the model endpoint that the user
	// gives with --env into the CLI's config files.
	r.spec.Env = envMap(r.p.iso.env(filepath.Join(stateDir, "home"), nil, r.agentVars()))
	if r.launch, err = r.adapter.Launch(r.spec); err != nil {
		return r.end(events.StatusRejected, err.Error())
	}
	if o.RawPath != "" {
		f, err := r.p.files().Create(o.RawPath, 0o600)
		if err != nil {
			return r.end(events.StatusRejected, CreateError("--raw", o.RawPath, err))
		}
		closers = append(closers, func() { f.Close() })
		r.raw = &keptWriter{w: f, onErr: func(written int64, err error) {
			r.outputLost(fmt.Errorf("--raw %s: %v after %d bytes: the raw output is incomplete from there on; the run and its events go on", o.RawPath, errCause(err), written))
		}}
	}
	return nil
}

// start starts the runtime, in the sandbox unless --sandbox none, and
// writes start once it runs (a launch that fails gives only end).
func (r *run) start() *events.End {
	o, p := r.o, r.p
	r.tail = newTail(r.stderr, 500)
	p.iso.prepareHost()
	undo, err := p.iso.prepareWorkspace(p.ws, r.warn)
	if err != nil {
		return r.end(events.StatusFailed, err.Error())
	}
	prev := r.cleanup
	r.cleanup = func() { prev(); undo() }
	home := filepath.Join(r.stateDir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return r.end(events.StatusFailed, fmt.Sprintf("cannot create the agent's home: %v", err))
	}
	r.pipe = newPipeline(r.adapter, r.agg)
	ps := processSpec{argv: r.launch.Argv, env: p.iso.env(home, r.launch.Env, r.agentVars()), dir: p.cwd,
		stdin: r.launch.Stdin, stderr: r.tail}
	if p.creds != nil {
		ps.intercept = p.creds.intercept
		if r.repo != nil && r.repo.scope != nil {
			ps.intercept = proxy.Interceptors{p.creds.intercept, r.repo.scope}
		}
	}
	if p.iso.sandboxed() {
		ps.sandbox = p.iso.sandboxConfig(p.ws, r.stateDir, r.bin)
		ps.policy, ps.resolver = p.iso.policy, p.iso.resolver
		ps.onAccess = func(a proxy.Access) {
			r.model.access(a)
			r.pipe.record(records.Network{Host: a.Host, Port: a.Port, Allowed: a.Allowed, Reason: a.Reason, Suppressed: a.Suppressed})
		}
	}
	// The [note] lines and start come before anything the proxy reports:
	// the aggregator stays locked until they are written.
	r.pipe.mu.Lock()
	r.mark("sandbox", time.Now())
	proc, err := startProcess(ps)
	if err != nil {
		defer r.pipe.mu.Unlock()
		var sbErr errSandboxStart
		if errors.As(err, &sbErr) {
			r.unavailable = true
			return r.end(events.StatusFailed, "the sandbox failed before the agent started: "+sbErr.Error())
		}
		if p.iso.sandboxed() {
			// Preparing the sandbox failed (an idmapped mount, the deny
			// list): the sandbox is as unavailable as when bwrap fails.
			r.unavailable = true
		}
		return r.end(events.StatusFailed, err.Error())
	}
	r.proc = proc
	r.mark("ready", time.Now())
	for _, n := range p.iso.notes(o.SessionDir, p.cwd) {
		_ = r.out.Note(n)
	}
	r.agg.Start(&events.Start{Runtime: o.Runtime, Sandbox: p.iso.mode, Network: p.iso.network(),
		DenyRead: p.iso.startDenyRead(), Model: events.StringOrNil(o.Model), Cwd: p.cwd,
		Argv: displayArgv(r.launch.Argv, r.spec.Prompt), Env: p.envNames(), Credentials: p.creds.names(),
		TraceID: o.TraceID})
	r.pipe.mu.Unlock()
	if !r.launch.EchoesPrompt {
		r.pipe.record(records.Prompt{Text: r.spec.Prompt, Images: o.Images})
	}
	return nil
}

// watch stops the run on --timeout and on ctx (SIGINT, SIGTERM).
func (r *run) watch(ctx context.Context) {
	o := r.o
	r.stop = &stopper{proc: r.proc, grace: o.Grace}
	if r.stop.grace <= 0 {
		r.stop.grace = DefaultGrace
	}
	r.startProxyStop(r.stop)
	if o.Timeout > 0 {
		t := time.AfterFunc(o.Timeout, func() {
			r.stop.stop(events.StatusTimeout, fmt.Sprintf("--timeout %d reached", int(o.Timeout/time.Second)))
		})
		prev := r.cleanup
		r.cleanup = func() { t.Stop(); prev() }
	}
	go func() {
		select {
		case <-ctx.Done():
			r.stop.stop(events.StatusInterrupted, "")
		case <-r.proc.exited:
		}
	}()
}

// consume reads the runtime's output to the end, checking --max-turns and
// --max-tokens after every line.
func (r *run) consume() {
	o := r.o
	onLine := func(pr progress) {
		r.model.output(pr)
		if o.MaxTurns > 0 && pr.mainCalls > o.MaxTurns {
			r.stop.stop(events.StatusLimit, fmt.Sprintf("--max-turns %d reached: the main agent started model call %d", o.MaxTurns, pr.mainCalls))
		}
		if o.MaxTokens > 0 && pr.tokens > o.MaxTokens {
			r.stop.stop(events.StatusLimit, fmt.Sprintf("--max-tokens %d reached: %d tokens used", o.MaxTokens, pr.tokens))
		}
	}
	if err := r.pipe.consume(r.proc.stdout, r.raw, onLine, r.warn, false); err != nil {
		r.warn(fmt.Sprintf("reading %s output: %v", o.Runtime, err))
	}
}

// finish waits for the runtime, decides the end status (agentrun's own stop
// first, then the adapter's verdict), saves the session and writes end.
func (r *run) finish() *events.End {
	o := r.o
	exit := r.proc.wait()
	r.pipe.close()
	outcome := aggregator.Outcome{Started: r.started, ExitCode: exit.code(), Meter: meterOf(r.meter)}
	if cause, detail := r.stop.result(); cause != "" {
		outcome.Status, outcome.Detail = cause, detail
	} else {
		v := r.adapter.Verdict(adapters.Exit{Code: exit.Code, Signaled: exit.Signaled})
		outcome.Status = events.StatusFinished
		if v.Failed {
			outcome.Status, outcome.Detail = events.StatusFailed, failureDetail(v.Detail, r.tail.String(), o.Runtime, exit)
		}
	}
	if o.SessionDir != "" && r.store != nil {
		outcome.SessionID = r.saveSession()
	}
	if r.repo != nil {
		outcome.Git = r.repo.publish(outcome.Status, r.warn)
	}
	r.pipe.mu.Lock()
	r.ending = true
	end := r.agg.Finish(outcome)
	r.pipe.mu.Unlock()
	if m := end.Meter; m != nil && m.Unmetered > 0 {
		r.warn(fmt.Sprintf("%d calls to the credential destinations could not be metered, so %s's token counts cannot be checked (metered: input %d, output %d, cache read %d, cache write %d over %d calls); see end.meter",
			m.Unmetered, o.Runtime, m.InputTokens, m.OutputTokens, m.CacheReadTokens, m.CacheWriteTokens, m.Calls))
	} else if m != nil && !m.Matches {
		r.warn(fmt.Sprintf("the model API reported other token counts than %s did (metered: input %d, output %d, cache read %d, cache write %d over %d calls); see end.meter",
			o.Runtime, m.InputTokens, m.OutputTokens, m.CacheReadTokens, m.CacheWriteTokens, m.Calls))
	}
	return end
}

// saveSession saves the run's session in --session-dir and returns its id,
// or "" when none was saved. The id is the one agentrun gave the CLI (or
// --resume's), never the one the CLI's output reports: the agent can write
// into that output (/proc/$PPID/fd/1), and a reported id of another run's
// session would overwrite that run's file with the agent's transcript.
func (r *run) saveSession() string {
	o := r.o
	id := r.spec.SessionID
	if o.Resume != "" {
		id = o.Resume
	}
	switch reported := r.agg.SessionID(); {
	case reported == "" || reported == id:
	case !adapters.ValidSessionID(reported):
		// Such an id would name a path (the raw output keeps it).
		r.warn(fmt.Sprintf("--session-dir: %s reported the session id %q, which is not a plain id (letters, digits, - and _) nor the one agentrun gave it (%s): only %s is saved", o.Runtime, reported, id, id))
	default:
		r.warn(fmt.Sprintf("--session-dir: %s reported the session id %s, not the one agentrun gave it (%s): only %s is saved", o.Runtime, reported, id, id))
	}
	saved, err := r.store.SaveSession(r.spec, id, sessionFile(o.SessionDir, o.Runtime, id))
	if err != nil {
		r.warn(fmt.Sprintf("--session-dir: could not save session %s: %v", id, err))
		return ""
	}
	if !saved {
		return ""
	}
	return id
}

// agentVars are the user's variables for the agent, then the credentials'
// stand-ins and CA files.
func (r *run) agentVars() [][2]string {
	return append(append(append([][2]string{}, r.p.env...), r.p.creds.pairs()...), r.repo.agentVars(r.stateDir)...)
}

// newMeter is the run's meter of its model calls. With --max-tokens it
// reads answers without streaming ahead, so that an agent cannot hold
// their count off by not reading them.
func (r *run) newMeter() *meter.Meter {
	return &meter.Meter{OnCall: r.onMeteredCall, OnReported: r.onReportedTokens, OnUnreadable: r.onUnmeteredCall,
		ReadAhead: r.o.MaxTokens > 0}
}

// startProxyStop lets the meter's limit stop the run through st, and
// applies what the meter saw before: the proxy serves the sandbox's calls
// from its start, before the stopper exists.
func (r *run) startProxyStop(st *stopper) {
	r.proxyStop.Store(st)
	if r.meter == nil {
		return
	}
	r.holdTokenLimit()
	if max := r.o.MaxTokens; max > 0 && r.meter.UnreadableCalls() > 0 {
		st.stop(events.StatusLimit, fmt.Sprintf("--max-tokens %d cannot be held: a model call could not be metered", max))
	}
}

// onMeteredCall enforces --max-tokens with the meter's count, which the
// CLI cannot under-report: past it the proxy refuses further model calls
// and the run ends with limit.
func (r *run) onMeteredCall(meter.Call, meter.Usage) {
	r.writeMeterFile()
	r.holdTokenLimit()
}

// onReportedTokens: a call under way reported tokens (an Anthropic
// stream's input, in its first event). The limit need not wait for its
// answer to end, which an agent could put off by not reading it.
func (r *run) onReportedTokens(meter.Usage) { r.holdTokenLimit() }

// holdTokenLimit ends the run with limit once the meter's count, with what
// calls still under way have reported, is past --max-tokens: whichever
// call ends or reports, the calls held open count too.
func (r *run) holdTokenLimit() {
	max := r.o.MaxTokens
	if max <= 0 {
		return
	}
	with, ended := r.meter.Reported().Total(), r.meter.Total().Total()
	if with <= max {
		return
	}
	r.p.creds.intercept.Refuse(tokenLimitRefusal(max))
	note := ""
	if with != ended {
		note = " (calls under way included)"
	}
	if st := r.proxyStop.Load(); st != nil {
		st.stop(events.StatusLimit, fmt.Sprintf("--max-tokens %d reached: %d tokens metered at the proxy%s", max, with, note))
	}
}

// writeMeterFile replaces --meter-file with the meter's count so far. The
// count is read under the lock, so concurrent calls never leave an older
// count last.
func (r *run) writeMeterFile() {
	if r.o.MeterFile == "" || r.meter == nil {
		return
	}
	r.meterMu.Lock()
	defer r.meterMu.Unlock()
	t := r.meter.Total()
	m := live.Meter{Calls: int64(len(r.meter.Calls())), InputTokens: t.InputTokens, OutputTokens: t.OutputTokens,
		CacheReadTokens: t.CacheReadTokens, CacheWriteTokens: t.CacheWriteTokens, Unmetered: int64(r.meter.UnreadableCalls())}
	if err := live.WriteMeterFile(r.o.MeterFile, m); err != nil {
		r.warn(fmt.Sprintf("--meter-file %s: %v", r.o.MeterFile, err))
	}
}

// maxUnmeteredWarnings bounds the lines onUnmeteredCall writes: without
// --max-tokens an agent may make as many such calls as it likes, and
// end.meter.unmetered counts them all.
const maxUnmeteredWarnings = 10

// onUnmeteredCall: a call's tokens could not be metered (see
// meter.Unreadable). They are unknown, so a --max-tokens limit can no
// longer be held: the meter fails closed, further model calls are refused
// and the run ends with limit.
func (r *run) onUnmeteredCall(why string) {
	switch n := r.unmetered.Add(1); {
	case n <= maxUnmeteredWarnings:
		r.warn("a call could not be metered: " + why)
	case n == maxUnmeteredWarnings+1:
		r.warn("more calls could not be metered; end.meter.unmetered counts them")
	}
	r.writeMeterFile()
	max := r.o.MaxTokens
	if max <= 0 {
		return
	}
	r.p.creds.intercept.Refuse(fmt.Sprintf("token_limit: --max-tokens %d cannot be held: a model call could not be metered", max))
	if st := r.proxyStop.Load(); st != nil {
		st.stop(events.StatusLimit, fmt.Sprintf("--max-tokens %d cannot be held: %s", max, why))
	}
}

// WriteSummary writes the end summary (a Pod's termination message).
func WriteSummary(files safefile.Guard, path string, s podcontract.Summary) error {
	f, err := files.Create(path, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(s.Encode())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// failureDetail follows docs/events.md, "Detail": the runtime's message, else
// the last 500 characters of stderr, else a fixed sentence.
func failureDetail(msg, stderrTail, runtime string, exit exitInfo) string {
	switch {
	case msg != "":
		return msg
	case stderrTail != "":
		return stderrTail
	case exit.Signaled:
		return fmt.Sprintf("%s was killed by signal %d (%s)", runtime, int(exit.Signal), exit.Signal)
	}
	return fmt.Sprintf("%s failed with exit code %d and no error message", runtime, exit.Code)
}

// resolveBinary finds the runtime's CLI: the path in its environment
// variable, else its name in PATH.
func resolveBinary(rt adapters.Runtime) (string, error) {
	if p := os.Getenv(rt.BinaryEnv); p != "" {
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s CLI not found: %s=%s is not an executable file", rt.Name, rt.BinaryEnv, p)
		}
		return p, nil
	}
	p, err := exec.LookPath(rt.Binary)
	if err != nil {
		return "", fmt.Errorf("%s CLI not found: no %q in PATH; install it (hack/install-clis.sh %s) or set %s to its path", rt.Name, rt.Binary, rt.Name, rt.BinaryEnv)
	}
	return p, nil
}

// selfExe is this binary; the sandbox's first process is found beside it.
func selfExe() string {
	p, err := os.Executable()
	if err != nil {
		return "/proc/self/exe"
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// visibleUnderTmp lists what of the CLI must be bound back into the
// sandbox because it lives under /tmp, which the sandbox replaces: for a
// CLI installed with npm the whole install (the folder holding its
// node_modules: node CLIs load their dependencies and platform binaries
// from there), else the directory of the binary and of its resolved target.
func visibleUnderTmp(bin string) []string {
	var out []string
	for _, p := range []string{bin, resolved(bin)} {
		d := installRoot(p)
		if (d == "/tmp" || strings.HasPrefix(d, "/tmp/")) && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// installRoot is the folder that holds the outermost node_modules on p's
// path, or p's directory when there is none.
func installRoot(p string) string {
	if i := strings.Index(p, "/node_modules/"); i > 0 {
		return p[:i]
	}
	return filepath.Dir(p)
}

func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

func dedupEnv(env []string) []string {
	idx := map[string]int{}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := cutEnv(kv)
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// envMap is an environment of K=V pairs (the last value of a name wins) as
// a map.
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := cutEnv(kv)
		m[k] = v
	}
	return m
}

func cutEnv(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// displayArgv is argv without the prompt (start.argv never holds it).
func displayArgv(argv []string, prompt string) []string {
	out := make([]string, 0, len(argv))
	for _, a := range argv {
		if a != prompt {
			out = append(out, a)
		}
	}
	return out
}

func sessionFile(dir, runtime, id string) string {
	return filepath.Join(dir, runtime, filepath.Base(id)+".jsonl")
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// stopper ends a run early, once: the first cause wins.
type stopper struct {
	mu     sync.Mutex
	proc   *process
	grace  time.Duration
	cause  string
	detail string
}

func (s *stopper) stop(cause, detail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A cause that comes after the CLI ended (a timeout while a child it
	// left behind still holds stdout open) did not stop it: the end
	// follows the process that ended.
	if s.cause != "" || s.proc.exitedAlready() {
		return
	}
	s.cause, s.detail = cause, detail
	s.proc.interrupt(syscall.SIGINT)
	time.AfterFunc(s.grace, func() { s.proc.kill() })
}

func (s *stopper) result() (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cause, s.detail
}
