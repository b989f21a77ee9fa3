package sandbox

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// InitVerb is the hidden agentrun verb that runs as the first process in
// the sandbox when the small InitBinary is not installed:
// agentrun sandbox-init [--proxy] -- COMMAND [ARGS...].
const InitVerb = "sandbox-init"

// InitBinary is the small helper binary (cmd/agentrun-sandbox-init) that
// agentrun looks for next to itself; it starts faster than agentrun.
const InitBinary = "agentrun-sandbox-init"

// FindInit returns the first program for the sandbox: InitBinary beside
// the agentrun binary at self when it is there, else self with InitVerb.
func FindInit(self string) (path string, usesVerb bool) {
	p := filepath.Join(filepath.Dir(self), InitBinary)
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return p, false
	}
	return self, true
}

// ControlFD is the socket to the runner that bwrap passes down.
const ControlFD = 3

// InitMain parses "[--proxy] -- COMMAND [ARGS...]" and runs RunInit; it
// returns only on failure, with the exit code to use (127, as a shell does
// for a command it cannot run). Both agentrun-sandbox-init and agentrun's
// hidden verb are this.
func InitMain(args []string, stderr io.Writer) int {
	withProxy := false
	for len(args) > 0 && args[0] != "--" {
		if args[0] == "--proxy" {
			withProxy = true
		}
		args = args[1:]
	}
	if len(args) > 0 {
		args = args[1:]
	}
	fmt.Fprintln(stderr, RunInit(withProxy, args))
	return 127
}

// RunInit is the sandbox side of the fdpass bridge. It opens the proxy's
// listening sockets inside the sandbox's network namespace (when withProxy),
// sends them to the runner over ControlFD together with its own credentials
// (the kernel translates the pid, so the runner learns the agent's pid as
// seen from outside and can signal it), closes every inherited descriptor
// and replaces itself with the command. It returns only on failure.
func RunInit(withProxy bool, argv []string) error {
	if len(argv) == 0 {
		return errors.New("sandbox-init: no command")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("sandbox-init: %w", err)
	}
	var fds []int
	if withProxy {
		for _, addr := range []string{"127.0.0.1", "::1"} {
			fd, err := listenFD(addr)
			if err != nil {
				if addr == "::1" {
					continue // no IPv6 loopback in this namespace: IPv4 is enough
				}
				return fmt.Errorf("sandbox-init: proxy listener: %w", err)
			}
			fds = append(fds, fd)
		}
	}
	cred := syscall.UnixCredentials(&syscall.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
	oob := append(cred, syscall.UnixRights(fds...)...)
	if err := syscall.Sendmsg(ControlFD, []byte("ready"), oob, nil, 0); err != nil {
		return fmt.Errorf("sandbox-init: cannot reach the runner: %w", err)
	}
	// Nothing the runner or bwrap held may reach the agent.
	if err := cloexecFrom(3); err != nil {
		return fmt.Errorf("sandbox-init: %w", err)
	}
	return syscall.Exec(path, argv, os.Environ())
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
// own poller descriptor from under it before the exec.
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
