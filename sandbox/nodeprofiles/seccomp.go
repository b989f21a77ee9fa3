// Package nodeprofiles holds the seccomp and AppArmor profiles the agent
// container runs under on a node, so that bubblewrap can build its sandbox
// in a Pod that Pod Security "restricted" admits: the container runtime's
// default allow-list plus exactly the calls bubblewrap and the sandbox's
// init make to set the sandbox up. The chart installs them on the nodes
// (charts/agentrun/files/profiles, written from here: go test ./sandbox/nodeprofiles
// -update) and the manager points agent Pods at them.
package nodeprofiles

import (
	"encoding/json"
	"slices"
)

// SeccompName is the profile's file name under the kubelet's seccomp root
// (a Pod names it as localhostProfile SeccompDir/SeccompName).
const (
	SeccompDir  = "agentrun"
	SeccompName = "bwrap.json"
)

// defaultAllowed is what a container may call under the container
// runtime's default profile (RuntimeDefault, as containerd and Docker ship
// it): everything a program needs, nothing that administers the machine
// (mount, module loading, clock setting, kexec, swap, BPF, perf, keyrings,
// namespaces). Names a kernel or an architecture lacks are skipped by the
// runtime, so the list covers x86_64 and arm64 (and their 32-bit forms).
var defaultAllowed = []string{
	"accept", "accept4", "access", "adjtimex", "alarm", "arch_prctl", "bind", "brk", "cachestat", "capget", "capset",
	"chdir", "chmod", "chown", "chown32", "clock_getres", "clock_getres_time64", "clock_gettime", "clock_gettime64",
	"clock_nanosleep", "clock_nanosleep_time64", "close", "close_range", "connect", "copy_file_range", "creat",
	"dup", "dup2", "dup3", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait", "epoll_pwait2",
	"epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "execve", "execveat", "exit", "exit_group", "faccessat",
	"faccessat2", "fadvise64", "fadvise64_64", "fallocate", "fanotify_mark", "fchdir", "fchmod", "fchmodat", "fchmodat2",
	"fchown", "fchown32", "fchownat", "fcntl", "fcntl64", "fdatasync", "fgetxattr", "flistxattr", "flock", "fork",
	"fremovexattr", "fsetxattr", "fstat", "fstat64", "fstatat64", "fstatfs", "fstatfs64", "fsync", "ftruncate",
	"ftruncate64", "futex", "futex_requeue", "futex_time64", "futex_wait", "futex_waitv", "futex_wake", "futimesat",
	"get_robust_list", "get_thread_area", "getcpu", "getcwd", "getdents", "getdents64", "getegid", "getegid32",
	"geteuid", "geteuid32", "getgid", "getgid32", "getgroups", "getgroups32", "getitimer", "getpeername", "getpgid",
	"getpgrp", "getpid", "getppid", "getpriority", "getrandom", "getresgid", "getresgid32", "getresuid", "getresuid32",
	"getrlimit", "getrusage", "getsid", "getsockname", "getsockopt", "gettid", "gettimeofday", "getuid", "getuid32",
	"getxattr", "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch", "io_cancel", "io_destroy",
	"io_getevents", "io_pgetevents", "io_pgetevents_time64", "io_setup", "io_submit", "ioctl", "ioprio_get",
	"ioprio_set", "ipc", "kill", "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self", "lchown",
	"lchown32", "lgetxattr", "link", "linkat", "listen", "listxattr", "llistxattr", "_llseek", "lremovexattr", "lseek",
	"lsetxattr", "lstat", "lstat64", "madvise", "map_shadow_stack", "membarrier", "memfd_create", "memfd_secret",
	"mincore", "mkdir", "mkdirat", "mknod", "mknodat", "mlock", "mlock2", "mlockall", "mmap", "mmap2", "mprotect",
	"mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive", "mq_timedreceive_time64", "mq_timedsend",
	"mq_timedsend_time64", "mq_unlink", "mremap", "msgctl", "msgget", "msgrcv", "msgsnd", "msync", "munlock",
	"munlockall", "munmap", "name_to_handle_at", "nanosleep", "newfstatat", "_newselect", "open", "openat", "openat2",
	"pause", "personality", "pidfd_getfd", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc", "pkey_free",
	"pkey_mprotect", "poll", "ppoll", "ppoll_time64", "prctl", "pread64", "preadv", "preadv2", "prlimit64",
	"process_mrelease", "pselect6", "pselect6_time64", "ptrace", "pwrite64", "pwritev", "pwritev2", "read", "readahead",
	"readlink", "readlinkat", "readv", "recv", "recvfrom", "recvmmsg", "recvmmsg_time64", "recvmsg", "remap_file_pages",
	"removexattr", "rename", "renameat", "renameat2", "restart_syscall", "rmdir", "rseq", "rt_sigaction",
	"rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
	"rt_sigtimedwait_time64", "rt_tgsigqueueinfo", "sched_get_priority_max", "sched_get_priority_min",
	"sched_getaffinity", "sched_getattr", "sched_getparam", "sched_getscheduler", "sched_rr_get_interval",
	"sched_rr_get_interval_time64", "sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler",
	"sched_yield", "seccomp", "select", "semctl", "semget", "semop", "semtimedop", "semtimedop_time64", "send",
	"sendfile", "sendfile64", "sendmmsg", "sendmsg", "sendto", "set_robust_list", "set_thread_area", "set_tid_address",
	"setfsgid", "setfsgid32", "setfsuid", "setfsuid32", "setgid", "setgid32", "setgroups", "setgroups32", "setitimer",
	"setpgid", "setpriority", "setregid", "setregid32", "setresgid", "setresgid32", "setresuid", "setresuid32",
	"setreuid", "setreuid32", "setrlimit", "setsid", "setsockopt", "setuid", "setuid32", "setxattr", "shmat", "shmctl",
	"shmdt", "shmget", "shutdown", "sigaltstack", "signalfd", "signalfd4", "sigprocmask", "sigreturn",
	"socketpair", "splice", "stat", "stat64", "statfs", "statfs64", "statx", "symlink", "symlinkat",
	"sync", "sync_file_range", "syncfs", "sysinfo", "tee", "tgkill", "time", "timer_create", "timer_delete",
	"timer_getoverrun", "timer_gettime", "timer_gettime64", "timer_settime", "timer_settime64", "timerfd_create",
	"timerfd_gettime", "timerfd_gettime64", "timerfd_settime", "timerfd_settime64", "times", "tkill", "truncate",
	"truncate64", "ugetrlimit", "umask", "uname", "unlink", "unlinkat", "utime", "utimensat", "utimensat_time64",
	"utimes", "vfork", "vmsplice", "wait4", "waitid", "waitpid", "write", "writev",
}

// ForSandbox are the calls bubblewrap makes to build the sandbox as an
// unprivileged user, beyond the default list, each with its reason; the
// functional test (TestBubblewrapNeedsExactlyThese) shows that each is
// needed and that with them bubblewrap works under the profile.
var ForSandbox = map[string]string{
	"clone":      "a new process in new user, mount, PID, network, IPC, UTS and cgroup namespaces (the default list has clone only without namespace flags)",
	"unshare":    "the second user namespace bubblewrap makes to drop to the sandbox's uid, and --unshare-* where clone is not used",
	"mount":      "the sandbox's root: tmpfs, bind mounts, the read-only remounts, /proc, /dev",
	"umount2":    "detaching the old root after pivot_root",
	"pivot_root": "switching to the sandbox's root",
}

// socketFamilies are the address families a socket may have: local, IPv4
// and IPv6 (the CLIs, the proxy) and netlink's routing protocol (bubblewrap
// brings the sandbox's loopback up with it; libc lists interfaces with
// it). The runtime's default allows every family; this profile lets user
// namespaces be created, and with them other netlink protocols (nf_tables,
// the usual way from an unprivileged user namespace to the kernel) and raw
// packet sockets would be open to any Pod that names the profile, so they
// are refused.
var socketFamilies = []struct{ family, protocol uint64 }{
	{1, anyProtocol},  // AF_UNIX
	{2, anyProtocol},  // AF_INET
	{10, anyProtocol}, // AF_INET6
	{16, 0},           // AF_NETLINK, NETLINK_ROUTE only
}

const anyProtocol = ^uint64(0)

// clone3Errno makes clone3 fail with ENOSYS, as the runtimes' default
// profiles do: its flags live in memory a filter cannot inspect, and libc
// falls back to clone, which the profile does see.
const clone3Errno = 38

// Profile is an OCI (runc) seccomp profile, as the kubelet reads a
// Localhost one.
type Profile struct {
	DefaultAction   string    `json:"defaultAction"`
	DefaultErrnoRet *int      `json:"defaultErrnoRet,omitempty"`
	Architectures   []string  `json:"architectures"`
	Syscalls        []Syscall `json:"syscalls"`
}

// Syscall is one rule of a Profile: its calls get Action when every Arg
// matches.
type Syscall struct {
	Names    []string `json:"names"`
	Action   string   `json:"action"`
	ErrnoRet *int     `json:"errnoRet,omitempty"`
	Args     []Arg    `json:"args,omitempty"`
}

// Arg compares one argument of a call.
type Arg struct {
	Index uint   `json:"index"`
	Value uint64 `json:"value"`
	Op    string `json:"op"`
}

// Seccomp is the agent container's profile: the default allow-list and
// ForSandbox allowed, clone3 refused with ENOSYS, sockets of the
// socketFamilies only, everything else EPERM. Only the 64-bit ABIs are
// listed: a 32-bit call (socketcall, whose arguments a filter cannot see)
// gets EPERM. without lists additions to leave out (for the functional
// test).
func Seccomp(without ...string) Profile {
	allowed := append([]string{}, defaultAllowed...)
	for name := range ForSandbox {
		if !slices.Contains(without, name) {
			allowed = append(allowed, name)
		}
	}
	slices.Sort(allowed)
	allowed = slices.Compact(allowed)
	eperm, enosys := 1, clone3Errno
	rules := []Syscall{
		{Names: allowed, Action: "SCMP_ACT_ALLOW"},
		{Names: []string{"clone3"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: &enosys},
	}
	for _, f := range socketFamilies {
		args := []Arg{{Index: 0, Value: f.family, Op: "SCMP_CMP_EQ"}}
		if f.protocol != anyProtocol {
			args = append(args, Arg{Index: 2, Value: f.protocol, Op: "SCMP_CMP_EQ"})
		}
		rules = append(rules, Syscall{Names: []string{"socket"}, Action: "SCMP_ACT_ALLOW", Args: args})
	}
	return Profile{
		DefaultAction:   "SCMP_ACT_ERRNO",
		DefaultErrnoRet: &eperm,
		Architectures:   []string{"SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"},
		Syscalls:        rules,
	}
}

// SeccompJSON is the profile file's content.
func SeccompJSON() []byte {
	b, _ := json.MarshalIndent(Seccomp(), "", "  ")
	return append(b, '\n')
}
