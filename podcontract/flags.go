package podcontract

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxProcs is the agent's process limit (RLIMIT_NPROC, threads
// included) when --max-procs is not given: room for a parallel build (make
// -j, a JVM's threads, a test runner's workers), while a fork bomb stops
// here instead of at the host's limit. The count is per user: a non-root
// caller's own processes outside the sandbox count too (a Pod has only the
// runner).
const DefaultMaxProcs = 4096

// SandboxFlags are the isolation flags `agentrun run` and `agentrun
// sandbox` share.
type SandboxFlags struct {
	Sandbox    string   // --sandbox: bubblewrap (default on Linux) or none
	Network    string   // --network: none or full; any AllowHosts makes it custom
	AllowHosts []string // --allow-host HOST[:PORT]
	DenyRead   []string // --deny-read PATH, after the defaults
	AddHosts   []string // --add-host NAME=IP, for the proxy's resolver
	// WritableGit lets the agent write the workspace's repositories
	// (commit); by default they are read-only.
	WritableGit bool
	// MaxProcs bounds the agent's processes; 0 means DefaultMaxProcs.
	MaxProcs int
}

// Register declares the flags on fs, bound to f.
func (f *SandboxFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Sandbox, "sandbox", "", "bubblewrap (the default on Linux) or none")
	fs.StringVar(&f.Network, "network", "", "none or full (default full); --allow-host makes it custom")
	fs.Var((*List)(&f.AllowHosts), "allow-host", "allow only these hosts: HOST[:PORT], *.suffix[:PORT], IP:PORT or CIDR:PORT (repeatable)")
	fs.Var((*List)(&f.DenyRead), "deny-read", "hide this path from the agent, after the default list (repeatable)")
	fs.Var((*List)(&f.AddHosts), "add-host", "resolve NAME to IP in the proxy, NAME=IP (repeatable)")
	fs.BoolVar(&f.WritableGit, "writable-git", false, "let the agent write the workspace's repositories (.git: commit); they are read-only by default")
	fs.IntVar(&f.MaxProcs, "max-procs", 0, fmt.Sprintf("the agent's process limit, threads included (default %d)", DefaultMaxProcs))
}

// RunFlags is the command line of `agentrun run`: the controller renders it
// into the agent container's arguments (Args) and the runner binds the same
// struct from them (Register), so a flag is spelled in this file only.
type RunFlags struct {
	Runtime string // --runtime: claude-code, codex, pi or dsh
	Model   string // --model; empty is the runtime's default
	Format  string // --format: jsonl, text or rich
	// RawPath (--raw) keeps every raw byte of the runtime's stdout.
	RawPath   string
	Timeout   time.Duration // --timeout; 0 = none
	MaxTurns  int           // --max-turns; 0 = none
	MaxTokens int64         // --max-tokens; 0 = none
	Env       []string      // --env NAME=VALUE, in order
	EnvFile   string        // --env-file
	// PassEnv names variables of agentrun's own environment to pass to the
	// agent, NAME or PREFIX* (a Pod's Secret references arrive this way:
	// the sandbox's environment is otherwise minimal).
	PassEnv []string
	// EventsPath (--events) receives a copy of the jsonl stream (a Pod's
	// events sidecar follows it).
	EventsPath string
	// SummaryPath (--summary) receives the end summary, a Pod's
	// termination message (termination.go).
	SummaryPath string
	// MeterFile (--meter-file) receives the proxy meter's count after every
	// metered call (a Pod's events sidecar serves it as live progress).
	MeterFile   string
	Images      []string // --image, attached to the prompt in order
	NoSubagents bool     // --no-subagents
	SessionDir  string   // --session-dir
	Resume      string   // --resume ID
	Cwd         string   // --cwd; empty is the current directory
	// Credentials are --credential NAME=HOST:PORT[,...]: the agent holds a
	// stand-in for NAME, and the filter proxy puts the real value (from
	// agentrun's own environment) into the requests to those hosts.
	Credentials []string
	// UpstreamCA (--upstream-ca) verifies the credential destinations' TLS
	// certificates instead of the system's roots.
	UpstreamCA string
	// OTLPEndpoint (--otlp-endpoint) exports the run as an OpenTelemetry
	// trace and metrics to this collector (default:
	// OTEL_EXPORTER_OTLP_ENDPOINT); NewTraceID (--trace-id) is the new
	// trace's id, the controller's (TRACEPARENT wins).
	OTLPEndpoint string
	NewTraceID   string
	SandboxFlags
	GitFlags
	// InPod (--in-pod) says the runner runs in an agent Pod, which the
	// controller sets: the Pod's loopback holds its own servers (the
	// events sidecar's progress), so no allow entry opens it to the agent.
	InPod bool
	// PromptFile (--prompt-file) holds the prompt, instead of the argument
	// (a Pod's prompt is a file: an argument is bounded at 128 KiB).
	PromptFile string
	// Prompt is the one argument after the flags ("-": read it from stdin).
	Prompt string
}

// GitFlags are the repository of a run and what agentrun does with the
// agent's change (docs/git.md).
type GitFlags struct {
	Repo       string // --repo URL: clone it into the workspace first
	Ref        string // --ref: a branch, tag or commit id ("" the default branch)
	Depth      int    // --depth: commits of history (0 the whole); 1 unless set
	Submodules bool   // --submodules
	// GitCredential (--git-credential NAME) names the variable of
	// agentrun's environment that holds the token; GitAuth (--git-auth)
	// how it is presented: basic, basic:USER or bearer.
	GitCredential string
	GitAuth       string
	GitPlainHTTP  bool   // --git-plain-http: allow an http:// repository
	Push          string // --push: none, branch or patch (default patch)
	PushWhen      string // --push-when: succeeded (default) or always
	Branch        string // --branch: the run's branch (push branch)
	PatchFile     string // --patch FILE (push patch)
}

// Defaults of GitFlags, which Args leaves out.
const (
	DefaultGitDepth = 1
	DefaultPush     = "patch"
	DefaultPushWhen = "succeeded"
)

// Register declares the git flags on fs.
func (f *GitFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Repo, "repo", "", "clone this repository (https://) into the workspace before the agent starts; agentrun publishes the change after it (docs/git.md)")
	fs.StringVar(&f.Ref, "ref", "", "with --repo: the branch, tag or full commit id to start from (default: the remote's default branch)")
	fs.IntVar(&f.Depth, "depth", DefaultGitDepth, "with --repo: the commits of history to fetch (0: the whole history)")
	fs.BoolVar(&f.Submodules, "submodules", false, "with --repo: clone the submodules too")
	fs.StringVar(&f.GitCredential, "git-credential", "", "with --repo: NAME of the variable of agentrun's environment that holds the git token (never given to the agent)")
	fs.StringVar(&f.GitAuth, "git-auth", "", "with --git-credential: how the token is presented: basic (user x-access-token, GitHub), basic:USER (oauth2 for GitLab) or bearer")
	fs.BoolVar(&f.GitPlainHTTP, "git-plain-http", false, "with --repo: allow an http:// repository (the token then travels unencrypted)")
	fs.StringVar(&f.Push, "push", DefaultPush, "with --repo: what to do with the change: none (report it), branch (push the run's --branch) or patch (write --patch)")
	fs.StringVar(&f.PushWhen, "push-when", DefaultPushWhen, "with --repo: publish when the run succeeded (the default) or always")
	fs.StringVar(&f.Branch, "branch", "", "with --push branch: the run's branch (default agentrun/<the run's id>)")
	fs.StringVar(&f.PatchFile, "patch", "", "with --push patch: write the patch here (default: agentrun's state directory, named in end.git.patch)")
}

// args renders the git flags that are not at their defaults (none
// without --repo).
func (f GitFlags) args(a *argList) {
	if f.Repo == "" {
		return
	}
	a.str("repo", f.Repo)
	a.str("ref", f.Ref)
	if f.Depth != DefaultGitDepth {
		*a = append(*a, "--depth", strconv.Itoa(f.Depth))
	}
	a.flag("submodules", f.Submodules)
	a.str("git-credential", f.GitCredential)
	a.str("git-auth", f.GitAuth)
	a.flag("git-plain-http", f.GitPlainHTTP)
	if f.Push != DefaultPush && f.Push != "" {
		a.str("push", f.Push)
	}
	if f.PushWhen != DefaultPushWhen && f.PushWhen != "" {
		a.str("push-when", f.PushWhen)
	}
	a.str("branch", f.Branch)
	a.str("patch", f.PatchFile)
}

// Register declares every flag of `agentrun run` on fs, bound to f (the
// prompt is the argument left after parsing: fs.Arg(0)).
func (f *RunFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Runtime, "runtime", "", "the agent CLI: claude-code, codex, pi or dsh")
	fs.StringVar(&f.Model, "model", "", "the model (default: the runtime's)")
	fs.StringVar(&f.Format, "format", "jsonl", "output format: jsonl, text or rich")
	fs.StringVar(&f.RawPath, "raw", "", "keep the runtime's raw output in this file, byte for byte")
	fs.Var((*Duration)(&f.Timeout), "timeout", "stop the run after this long: seconds (300) or a duration (5m, 1h30m); 0 for none")
	fs.IntVar(&f.MaxTurns, "max-turns", 0, "stop when the main agent starts more model calls than this")
	fs.Int64Var(&f.MaxTokens, "max-tokens", 0, "stop when the run has used more tokens than this")
	fs.Var((*List)(&f.Env), "env", "set a variable for the agent, NAME=VALUE (repeatable)")
	fs.StringVar(&f.EnvFile, "env-file", "", "read NAME=VALUE lines for the agent from this file")
	fs.Var((*List)(&f.PassEnv), "pass-env", "pass this variable of agentrun's environment to the agent, NAME or PREFIX* (repeatable)")
	fs.StringVar(&f.EventsPath, "events", "", "also write the jsonl event stream to this file (a Pod's events sidecar follows it)")
	fs.StringVar(&f.SummaryPath, "summary", "", "write the end summary here (a Pod's termination message)")
	fs.StringVar(&f.MeterFile, "meter-file", "", "with --credential: keep the proxy's meter count in this file while the run goes on (a Pod's events sidecar serves it)")
	fs.Var((*List)(&f.Images), "image", "attach an image to the prompt (repeatable)")
	fs.BoolVar(&f.NoSubagents, "no-subagents", false, "do not let the agent start subagents")
	fs.StringVar(&f.SessionDir, "session-dir", "", "save the session here, to continue it with --resume")
	fs.StringVar(&f.Resume, "resume", "", "continue the saved session with this id (needs --session-dir)")
	fs.StringVar(&f.Cwd, "cwd", "", "the agent's working directory (default: the current one)")
	fs.Var((*List)(&f.Credentials), "credential", "NAME=HOST:PORT[,HOST:PORT...]: the agent gets a stand-in for the variable NAME of agentrun's environment, and the proxy puts the real value into requests to those hosts, over verified TLS only; http://HOST:PORT declares a host that speaks plain HTTP (repeatable)")
	fs.StringVar(&f.UpstreamCA, "upstream-ca", "", "verify the TLS certificates of the credential hosts and of --repo with this PEM bundle instead of the system's roots")
	fs.StringVar(&f.OTLPEndpoint, "otlp-endpoint", "", "export the run as an OpenTelemetry trace and metrics to this OTLP collector URL (default: OTEL_EXPORTER_OTLP_ENDPOINT; see docs/telemetry.md)")
	fs.StringVar(&f.NewTraceID, "trace-id", "", "with telemetry: the new trace's id, 32 hex digits (the controller's; TRACEPARENT wins)")
	fs.StringVar(&f.PromptFile, "prompt-file", "", "read the prompt from this file instead of the argument")
	fs.BoolVar(&f.InPod, "in-pod", false, "the runner runs in an agent Pod (the controller sets it): the loopback stays refused to the agent whatever --allow-host says")
	f.SandboxFlags.Register(fs)
	f.GitFlags.Register(fs)
}

// Args is the argument list of `agentrun` that Register parses back into
// f: the verb, the flags that are not at their zero value (the Pod's own
// first, then what the spec chose), "--" (so a prompt that starts with "-"
// stays a prompt) and the prompt when there is one.
func (f RunFlags) Args() []string {
	a := argList{"run"}
	a.flag("in-pod", f.InPod)
	a.str("runtime", f.Runtime)
	a.str("format", f.Format)
	a.str("events", f.EventsPath)
	a.str("summary", f.SummaryPath)
	a.str("raw", f.RawPath)
	a.str("cwd", f.Cwd)
	a.flag("writable-git", f.WritableGit)
	a.seconds("timeout", f.Timeout)
	a.str("model", f.Model)
	a.int("max-turns", int64(f.MaxTurns))
	a.int("max-tokens", f.MaxTokens)
	a.flag("no-subagents", f.NoSubagents)
	a.str("sandbox", f.Sandbox)
	a.str("network", f.Network)
	a.list("allow-host", f.AllowHosts)
	a.list("add-host", f.AddHosts)
	a.list("deny-read", f.DenyRead)
	a.int("max-procs", int64(f.MaxProcs))
	a.list("env", f.Env)
	a.str("env-file", f.EnvFile)
	a.list("pass-env", f.PassEnv)
	a.list("credential", f.Credentials)
	a.str("upstream-ca", f.UpstreamCA)
	a.str("meter-file", f.MeterFile)
	a.str("session-dir", f.SessionDir)
	a.str("resume", f.Resume)
	a.list("image", f.Images)
	a.str("otlp-endpoint", f.OTLPEndpoint)
	a.str("trace-id", f.NewTraceID)
	f.GitFlags.args(&a)
	a.str("prompt-file", f.PromptFile)
	a = append(a, "--")
	if f.Prompt != "" {
		a = append(a, f.Prompt)
	}
	return a
}

// TailFlags is the command line of `agentrun tail`, the events sidecar.
type TailFlags struct {
	// Linger: after the end event, wait up to this long for SIGTERM
	// before exiting (a Kubernetes sidecar that exits early is restarted,
	// and its log replayed).
	Linger time.Duration
	// Poll is how often the file is looked at for new events; 0 is the
	// follower's default.
	Poll time.Duration
	// ProgressAddr serves the run's live progress on this address.
	ProgressAddr string
	// MeterFile is the runner's live meter file (RunFlags.MeterFile),
	// served with the progress.
	MeterFile string
	// PatchFile makes the command the Pod's patch container: it copies
	// nothing, and after the end event writes this patch file to stdout in
	// the form of package sidecar/patchlog (the runner's --patch).
	PatchFile string
	// File is the events file, the one argument.
	File string
}

// Register declares the flags of `agentrun tail` on fs, bound to f (the
// file is the argument left after parsing).
func (f *TailFlags) Register(fs *flag.FlagSet) {
	fs.Var((*Duration)(&f.Linger), "linger", "after the end event, wait up to this long for SIGTERM before exiting (a Kubernetes sidecar that exits early is restarted)")
	fs.Var((*Duration)(&f.Poll), "poll", "how often to look for new events (default 100ms)")
	fs.StringVar(&f.ProgressAddr, "progress-addr", "", "serve the run's live progress (GET "+ProgressPath+") on this address, for example :8788")
	fs.StringVar(&f.MeterFile, "meter-file", "", "the runner's live meter file (agentrun run --meter-file), served with the progress")
	fs.StringVar(&f.PatchFile, "patch", "", "copy no events: after the end event, write this patch file (agentrun run --patch) to stdout, gzipped in base64, for the manager (the Pod's patch container)")
}

// Args is the argument list of `agentrun` that Register parses back into f.
func (f TailFlags) Args() []string {
	a := argList{"tail"}
	a.duration("linger", f.Linger)
	a.duration("poll", f.Poll)
	a.str("progress-addr", f.ProgressAddr)
	a.str("meter-file", f.MeterFile)
	a.str("patch", f.PatchFile)
	if strings.HasPrefix(f.File, "-") {
		a = append(a, "--")
	}
	return append(a, f.File)
}

// argList renders flags as `--name value`, one argument each, so that no
// value is split or joined by a shell.
type argList []string

func (a *argList) str(name, v string) {
	if v != "" {
		*a = append(*a, "--"+name, v)
	}
}

func (a *argList) list(name string, vs []string) {
	for _, v := range vs {
		*a = append(*a, "--"+name, v)
	}
}

func (a *argList) int(name string, v int64) {
	if v != 0 {
		*a = append(*a, "--"+name, strconv.FormatInt(v, 10))
	}
}

func (a *argList) flag(name string, v bool) {
	if v {
		*a = append(*a, "--"+name)
	}
}

func (a *argList) duration(name string, d time.Duration) {
	if d != 0 {
		*a = append(*a, "--"+name, Duration(d).String())
	}
}

// seconds renders a duration of whole seconds as a bare number, the form
// every version of the runner's --timeout reads.
func (a *argList) seconds(name string, d time.Duration) {
	if d%time.Second == 0 {
		a.int(name, int64(d/time.Second))
	} else {
		a.duration(name, d)
	}
}

// List is a repeatable string flag: each use adds one value.
type List []string

func (l *List) String() string     { return strings.Join(*l, ",") }
func (l *List) Set(v string) error { *l = append(*l, v); return nil }

// Duration is a flag of a length of time given as whole seconds ("300",
// what a script computes) or as a Go duration ("5m", "1h30m", what a
// person writes).
type Duration time.Duration

// ParseDuration reads a Duration's text: whole seconds or a Go duration,
// never negative.
func ParseDuration(s string) (time.Duration, error) {
	const want = "must be a positive number of seconds (300) or a duration (5m, 1h30m), or 0 for none"
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > int64(time.Duration(1<<63-1)/time.Second) {
			return 0, errors.New(want)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, errors.New(want)
	}
	return d, nil
}

func (d *Duration) Set(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// String is a Go duration, in whole seconds ("60s", not "1m0s") when it is
// whole seconds.
func (d Duration) String() string {
	if time.Duration(d)%time.Second == 0 {
		return strconv.FormatInt(int64(time.Duration(d)/time.Second), 10) + "s"
	}
	return time.Duration(d).String()
}
