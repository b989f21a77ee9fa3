package initproc

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A root caller's drop needs two user namespaces before bubblewrap starts
// (package sandbox, drop.go). A user namespace is made by a process, but
// needs none to live on: an open handle on it (/proc/PID/ns/user) keeps it.
// Each is made by a child that exits at once (clone with CLONE_NEWUSER and
// no exec); its id maps are written and its namespace opened while it is
// a zombie (a zombie keeps its credentials, and with them its user
// namespace, until it is reaped, and its pid cannot be reused before).
//
// The runner cannot unshare a user namespace itself (a multi-threaded
// process may not), and a fork of it copies its page tables and leaves its
// heap copy-on-write (a fault at each page it writes next). On linux/amd64
// it makes them in-process (UserNamespaces) with a vfork child that shares
// its memory and runs a few instructions of assembly, nothing else
// (userns_vfork_linux_amd64.s): no copy, and no process to start. Elsewhere,
// or when that fails, it starts this init once as a helper (UsernsFlag),
// a small process whose fork is cheap, which makes them and hands their
// handles over UsernsFD.

// UsernsFlag makes the init the helper above: each argument after it is
// one namespace's maps (FormatIDMaps).
const UsernsFlag = "--make-userns"

// UsernsFD is the socket over which the helper sends the namespaces' handles,
// in the order asked, in one message.
const UsernsFD = 3

// IDMap is one line of a uid_map or gid_map.
type IDMap struct{ Inside, Outside, Count int }

// FormatIDMaps renders one namespace's uid and gid maps as the helper's
// argument: "IN OUT N,IN OUT N/IN OUT N".
func FormatIDMaps(uids, gids []IDMap) string {
	format := func(ms []IDMap) string {
		parts := make([]string, len(ms))
		for i, m := range ms {
			parts[i] = fmt.Sprintf("%d %d %d", m.Inside, m.Outside, m.Count)
		}
		return strings.Join(parts, ",")
	}
	return format(uids) + "/" + format(gids)
}

// parseIDMaps reads FormatIDMaps's argument back into the two maps as the
// kernel takes them (one line each).
func parseIDMaps(arg string) (uidMap, gidMap string, err error) {
	uids, gids, ok := strings.Cut(arg, "/")
	if !ok {
		return "", "", fmt.Errorf("id maps %q: want UIDS/GIDS", arg)
	}
	var out [2]string
	for i, ms := range []string{uids, gids} {
		for _, m := range strings.Split(ms, ",") {
			f := strings.Fields(m)
			if len(f) != 3 {
				return "", "", fmt.Errorf("id map %q: want INSIDE OUTSIDE COUNT", m)
			}
			for _, n := range f {
				if _, err := strconv.ParseUint(n, 10, 32); err != nil {
					return "", "", fmt.Errorf("id map %q: %w", m, err)
				}
			}
			out[i] += strings.Join(f, " ") + "\n"
		}
	}
	return out[0], out[1], nil
}

// makeUserNamespaces is the helper's whole run: one namespace per argument,
// their handles sent over UsernsFD.
func makeUserNamespaces(args []string) error {
	sock := os.NewFile(UsernsFD, "userns")
	defer sock.Close()
	fds, err := userNamespaces(cloneIntoUserNS, args)
	if err != nil {
		return err
	}
	return syscall.Sendmsg(int(sock.Fd()), []byte("userns"), syscall.UnixRights(fds...), nil, 0)
}

// UserNamespaces makes one user namespace per argument (FormatIDMaps) in
// this process, by vfork, and returns open descriptors of them in order.
// It fails with errors.ErrUnsupported where there is no vfork path (the
// caller starts the helper instead).
func UserNamespaces(maps ...string) ([]int, error) {
	if !canVfork {
		return nil, errors.ErrUnsupported
	}
	return userNamespaces(vforkIntoUserNS, maps)
}

// userNamespaces makes the namespaces of maps, each child made by clone.
func userNamespaces(clone func() (int, error), maps []string) ([]int, error) {
	if len(maps) == 0 {
		return nil, errors.New("no namespace asked for")
	}
	fds := make([]int, 0, len(maps))
	for _, arg := range maps {
		uidMap, gidMap, err := parseIDMaps(arg)
		if err == nil {
			var fd int
			if fd, err = newUserNS(clone, uidMap, gidMap); err == nil {
				fds = append(fds, fd)
				continue
			}
		}
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return nil, err
	}
	return fds, nil
}

// newUserNS makes a user namespace with these maps, its child made by
// clone, and returns an open descriptor of it.
func newUserNS(clone func() (int, error), uidMap, gidMap string) (int, error) {
	pid, err := clone()
	if err != nil {
		return -1, fmt.Errorf("clone(CLONE_NEWUSER): %w", err)
	}
	defer reap(pid)
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	// setgroups stays allowed: the maker is root in the parent namespace,
	// so it may write the gid map without denying it.
	for _, m := range [][2]string{{"uid_map", uidMap}, {"gid_map", gidMap}} {
		if err := os.WriteFile(dir+m[0], []byte(m[1]), 0); err != nil {
			return -1, err
		}
	}
	return unix.Open(dir+"ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
}

// cloneIntoUserNS is the helper's clone: vfork where it exists, fork
// elsewhere.
func cloneIntoUserNS() (int, error) {
	if canVfork {
		return vforkIntoUserNS()
	}
	return forkIntoUserNS()
}

// vforkIntoUserNS makes a child in a new user namespace that shares this
// process's memory and exits at once (rawVforkIntoUserNS), and returns its
// pid, unreaped.
func vforkIntoUserNS() (int, error) {
	return withSignalsBlocked(rawVforkIntoUserNS)
}

// forkIntoUserNS forks a child in a new user namespace that exits at once,
// and returns its pid, unreaped.
func forkIntoUserNS() (int, error) {
	return withSignalsBlocked(func() (uintptr, uintptr) {
		pid, errno := cloneAndExit()
		return pid, uintptr(errno)
	})
}

// withSignalsBlocked runs clone on this thread with every signal blocked,
// as the runtime's own fork does: the child runs on a copy of this thread
// (or on this thread's very stack and memory, for vfork), where a handler
// of the Go runtime must not run (it would find the runtime's other
// threads gone, or corrupt this one).
func withSignalsBlocked(clone func() (pid, errno uintptr)) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, old unix.Sigset_t
	for i := range all.Val {
		all.Val[i] = ^uint64(0)
	}
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &all, &old); err != nil {
		return 0, err
	}
	pid, errno := clone()
	// rt_sigprocmask fails only on a bad argument, which these are not.
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	if errno != 0 {
		return 0, syscall.Errno(errno)
	}
	return int(pid), nil
}

// cloneAndExit forks with clone(CLONE_NEWUSER); the child exits at once.
// clone, not clone3: seccomp profiles that refuse clone3 (ENOSYS, so that
// libc falls back) are common, the project's own node profile among them.
// Nothing after the system call may grow the stack or touch the runtime in
// the child: it is a copy of this process with one thread, whose other
// threads (and the locks they hold) are gone.
//
//go:nosplit
//go:norace
func cloneAndExit() (uintptr, syscall.Errno) {
	// clone(flags, stack, ...): the stack (0: the child's copy of this
	// one) comes first on s390x.
	a1, a2 := uintptr(unix.CLONE_NEWUSER)|uintptr(syscall.SIGCHLD), uintptr(0)
	if runtime.GOARCH == "s390x" {
		a1, a2 = a2, a1
	}
	pid, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, a1, a2, 0, 0, 0, 0)
	if errno == 0 && pid == 0 {
		for {
			_, _, _ = syscall.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
		}
	}
	return pid, errno
}

// reap waits for the child forkIntoUserNS made.
func reap(pid int) {
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			return
		}
	}
}
