package initproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestIDMapsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		uids, gids []IDMap
		arg        string
		uid, gid   string
	}{
		{[]IDMap{{0, 0, 1}, {1000, 1 << 30, 1}}, []IDMap{{0, 0, 1}, {1000, 1 << 30, 1}},
			"0 0 1,1000 1073741824 1/0 0 1,1000 1073741824 1", "0 0 1\n1000 1073741824 1\n", "0 0 1\n1000 1073741824 1\n"},
		{[]IDMap{{1001, 7, 1}}, []IDMap{{1002, 7, 1}}, "1001 7 1/1002 7 1", "1001 7 1\n", "1002 7 1\n"},
	} {
		arg := FormatIDMaps(tc.uids, tc.gids)
		if arg != tc.arg {
			t.Errorf("FormatIDMaps = %q, want %q", arg, tc.arg)
		}
		uid, gid, err := parseIDMaps(arg)
		if err != nil || uid != tc.uid || gid != tc.gid {
			t.Errorf("parseIDMaps(%q) = %q, %q, %v", arg, uid, gid, err)
		}
	}
	for _, bad := range []string{"", "0 0 1", "0 0/0 0 1", "0 0 1/0 -1 1", "0 0 1\n1 1 1/0 0 1", "a b c/0 0 1", "0 0 1/"} {
		if uid, gid, err := parseIDMaps(bad); err == nil {
			t.Errorf("parseIDMaps(%q) = %q, %q: want an error", bad, uid, gid)
		}
	}
}

// clones are the ways a namespace's child is made: vfork (the runner's,
// in-process) where the architecture and the kernel have it, and fork
// (the helper's).
func clones() []struct {
	name  string
	clone func() (zombie, error)
} {
	c := []struct {
		name  string
		clone func() (zombie, error)
	}{{"fork", forkIntoUserNS}}
	if vforkWorks() {
		c = append(c, struct {
			name  string
			clone func() (zombie, error)
		}{"vfork", vforkIntoUserNS})
	}
	return c
}

// TestNewUserNS: the namespace made has the maps asked for, as a process
// that joins it sees them, and the child that made it is reaped (none is
// left behind), whether the child was made by vfork or by fork.
func TestNewUserNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the drop's namespaces are root's: run as root (CI does)")
	}
	const host = 1<<30 + 4242
	for _, c := range clones() {
		for _, tc := range []struct {
			name       string
			uids, gids []IDMap
		}{
			{"agent", []IDMap{{0, 0, 1}, {1000, host, 1}}, []IDMap{{0, 0, 1}, {1000, host, 1}}},
			{"workspace owner", []IDMap{{1001, host, 1}}, []IDMap{{1002, host, 1}}},
		} {
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				uidMap, gidMap, err := parseIDMaps(FormatIDMaps(tc.uids, tc.gids))
				if err != nil {
					t.Fatal(err)
				}
				fd, err := newUserNS(c.clone, uidMap, gidMap)
				if err != nil {
					t.Fatal(err)
				}
				defer syscall.Close(fd)
				if _, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); err != syscall.ECHILD {
					t.Errorf("a child is left unreaped: wait4 = %v", err)
				}
				// nsenter joins the namespace by the open descriptor, which is
				// all that keeps it.
				out, err := exec.Command("nsenter", "--preserve-credentials", fmt.Sprintf("--user=/proc/%d/fd/%d", os.Getpid(), fd), "--",
					"cat", "/proc/self/uid_map", "/proc/self/gid_map").CombinedOutput()
				if err != nil {
					t.Fatalf("nsenter: %v %s", err, out)
				}
				if got, want := strings.Join(strings.Fields(string(out)), " "), strings.Join(strings.Fields(uidMap+gidMap), " "); got != want {
					t.Errorf("maps inside = %q, want %q", got, want)
				}
			})
		}
	}
}

// vforkWorks reports whether the runner's in-process path works here (an
// architecture with the assembly, a kernel with pidfds), as root.
func vforkWorks() bool {
	if !canVfork {
		return false
	}
	z, err := vforkIntoUserNS()
	if err != nil {
		return false
	}
	return z.reap() == nil
}

// TestUserNamespacesInABusyProcess: the runner's in-process namespaces
// (vfork: the child runs on the caller's stack and memory) leave the
// process as it was while its other threads allocate, collect and switch
// goroutines: a child that wrote to the shared stack would send the caller
// back through a clobbered frame (it exits, or crashes), and one that ran
// a signal handler would corrupt the runtime. Each namespace is a new one,
// the children are all reaped and no descriptor is left open.
func TestUserNamespacesInABusyProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the drop's namespaces are root's: run as root (CI does)")
	}
	if !vforkWorks() {
		if _, err := UserNamespaces("0 0 1/0 0 1"); !errors.Is(err, ErrNoInProcessUserns) {
			t.Fatalf("UserNamespaces without a vfork path = %v, want ErrNoInProcessUserns", err)
		}
		t.Skip("no in-process path here (" + runtime.GOARCH + ", or a kernel without pidfds)")
	}
	openFDs := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	before := openFDs()
	stop := make(chan struct{})
	var busy sync.WaitGroup
	for range 4 {
		busy.Go(func() {
			var keep [][]byte
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				keep = append(keep, make([]byte, 4096))
				if len(keep) > 256 {
					keep = keep[:0]
					runtime.GC()
				}
				runtime.Gosched()
			}
		})
	}
	defer func() { close(stop); busy.Wait() }()
	own, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		fds, err := UserNamespaces(FormatIDMaps([]IDMap{{0, 0, 1}, {1000, 1<<30 + i, 1}}, []IDMap{{0, 0, 1}}), "0 0 1/0 0 1")
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if len(fds) != 2 {
			t.Fatalf("round %d: %d namespaces, want 2", i, len(fds))
		}
		// A closed namespace's number is used again: the two of one round
		// are told apart, and from the process's own.
		seen := map[string]bool{own: true}
		for _, fd := range fds {
			ns, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
			if err != nil || !strings.HasPrefix(ns, "user:[") || seen[ns] {
				t.Fatalf("round %d: descriptor %d is %q (%v), want a new user namespace", i, fd, ns, err)
			}
			seen[ns] = true
		}
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}
	if _, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); err != syscall.ECHILD {
		t.Errorf("a child is left unreaped: wait4 = %v", err)
	}
	if after := openFDs(); after != before {
		t.Errorf("%d descriptors open after 200 rounds, %d before", after, before)
	}
}

// TestMapsNeverReachAnotherProcess: root's id maps are written only to the
// child made, never to another process that holds its pid: here a process
// in a user namespace of its own, whose maps are still unwritten (root's
// "0 0 1" there would make its user the host's root). The pid is handed to
// newUserNS with the pidfd of a child already reaped (the pid used again)
// and with the pidfd of a live child of another pid (a /proc where the pid
// is another process); both are refused, and the process's maps stay empty.
func TestMapsNeverReachAnotherProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the drop's namespaces are root's: run as root (CI does)")
	}
	if !vforkWorks() {
		t.Skip("no in-process path here (" + runtime.GOARCH + ", or a kernel without pidfds)")
	}
	own, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		t.Fatal(err)
	}
	other := exec.Command("unshare", "--user", "sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	victim := other.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", victim)); err == nil && ns != own {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other process never entered a user namespace of its own")
		}
	}
	reaped, err := vforkIntoUserNS()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := waitPidfd(reaped.pidfd, 0); err != nil {
		t.Fatal(err)
	}
	live, err := vforkIntoUserNS()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		pidfd int
	}{{"reaped child, its pid used again", reaped.pidfd}, {"live child, another pid", live.pidfd}} {
		t.Run(tc.name, func(t *testing.T) {
			fd, err := newUserNS(func() (zombie, error) { return zombie{victim, tc.pidfd}, nil }, "0 0 1\n", "0 0 1\n")
			if err == nil {
				syscall.Close(fd)
				t.Fatal("maps written through another process's pid")
			}
			t.Log(err)
			if m, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", victim)); err != nil || len(m) != 0 {
				t.Errorf("the other process's uid_map is %q (%v), want it unwritten", m, err)
			}
		})
	}
	if _, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); err != syscall.ECHILD && err != nil {
		t.Errorf("wait4 = %v", err)
	}
}

// TestMapsNeverReachAnotherNamespacesProcess: in a pid namespace whose
// /proc is another pid namespace's (unshare --pid without a /proc of its
// own), the child's pid names another process under /proc; the namespaces
// are refused, by the pidfd's pid as that /proc sees it, and the helper's
// (forked, no pidfd) by /proc/self. The test runs itself again in such a
// namespace.
func TestMapsNeverReachAnotherNamespacesProcess(t *testing.T) {
	if os.Getenv("AGENTRUN_TEST_FOREIGN_PROC") == "1" {
		fds, err := UserNamespaces("0 0 1/0 0 1")
		if err == nil {
			fmt.Println("made", len(fds), "namespaces through another pid namespace's /proc")
			os.Exit(1)
		}
		if !strings.Contains(err.Error(), "is another process") {
			fmt.Println("refused, but not by the pidfd's pid:", err)
			os.Exit(1)
		}
		fmt.Println("refused:", err)
		// The helper's fork, which has no pidfd, checks /proc itself.
		fds, err = userNamespaces(forkIntoUserNS, []string{"0 0 1/0 0 1"})
		if err == nil || !strings.Contains(err.Error(), "not this process's pid namespace's") {
			fmt.Println("the helper's way:", len(fds), err)
			os.Exit(1)
		}
		fmt.Println("refused:", err)
		os.Exit(0)
	}
	runInProcessAgain(t, "AGENTRUN_TEST_FOREIGN_PROC", "unshare", "--pid", "--fork", "--")
}

// runInProcessAgain runs the calling test again in a process of its own,
// with env=1 in its environment and under wrap (a command that ends with
// the test binary), as root where the runner's in-process path works; its
// output is logged, and its failure the test's.
func runInProcessAgain(t *testing.T, env string, wrap ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the drop's namespaces are root's: run as root (CI does)")
	}
	if !vforkWorks() {
		t.Skip("no in-process path here (" + runtime.GOARCH + ", or a kernel without pidfds)")
	}
	args := append(wrap[:len(wrap):len(wrap)], os.Args[0], "-test.run", "^"+t.Name()+"$")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	t.Logf("%s", out)
}

// TestUserNamespacesWhereChildrenAreReapedElsewhere: in a process where
// something else reaps children (here the kernel itself: SIGCHLD ignored),
// the runner's namespaces fail, and not as unsupported (which would start
// the helper and hide it). Here the pid is already gone when its /proc
// directory is opened; TestMapsNeverReachAnotherProcess is the case where
// it names another process. The test runs itself again with SIGCHLD
// ignored.
func TestUserNamespacesWhereChildrenAreReapedElsewhere(t *testing.T) {
	if os.Getenv("AGENTRUN_TEST_SIGCHLD_IGNORED") == "1" {
		signal.Ignore(syscall.SIGCHLD)
		fds, err := UserNamespaces("0 0 1/0 0 1")
		switch {
		case err == nil:
			fmt.Println("made", len(fds), "namespaces with their child reaped elsewhere")
			os.Exit(1)
		case errors.Is(err, ErrNoInProcessUserns):
			fmt.Println("unsupported:", err)
			os.Exit(1)
		}
		fmt.Println("refused:", err)
		os.Exit(0)
	}
	runInProcessAgain(t, "AGENTRUN_TEST_SIGCHLD_IGNORED")
}

// TestNewUserNSWithoutClone3: under a seccomp profile that answers clone3
// with ENOSYS (so that libc falls back to clone; the project's own node
// profile does), the namespaces are still made. The test runs itself again
// with such a filter on every thread.
func TestNewUserNSWithoutClone3(t *testing.T) {
	if os.Getenv("AGENTRUN_TEST_NO_CLONE3") == "1" {
		if err := refuseClone3(); err != nil {
			fmt.Println("filter:", err)
			os.Exit(2)
		}
		for _, c := range clones() {
			fd, err := newUserNS(c.clone, "0 0 1\n", "0 0 1\n")
			if err != nil {
				fmt.Println("newUserNS by", c.name+":", err)
				os.Exit(1)
			}
			syscall.Close(fd)
		}
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		t.Skip("the drop's namespaces are root's: run as root (CI does)")
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the test's filter is written for amd64")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestNewUserNSWithoutClone3$")
	cmd.Env = append(os.Environ(), "AGENTRUN_TEST_NO_CLONE3=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("with clone3 refused: %v %s", err, out)
	}
}

// refuseClone3 installs, on every thread, a seccomp filter that answers
// clone3 with ENOSYS and allows everything else.
func refuseClone3() error {
	const (
		bpfLdWAbs   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		bpfJeqK     = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		bpfRetK     = unix.BPF_RET | unix.BPF_K
		retErrno    = 0x00050000
		retAllow    = 0x7fff0000
		auditX86_64 = 0xc000003e
	)
	prog := []unix.SockFilter{
		{Code: bpfLdWAbs, K: 4}, // seccomp_data.arch
		{Code: bpfJeqK, Jt: 0, Jf: 3, K: auditX86_64},
		{Code: bpfLdWAbs, K: 0}, // seccomp_data.nr
		{Code: bpfJeqK, Jt: 0, Jf: 1, K: unix.SYS_CLONE3},
		{Code: bpfRetK, K: retErrno | uint32(unix.ENOSYS)},
		{Code: bpfRetK, K: retAllow},
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return errno
	}
	// clone3 is refused now.
	if _, _, errno := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0); errno != unix.ENOSYS {
		return fmt.Errorf("clone3 gives %v, not ENOSYS", errno)
	}
	return nil
}
