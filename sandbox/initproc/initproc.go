// Package initproc is the first process inside agentrun's sandbox: it
// hands the filter proxy's listening sockets to the runner, drops to the
// agent's user, starts the agent, and reports how it ended (Run). It runs
// on every start, so it stays small: it imports nothing of the sandbox's
// set-up, and the agentrun-sandbox-init binary is this package alone.
package initproc

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ProxyPort is where the filter proxy listens inside the sandbox, on
// 127.0.0.1 and ::1 of the sandbox's own network namespace.
const ProxyPort = 3128

// ControlFD is the socket to the runner that bwrap passes down.
const ControlFD = 3

// Options are what the runner asks of the first process.
type Options struct {
	// Proxy opens the filter proxy's listening sockets inside.
	Proxy bool
	// UID and GID, when not -1, are who the agent runs as: a root caller's
	// agent drops to them (see Drop); otherwise it keeps the caller's ids.
	UID, GID int
	// Dir is the agent's working directory, entered after the drop (the
	// workspace belongs to the agent's user, not to the init's).
	Dir string
	// DirID is the workspace's "DEV:INO": a Dir that is no longer the
	// workspace (a link swapped in on its path meanwhile) is not entered.
	DirID string
	// MaxProcs bounds the agent's processes (RLIMIT_NPROC); 0 leaves it.
	MaxProcs uint64
}

// Args renders o as the init's flags.
func (o Options) Args() []string {
	var a []string
	if o.Proxy {
		a = append(a, "--proxy")
	}
	if o.UID >= 0 {
		a = append(a, "--uid", strconv.Itoa(o.UID), "--gid", strconv.Itoa(o.GID))
	}
	if o.Dir != "" {
		a = append(a, "--chdir", o.Dir)
	}
	if o.DirID != "" {
		a = append(a, "--chdir-id", o.DirID)
	}
	if o.MaxProcs > 0 {
		a = append(a, "--max-procs", strconv.FormatUint(o.MaxProcs, 10))
	}
	return a
}

// Main parses the init's flags and runs Run, or makes user namespaces for
// the runner (UsernsFlag). It returns the exit code: the agent's, or 127
// when the agent could not be started, as a shell does.
func Main(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == UsernsFlag {
		if err := makeUserNamespaces(args[1:]); err != nil {
			fmt.Fprintln(stderr, "sandbox-init:", err)
			return 1
		}
		return 0
	}
	o := Options{UID: -1, GID: -1}
	fs := flag.NewFlagSet("agentrun-sandbox-init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.Proxy, "proxy", false, "")
	fs.IntVar(&o.UID, "uid", -1, "")
	fs.IntVar(&o.GID, "gid", -1, "")
	fs.StringVar(&o.Dir, "chdir", "", "")
	fs.StringVar(&o.DirID, "chdir-id", "", "")
	fs.Uint64Var(&o.MaxProcs, "max-procs", 0, "")
	if err := fs.Parse(args); err != nil {
		return 127
	}
	code, err := Run(o, fs.Args())
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 127
	}
	return code
}

// Run is the sandbox side of the fdpass bridge and the agent's parent.
// It opens the proxy's listening sockets inside the sandbox's network
// namespace (when o.Proxy), sends them to the runner over ControlFD with its
// own credentials (the kernel translates the pid, so the runner learns the
// init's pid as seen from outside and can signal it), limits the agent,
// drops to o.UID, and starts the command. It forwards signals to the
// command, waits for it and reports how it ended to the runner, because
// bubblewrap's own exit code folds a death by signal N into 128+N.
func Run(o Options, argv []string) (int, error) {
	if len(argv) == 0 {
		return 0, errors.New("sandbox-init: no command")
	}
	var fds []int
	if o.Proxy {
		for _, addr := range []string{"127.0.0.1", "::1"} {
			fd, err := listenFD(addr)
			if err != nil {
				if addr == "::1" {
					continue // no IPv6 loopback in this namespace: IPv4 is enough
				}
				return 0, fmt.Errorf("sandbox-init: proxy listener: %w", err)
			}
			fds = append(fds, fd)
		}
	}
	cred := syscall.UnixCredentials(&syscall.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
	oob := append(cred, syscall.UnixRights(fds...)...)
	if err := syscall.Sendmsg(ControlFD, []byte("ready"), oob, nil, 0); err != nil {
		return 0, fmt.Errorf("sandbox-init: cannot reach the runner: %w", err)
	}
	for _, fd := range fds {
		syscall.Close(fd) // the runner holds them now
	}
	// Capabilities are per thread: the drop and the fork that starts the
	// agent happen on this one.
	runtime.LockOSThread()
	if err := becomeAgent(o); err != nil {
		return 0, fmt.Errorf("sandbox-init: %w", err)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return 0, fmt.Errorf("sandbox-init: %w", err)
	}
	// Nothing the runner or bwrap held may reach the agent; the control
	// socket stays open here for the report.
	if err := cloexecFrom(3); err != nil {
		return 0, fmt.Errorf("sandbox-init: %w", err)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH)
	// The loader variables the runner held back from bubblewrap and this
	// init (loaderenv.go) are the agent's again.
	// A plain fork and wait4, not os.StartProcess's pidfd: waiting on the
	// pidfd of a child that exits at once failed now and then with EBADF,
	// which cost the run its end.
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: AgentEnv(os.Environ()), Files: []uintptr{0, 1, 2}})
	if err != nil {
		return 0, fmt.Errorf("sandbox-init: %w", err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = syscall.Kill(pid, s.(syscall.Signal))
			case <-done:
				return
			}
		}
	}()
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	close(done)
	if err != nil {
		return 0, fmt.Errorf("sandbox-init: wait4: %w", err)
	}
	return report(ws), nil
}

// becomeAgent sets the agent's limits, drops to its user and enters its
// working directory. The init makes itself non-dumpable first: the agent
// runs as the same user, and must not be able to trace its parent or read
// its descriptors (the control socket) through /proc.
func becomeAgent(o Options) error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	// No core dumps: a core holds the process's memory (tokens included),
	// and the host's core_pattern may hand it to a program.
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return fmt.Errorf("setrlimit(RLIMIT_CORE): %w", err)
	}
	if o.MaxProcs > 0 {
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: o.MaxProcs, Max: o.MaxProcs}); err != nil {
			return fmt.Errorf("setrlimit(RLIMIT_NPROC): %w", err)
		}
	}
	if o.UID >= 0 {
		if err := syscall.Setgroups(nil); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setresgid(o.GID, o.GID, o.GID); err != nil {
			return fmt.Errorf("setresgid(%d): %w", o.GID, err)
		}
		if err := syscall.Setresuid(o.UID, o.UID, o.UID); err != nil {
			return fmt.Errorf("setresuid(%d): %w", o.UID, err)
		}
		// Leaving uid 0 cleared the permitted and effective sets; clear
		// the inheritable one too, so that nothing is left to regain.
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			return fmt.Errorf("capset: %w", err)
		}
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
		}
	}
	if o.Dir != "" {
		if err := os.Chdir(o.Dir); err != nil {
			return err
		}
	}
	if o.DirID != "" {
		var st unix.Stat_t
		if err := unix.Stat(".", &st); err != nil {
			return err
		}
		if got := strconv.FormatUint(st.Dev, 10) + ":" + strconv.FormatUint(st.Ino, 10); got != o.DirID {
			return fmt.Errorf("%s is no longer the workspace (%s, not %s): it was moved while the sandbox started", o.Dir, got, o.DirID)
		}
	}
	return nil
}

// report sends how the command ended to the runner ("exit N" or
// "signal N") and returns the init's own exit code, as a shell would.
func report(ws syscall.WaitStatus) int {
	msg, code := fmt.Sprintf("exit %d", ws.ExitStatus()), ws.ExitStatus()
	if ws.Signaled() {
		msg, code = fmt.Sprintf("signal %d", int(ws.Signal())), 128+int(ws.Signal())
	}
	_ = syscall.Sendmsg(ControlFD, []byte(msg), nil, nil, 0)
	return code
}

// listenFD opens a listening TCP socket on addr:ProxyPort and returns a
// descriptor of it that survives closing the Go listener.
func listenFD(addr string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(ProxyPort)))
	if err != nil {
		return -1, err
	}
	f, err := l.(*net.TCPListener).File()
	l.Close()
	if err != nil {
		return -1, err
	}
	return int(f.Fd()), nil
}

// cloexecFrom marks every descriptor >= from close-on-exec, so exec drops
// them (close_range with CLOSE_RANGE_CLOEXEC, with a /proc fallback for
// kernels before 5.11). Closing them outright would pull the Go runtime's
// own poller descriptor from under it.
func cloexecFrom(from int) error {
	const sysCloseRange, closeRangeCloexec = 436, 4
	if _, _, e := syscall.Syscall(sysCloseRange, uintptr(from), ^uintptr(0), closeRangeCloexec); e == 0 {
		return nil
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= from {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}

// LoaderEnvPrefix renames a variable the dynamic loader or libc act on at
// start on its way through bubblewrap and the init to the agent (see
// package sandbox, holdLoaderEnv).
const LoaderEnvPrefix = "AGENTRUN_SANDBOX_ENV_"

// AgentEnv is the init's environment for the agent: each held loader
// variable under its own name again (replacing one of that name).
func AgentEnv(env []string) []string {
	held := map[string]string{}
	var order []string
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if rest, ok := strings.CutPrefix(kv, LoaderEnvPrefix); ok {
			name, _, _ := strings.Cut(rest, "=")
			if _, dup := held[name]; !dup {
				order = append(order, name)
			}
			held[name] = rest
			continue
		}
		out = append(out, kv)
	}
	if len(held) == 0 {
		return out
	}
	kept := out[:0]
	for _, kv := range out {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := held[name]; !ok {
			kept = append(kept, kv)
		}
	}
	for _, name := range order {
		kept = append(kept, held[name])
	}
	return kept
}
