package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Prepared is a command wrapped in bubblewrap, ready to start. Start it
// with Argv, Env and ExtraFiles (fd 3 is the control socket, fd 4 the
// seccomp program), call Started, then Receive.
type Prepared struct {
	Argv       []string
	Env        []string
	ExtraFiles []*os.File

	control *os.File // the runner's end of the control socket
}

// Prepare builds the bubblewrap command for argv. env is the complete
// environment inside the sandbox.
func Prepare(cfg Config, env, argv []string) (*Prepared, error) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, errors.New("bubblewrap is not installed (no bwrap in PATH): install it (apt-get install bubblewrap) or pass --sandbox none")
	}
	deny, err := PrepareDeny(cfg.DenyRead)
	if err != nil {
		return nil, fmt.Errorf("cannot protect the deny-read paths: %w", err)
	}
	prog, err := Filter()
	if err != nil {
		return nil, err
	}
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	// The runner's end must accept the helper's credentials, and be
	// non-blocking so that a read deadline applies to it.
	err = syscall.SetsockoptInt(pair[0], syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1)
	if err == nil {
		err = syscall.SetNonblock(pair[0], true)
	}
	if err != nil {
		syscall.Close(pair[0])
		syscall.Close(pair[1])
		return nil, err
	}
	seccompR, seccompW, err := os.Pipe()
	if err != nil {
		syscall.Close(pair[0])
		syscall.Close(pair[1])
		return nil, err
	}
	// The program is a few hundred bytes: it fits the pipe's buffer.
	if _, err := seccompW.Write(prog); err != nil {
		return nil, err
	}
	seccompW.Close()

	init := []string{InitPath}
	if cfg.InitUsesVerb {
		init = append(init, InitVerb)
	}
	if !cfg.NoNetwork {
		init = append(init, "--proxy")
	}
	init = append(init, "--")
	full := append(Args(bwrap, cfg, deny, 4), init...)
	full = append(full, argv...)
	return &Prepared{
		Argv:       full,
		Env:        env,
		ExtraFiles: []*os.File{os.NewFile(uintptr(pair[1]), "sandbox-control"), seccompR},
		control:    os.NewFile(uintptr(pair[0]), "sandbox-control-runner"),
	}, nil
}

// Started closes the runner's copies of the descriptors the child got, so
// that the control socket reports EOF if bwrap dies before the helper speaks.
func (p *Prepared) Started() {
	for _, f := range p.ExtraFiles {
		f.Close()
	}
}

// Ready is what the helper inside reported.
type Ready struct {
	Pid       int            // the agent's pid as the runner sees it
	Listeners []net.Listener // the proxy's listening sockets inside the sandbox
}

// Receive waits for the helper's message. On EOF (bwrap failed before the
// helper ran) it returns an error; the caller reads bwrap's stderr for why.
func (p *Prepared) Receive(timeout time.Duration) (*Ready, error) {
	defer p.control.Close()
	_ = p.control.SetReadDeadline(time.Now().Add(timeout))
	raw, err := p.control.SyscallConn()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 16)
	oob := make([]byte, syscall.CmsgSpace(4*4)+syscall.CmsgSpace(syscall.SizeofUcred))
	var n, oobn int
	var rerr error
	err = raw.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), buf, oob, syscall.MSG_CMSG_CLOEXEC)
		return !errors.Is(rerr, syscall.EAGAIN)
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, fmt.Errorf("the sandbox did not start: %w", err)
	}
	if n == 0 {
		return nil, errors.New("the sandbox did not start: bubblewrap exited before the agent")
	}
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

// ProcMountFailed reports whether bubblewrap's error is the /proc mount,
// which a container's masked /proc forbids (the outer /proc then works).
func ProcMountFailed(bwrapStderr string) bool {
	return strings.Contains(bwrapStderr, "mount proc") || strings.Contains(bwrapStderr, "on /newroot/proc")
}

// Advice turns bubblewrap's start-up error into the cause and the fix.
func Advice(bwrapStderr string) string {
	msg := bwrapStderr
	if msg == "" {
		msg = "no message"
	}
	switch {
	case ProcMountFailed(msg):
		return fmt.Sprintf("bubblewrap cannot mount /proc, not even the outer one (%s). "+
			"In a Pod use seccompProfile Unconfined (or a Localhost profile allowing mount) and procMount Unmasked where the node supports it; or pass --sandbox none", msg)
	case strings.Contains(msg, "Can't mkdir") || strings.Contains(msg, "Can't create file"):
		return fmt.Sprintf("bubblewrap could not prepare a mount point (%s): a deny-read path or the workspace changed while the sandbox started; try again", msg)
	case strings.Contains(msg, "execvp"):
		return fmt.Sprintf("bubblewrap started but could not run the agent's helper (%s): "+
			"the agentrun binary or the command must be readable inside the sandbox", msg)
	}
	return fmt.Sprintf("bubblewrap cannot create its namespaces (%s). "+
		"In a Pod set securityContext.seccompProfile.type: Unconfined (RuntimeDefault forbids unshare and mount; a Localhost profile "+
		"allowing clone, unshare, mount, umount2, pivot_root and setns also works) and AppArmor Unconfined, run as non-root with "+
		"allowPrivilegeEscalation: false and all capabilities dropped; as root outside a container bwrap needs CAP_SETFCAP; "+
		"Ubuntu 24.04 nodes also need kernel.apparmor_restrict_unprivileged_userns=0. Or pass --sandbox none", msg)
}
