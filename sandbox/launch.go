package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun-dev/agentrun/internal/phases"
)

// Prepared is a command wrapped in bubblewrap, ready to start. Start it
// with Argv, Env and ExtraFiles (fd 3 is the control socket, fd 4 the
// seccomp program, for a root caller fd 5 the agent's user namespace and
// fds 6 and 7 its /etc/passwd and /etc/group, then the workspace's
// mounts), with Dir as working directory; call Started, then Receive, then
// Status once it exited; Close in the end.
type Prepared struct {
	Argv       []string
	Env        []string
	Dir        string
	ExtraFiles []*os.File

	control *os.File // the runner's end of the control socket
	drop    *dropped // a root caller's drop, nil otherwise
	// placeholders are the deny paths' placeholders the run made, and its
	// locks on those of other runs: held until the sandbox is gone.
	placeholders *placeholders
}

// Prepare builds the bubblewrap command for argv. env is the complete
// environment inside the sandbox. When agentrun runs as root the agent is
// dropped to an unprivileged user (see drop.go).
func Prepare(cfg Config, env, argv []string) (p *Prepared, err error) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, errors.New("bubblewrap is not installed (no bwrap in PATH): install it (apt-get install bubblewrap) or pass --sandbox none")
	}
	prog, err := Filter()
	if err != nil {
		return nil, err
	}
	if cfg.Dir == nil {
		return nil, errors.New("the sandbox needs the workspace held open")
	}
	// bubblewrap starts outside the workspace: a root caller's may not
	// enter it, and the path may lead elsewhere by now; the init enters it.
	// bubblewrap and the init start outside the agent's reach: no
	// variable the dynamic loader acts on reaches them (loaderenv.go).
	p = &Prepared{Env: holdLoaderEnv(env), Dir: "/"}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	phases.Mark("prepare")
	init := InitOptions{Proxy: !cfg.NoNetwork, UID: -1, GID: -1, Dir: cfg.Workspace, DirID: cfg.Dir.id.String(), MaxProcs: cfg.MaxProcs}
	if needsDrop() {
		if p.drop, err = newDropped(cfg, cfg.initCommand(cfg.Init)); err != nil {
			return p, err
		}
		init.UID, init.GID = AgentUID, AgentUID
	}
	phases.Mark("deny-list")
	deny, ps, err := prepareDeny(cfg.DenyRead, p.drop.reachable)
	p.placeholders = ps
	if err != nil {
		return p, fmt.Errorf("cannot protect the deny-read paths: %w", err)
	}
	phases.Mark("prepare")
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return p, fmt.Errorf("control socket: %w", err)
	}
	// The runner's end must accept the helper's credentials, and be
	// non-blocking before it becomes an os.File, so that the runtime polls
	// it and a read deadline applies.
	err = syscall.SetsockoptInt(pair[0], syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1)
	if err == nil {
		err = syscall.SetNonblock(pair[0], true)
	}
	p.control = os.NewFile(uintptr(pair[0]), "sandbox-control-runner")
	p.ExtraFiles = append(p.ExtraFiles, os.NewFile(uintptr(pair[1]), "sandbox-control"))
	if err != nil {
		return p, fmt.Errorf("control socket: %w", err)
	}
	seccomp, err := dataPipe(prog)
	if err != nil {
		return p, err
	}
	p.ExtraFiles = append(p.ExtraFiles, seccomp)
	if p.drop != nil {
		p.ExtraFiles = append(p.ExtraFiles, p.drop.userns)
		for _, data := range [][]byte{p.drop.passwd, p.drop.group} {
			f, err := dataPipe(data)
			if err != nil {
				return p, err
			}
			p.ExtraFiles = append(p.ExtraFiles, f)
		}
	}
	// The workspace's mounts come from the workspace itself, or from a
	// root caller's idmapped copy of it.
	src := cfg.Dir.fd()
	if p.drop != nil {
		src = int(p.drop.wsDir.Fd())
	}
	ws, err := p.workspaceMounts(cfg, src)
	if err != nil {
		return p, err
	}
	full := append(Args(bwrap, cfg, deny, p.drop, ws), cfg.initCommand(InitPath)...)
	full = append(append(full, init.Args()...), "--")
	p.Argv = append(full, argv...)
	return p, nil
}

// workspaceMounts opens what bubblewrap mounts of the workspace below src
// (the workspace, or its idmapped copy), hands the descriptors to it and
// returns the mounts: the workspace, the directories on the way to what is
// protected (bound over themselves, so that none can be renamed or
// removed: the kernel refuses that for a mount point), then what is
// protected, read-only. Each is opened without following links, and must
// be what the search found: a directory or a file of the same device and
// inode.
func (p *Prepared) workspaceMounts(cfg Config, src int) ([]fdMount, error) {
	var out []fdMount
	add := func(rel string, ro bool) error {
		fd, err := openBeneath(src, rel, unix.O_PATH)
		if err == nil {
			id, typ, serr := statFD(fd)
			want, known := cfg.Protect.ids[rel]
			switch {
			case serr != nil || typ != unix.S_IFDIR && typ != unix.S_IFREG:
				err = errors.New("neither a directory nor a file")
			case known && id != want:
				err = errors.New("not what was found there")
			}
			if err != nil {
				unix.Close(fd)
			}
		}
		if err != nil {
			return fmt.Errorf("cannot open %s in the workspace %s (%v): it changed while the sandbox started; try again", rel, cfg.Workspace, err)
		}
		p.ExtraFiles = append(p.ExtraFiles, os.NewFile(uintptr(fd), rel))
		out = append(out, fdMount{fd: 2 + len(p.ExtraFiles), dest: filepath.Join(cfg.Workspace, rel), ro: ro})
		return nil
	}
	if err := add(".", false); err != nil {
		return nil, err
	}
	for _, rel := range cfg.Protect.pinnedDirs() {
		if err := add(rel, false); err != nil {
			return nil, err
		}
	}
	for _, rel := range cfg.Protect.Paths {
		if err := add(rel, true); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// dataPipe returns the read end of a pipe holding data: the seccomp program
// and the /etc files are a few kilobytes, within a pipe's buffer.
func dataPipe(data []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if _, err := w.Write(data); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Started closes the runner's copies of the descriptors the child got, so
// that the control socket reports EOF if bwrap dies before the helper speaks.
func (p *Prepared) Started() {
	for _, f := range p.ExtraFiles {
		if p.drop != nil && f == p.drop.userns {
			continue // released with the drop
		}
		f.Close()
	}
}

// Close releases what Prepare holds on the host, the deny paths'
// placeholders last: call it once the sandbox is gone (removing a
// placeholder detaches the mount over it).
func (p *Prepared) Close() {
	if p.control != nil {
		p.control.Close()
	}
	for _, f := range p.ExtraFiles {
		if p.drop == nil || f != p.drop.userns {
			f.Close() // again after Started: harmless
		}
	}
	p.drop.release()
	p.placeholders.close()
	p.placeholders = nil
}

// Ready is what the helper inside reported.
type Ready struct {
	Pid       int            // the init's pid as the runner sees it (it forwards signals to the agent)
	Listeners []net.Listener // the proxy's listening sockets inside the sandbox
}

// Receive waits for the helper's message. On EOF (bwrap failed before the
// helper ran) it returns an error; the caller reads bwrap's stderr for why.
// Once the helper spoke, bubblewrap has set everything up, and the host
// side of a root caller's drop is released.
func (p *Prepared) Receive(timeout time.Duration) (*Ready, error) {
	_ = p.control.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 16)
	oob := make([]byte, syscall.CmsgSpace(4*4)+syscall.CmsgSpace(syscall.SizeofUcred))
	n, oobn, err := p.recv(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("the sandbox did not start: %w", err)
	}
	if n == 0 {
		return nil, errors.New("the sandbox did not start: bubblewrap exited before the agent")
	}
	p.drop.release()
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, err
	}
	r := &Ready{}
	for _, m := range msgs {
		if cred, err := syscall.ParseUnixCredentials(&m); err == nil {
			r.Pid = int(cred.Pid)
			continue
		}
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			f := os.NewFile(uintptr(fd), "proxy-listener")
			l, err := net.FileListener(f)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("proxy listener: %w", err)
			}
			r.Listeners = append(r.Listeners, l)
		}
	}
	if r.Pid == 0 {
		return nil, errors.New("the sandbox helper sent no credentials")
	}
	return r, nil
}

func (p *Prepared) recv(buf, oob []byte) (n, oobn int, err error) {
	raw, err := p.control.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var rerr error
	err = raw.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), buf, oob, syscall.MSG_CMSG_CLOEXEC)
		return !errors.Is(rerr, syscall.EAGAIN)
	})
	if err == nil {
		err = rerr
	}
	return n, oobn, err
}

// ExitStatus is how the agent ended, as its parent inside saw it.
type ExitStatus struct {
	Code     int
	Signaled bool
	Signal   syscall.Signal
}

// Status reads the init's report on how the agent ended; call it after
// bubblewrap exited (the report, sent before the init exited, is then
// waiting). ok is false when the init sent none (it died first, or the
// sandbox never ran the agent).
func (p *Prepared) Status() (ExitStatus, bool) {
	_ = p.control.SetReadDeadline(time.Now().Add(statusWait))
	buf := make([]byte, 32)
	n, _, err := p.recv(buf, nil)
	if err != nil || n == 0 {
		return ExitStatus{}, false
	}
	return parseStatus(string(buf[:n]))
}

// statusWait bounds the read of a report that should already be there.
const statusWait = time.Second

// parseStatus parses "exit N" or "signal N".
func parseStatus(msg string) (ExitStatus, bool) {
	kind, num, ok := strings.Cut(msg, " ")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n < 0 || n > 255 {
		return ExitStatus{}, false
	}
	switch kind {
	case "exit":
		return ExitStatus{Code: n}, true
	case "signal":
		return ExitStatus{Signaled: true, Signal: syscall.Signal(n)}, true
	}
	return ExitStatus{}, false
}

// ProcMountFailed reports whether bubblewrap's error is the /proc mount,
// which a container's masked /proc forbids (the outer /proc then works).
func ProcMountFailed(bwrapStderr string) bool {
	return strings.Contains(bwrapStderr, "mount proc") || strings.Contains(bwrapStderr, "on /newroot/proc")
}

// MountTableChanged reports whether bubblewrap's error is the host's mount
// table changing under its start: it binds the host's / recursively, then
// remounts each mount it copied read-only, one by one, and fails when one
// went or was replaced in between (bubblewrap's own open issue #650). A
// concurrent root run's workspace mount in /tmp, attached and detached in
// milliseconds, is one; anything that mounts on the host is another. Nothing
// of the sandbox ran, so the start may simply be tried again.
func MountTableChanged(bwrapStderr string) bool {
	return (strings.Contains(bwrapStderr, "Unable to apply mount flags: remount") ||
		strings.Contains(bwrapStderr, "Unable to remount recursively with correct flags")) &&
		(strings.Contains(bwrapStderr, "No such file or directory") || strings.Contains(bwrapStderr, "Invalid argument"))
}

// Advice turns bubblewrap's start-up error into the cause and the fix
// (docs/kubernetes/pod-security.md for Pods).
func Advice(bwrapStderr string) string {
	msg := bwrapStderr
	if msg == "" {
		msg = "no message"
	}
	switch {
	case ProcMountFailed(msg):
		return fmt.Sprintf("bubblewrap cannot mount /proc, not even the outer one (%s). "+
			"In a Pod the container runtime masks /proc; use procMount Unmasked where the node supports it; or pass --sandbox none", msg)
	case MountTableChanged(msg):
		return fmt.Sprintf("the host's mount table kept changing while the sandbox started (%s): a mount below / came or went "+
			"between bubblewrap's copy of the mounts and their read-only remount, at every try (something on the host mounts "+
			"and unmounts in a loop?). Try again", msg)
	case strings.Contains(msg, "Race condition binding dirfd") || strings.Contains(msg, "Can't get type of source") ||
		strings.Contains(msg, "Can't bind mount") && (strings.Contains(msg, "No such file") || strings.Contains(msg, "in mount table")):
		return fmt.Sprintf("a directory the sandbox mounts moved while it started (%s): something renames the workspace or a directory "+
			"of it (the agent of a concurrent run in a workspace around it?); nothing else was mounted in its place. Try again", msg)
	case strings.Contains(msg, "Can't mkdir") || strings.Contains(msg, "Can't create file"):
		return fmt.Sprintf("bubblewrap could not prepare a mount point (%s): a deny-read path or the workspace changed while the sandbox started; try again", msg)
	case strings.Contains(msg, "execvp"):
		return fmt.Sprintf("bubblewrap started but could not run the agent's helper (%s): "+
			"the agentrun binary or the command must be readable inside the sandbox", msg)
	case strings.Contains(msg, "No space left on device"):
		return fmt.Sprintf("user namespaces are disabled on this machine (%s): set the sysctl user.max_user_namespaces above 0 "+
			"(on every node that runs agents); or pass --sandbox none", msg)
	case strings.Contains(msg, "No permissions to creat") || strings.Contains(msg, "Operation not permitted"):
		return fmt.Sprintf("bubblewrap may not create its namespaces (%s). In a Pod the seccomp profile refuses them: "+
			"the agent container needs agentrun's Localhost profile agentrun/bwrap.json, which the chart installs on the nodes "+
			"(sandboxProfiles) and the manager sets (RuntimeDefault refuses namespaces); it must run as non-root with "+
			"allowPrivilegeEscalation false and all capabilities dropped. Outside a container, unprivileged user namespaces "+
			"must be allowed (kernel.unprivileged_userns_clone=1 on older Debian kernels); as root bwrap also needs CAP_SETFCAP. "+
			"Or pass --sandbox none", msg)
	case strings.Contains(msg, "Permission denied"):
		return fmt.Sprintf("a security module denied bubblewrap's user namespace or mounts (%s). On AppArmor nodes the container "+
			"runtime's default AppArmor profile forbids them, and Ubuntu 24.04 and later restrict unprivileged user namespaces: "+
			"use agentrun's AppArmor profile agentrun-bwrap (chart value sandboxProfiles.appArmor.enabled), or on a host "+
			"set kernel.apparmor_restrict_unprivileged_userns=0; or pass --sandbox none", msg)
	}
	return fmt.Sprintf("bubblewrap cannot create its sandbox (%s). In a Pod the agent container needs agentrun's seccomp "+
		"profile agentrun/bwrap.json (and on AppArmor nodes its AppArmor profile agentrun-bwrap), which the chart installs "+
		"(sandboxProfiles), non-root, allowPrivilegeEscalation false and all capabilities dropped; outside a container, "+
		"unprivileged user namespaces must be allowed. Or pass --sandbox none", msg)
}
