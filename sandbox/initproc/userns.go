package initproc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

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
// (userns_vfork_linux_amd64.s): no copy, and no process to start. The
// child's pidfd makes sure the /proc directory its maps are written to is
// the child's (zombie.procDir). Elsewhere, or on a kernel without pidfds,
// it starts this init once as a helper (UsernsFlag), a small process whose
// fork is cheap, which makes them and hands their handles over UsernsFD.

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
// their handles sent over UsernsFD. Its children are forked: the helper is
// small (its page tables cost little), and nothing else in it reaps them.
func makeUserNamespaces(args []string) error {
	sock := os.NewFile(UsernsFD, "userns")
	defer sock.Close()
	fds, err := userNamespaces(forkIntoUserNS, args)
	if err != nil {
		return err
	}
	return syscall.Sendmsg(int(sock.Fd()), []byte("userns"), syscall.UnixRights(fds...), nil, 0)
}

// ErrNoInProcessUserns is UserNamespaces's error where there is no vfork
// path, or the kernel has no pidfds (before Linux 5.4): the caller starts
// the helper instead. Any other error is a failure of its own.
var ErrNoInProcessUserns = errors.New("no in-process user namespaces here")

// UserNamespaces makes one user namespace per argument (FormatIDMaps) in
// this process, by vfork, and returns open descriptors of them in order.
func UserNamespaces(maps ...string) ([]int, error) {
	if !canVfork {
		return nil, fmt.Errorf("no vfork path on this architecture: %w", ErrNoInProcessUserns)
	}
	return userNamespaces(vforkIntoUserNS, maps)
}

// userNamespaces makes the namespaces of maps, each child made by clone.
func userNamespaces(clone func() (zombie, error), maps []string) ([]int, error) {
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

// zombie is a child made in a new user namespace, exiting or exited and
// not reaped: its pid, and its pidfd where it has one (-1: the pid is all
// there is).
type zombie struct{ pid, pidfd int }

// childExitStatus is the status the vfork child exits with: a caller that
// went down the child's path by mistake (a clobbered frame) exits with it
// too, which no test or caller takes for success, and a child that exited
// any other way is not the one made.
const childExitStatus = 87

// newUserNS makes a user namespace with these maps, its child made by
// clone, and returns an open descriptor of it.
func newUserNS(clone func() (zombie, error), uidMap, gidMap string) (fd int, err error) {
	z, err := clone()
	if err != nil {
		return -1, fmt.Errorf("clone(CLONE_NEWUSER): %w", err)
	}
	defer func() {
		if rerr := z.reap(); rerr != nil && err == nil {
			unix.Close(fd)
			fd, err = -1, rerr
		}
	}()
	dir, err := z.procDir()
	if err != nil {
		return -1, err
	}
	defer unix.Close(dir)
	// setgroups stays allowed: the maker is root in the parent namespace,
	// so it may write the gid map without denying it.
	for _, m := range [][2]string{{"uid_map", uidMap}, {"gid_map", gidMap}} {
		if err := writeAt(dir, m[0], m[1]); err != nil {
			return -1, fmt.Errorf("%s: %w", m[0], err)
		}
	}
	return unix.Openat(dir, "ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
}

// writeAt writes s to the file name under the directory dir, in one write
// (an id map is taken whole or not at all).
func writeAt(dir int, name, s string) error {
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	n, err := unix.Write(fd, []byte(s))
	if err == nil && n != len(s) {
		err = io.ErrShortWrite
	}
	return err
}

// procDir opens the zombie's /proc directory, whose files the maps are
// written to. With a pidfd, the directory is made sure to be the child's:
//   - the pidfd's fdinfo, read in the same /proc, gives the child's pid
//     there: equal to the one clone returned, /proc/PID names the child
//     (a /proc of another pid namespace, where PID is another process,
//     fails this);
//   - the child is then found unreaped (waited for, not reaped): a pid is
//     not used again before its process is reaped, so the directory opened
//     before is the child's, and stays bound to it, even if something else
//     in this process reaps children.
//
// Without one (the helper's fork, in a process where nothing else reaps)
// the pid is trusted once the helper's /proc is found to be its own pid
// namespace's.
func (z zombie) procDir() (int, error) {
	dir, err := unix.Open("/proc/"+strconv.Itoa(z.pid), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("the namespace's child %d: %w", z.pid, err)
	}
	if err := z.check(); err != nil {
		unix.Close(dir)
		return -1, err
	}
	return dir, nil
}

// check is procDir's proof that /proc/PID is the child (see there).
func (z zombie) check() error {
	if z.pidfd < 0 {
		if self, err := os.Readlink("/proc/self"); err != nil || self != strconv.Itoa(os.Getpid()) {
			return fmt.Errorf("/proc is not this process's pid namespace's (/proc/self is %q, %v; the pid is %d): its child's pid names another process there", self, err, os.Getpid())
		}
		return nil
	}
	if pid, err := pidfdPid(z.pidfd); err != nil || pid != z.pid {
		return fmt.Errorf("the namespace's child %d is %d in /proc (%v): /proc/%d is another process", z.pid, pid, err, z.pid)
	}
	// Without WNOHANG: vfork hands back the caller when the child has let
	// go of its memory, a moment before it is a zombie.
	if pid, _, err := waitPidfd(z.pidfd, unix.WNOWAIT); err != nil || pid != z.pid {
		return fmt.Errorf("the namespace's child %d was reaped by something else (%d, %v): its pid may be another process's", z.pid, pid, err)
	}
	return nil
}

// pidfdPid reads the pid of a pidfd's process as /proc's pid namespace
// sees it, from the pidfd's fdinfo ("Pid:\tN"; -1 once reaped, 0 where
// that namespace does not see it).
func pidfdPid(pidfd int) (int, error) {
	// The bare system calls: an os.File costs more than the read (it runs
	// twice on each root start).
	fd, err := unix.Open("/proc/self/fdinfo/"+strconv.Itoa(pidfd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	var buf [512]byte
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(buf[:n]), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, errors.New("no Pid line in the pidfd's fdinfo")
}

// reap waits for the zombie, and with a pidfd checks that it exited as the
// vfork child does.
func (z zombie) reap() error {
	if z.pidfd < 0 {
		reapPid(z.pid)
		return nil
	}
	defer unix.Close(z.pidfd)
	_, status, err := waitPidfd(z.pidfd, 0)
	if err != nil {
		return fmt.Errorf("reaping the namespace's child %d: %w", z.pid, err)
	}
	if status != childExitStatus {
		return fmt.Errorf("the namespace's child %d exited with %d, not %d: not the child made", z.pid, status, childExitStatus)
	}
	return nil
}

// waitPidfd is waitid(P_PIDFD, WEXITED|options), which waits for the
// child's exit: the pid it reports and the exit status.
func waitPidfd(pidfd, options int) (pid, status int, err error) {
	var info unix.Siginfo
	for {
		err = unix.Waitid(unix.P_PIDFD, pidfd, &info, unix.WEXITED|options, nil)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return 0, 0, err
	}
	// A SIGCHLD siginfo: si_pid, then si_uid, then si_status, after the
	// three ints of its head and the union's alignment (16 bytes).
	raw := (*[unsafe.Sizeof(info)]byte)(unsafe.Pointer(&info))
	return int(int32(binary.NativeEndian.Uint32(raw[16:]))), int(int32(binary.NativeEndian.Uint32(raw[24:]))), nil
}

// vforkIntoUserNS makes a child in a new user namespace that shares this
// process's memory and exits at once (rawVforkIntoUserNS). A kernel without
// pidfds (CLONE_PIDFD before 5.2, waitid's P_PIDFD before 5.4) is
// ErrNoInProcessUserns: without one the child's /proc directory cannot be
// told from another process's where something else may reap.
func vforkIntoUserNS() (zombie, error) {
	pidfd := int32(-1)
	pid, err := withSignalsBlocked(func() (uintptr, uintptr) { return rawVforkIntoUserNS(&pidfd) })
	if err != nil {
		return zombie{}, err
	}
	z := zombie{pid, int(pidfd)}
	if z.pidfd < 0 {
		reapPid(pid)
		return zombie{}, fmt.Errorf("no pidfd from clone: %w", ErrNoInProcessUserns)
	}
	if _, _, err := waitPidfd(z.pidfd, unix.WNOWAIT); err == unix.EINVAL {
		unix.Close(z.pidfd)
		reapPid(pid)
		return zombie{}, fmt.Errorf("no waitid(P_PIDFD): %w", ErrNoInProcessUserns)
	}
	return z, nil
}

// forkIntoUserNS forks a child in a new user namespace that exits at once,
// and returns it unreaped, without a pidfd.
func forkIntoUserNS() (zombie, error) {
	pid, err := withSignalsBlocked(func() (uintptr, uintptr) {
		pid, errno := cloneAndExit()
		return pid, uintptr(errno)
	})
	return zombie{pid, -1}, err
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
			_, _, _ = syscall.RawSyscall(unix.SYS_EXIT_GROUP, childExitStatus, 0, 0)
		}
	}
	return pid, errno
}

// reapPid waits for the child of this pid.
func reapPid(pid int) {
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			return
		}
	}
}
