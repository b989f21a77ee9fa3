package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysFchmodat2 is fchmodat2, the same number on amd64 and arm64.
const sysFchmodat2 = 452

// hardeningVerb runs the verbs of the second attack round; false when verb
// is not one of them.
//
//	probe writable PATH     can this process write PATH (access W_OK, no write)
//	probe keyring HEX       read every key of the session keyring, look for the secret
//	probe socket FAM [PROTO]  open socket(FAM, ..., PROTO)
//	probe forks N           start up to N sleeping children, report how many started
//	probe setid DIR         try every call that could make a setuid or setgid file in DIR, one line each
//	probe dgram PATH        socketpair(AF_UNIX, SOCK_DGRAM), then sendto and connect to the socket at PATH
//	probe pairs             socketpair(AF_UNIX) of SOCK_STREAM and SOCK_SEQPACKET
//	probe kernel            bpf and perf_event_open with no arguments: EPERM is the filter, EFAULT the kernel
func hardeningVerb(verb, arg string, rest []string) bool {
	switch verb {
	case "setid":
		fmt.Println(setid(arg))
	case "dgram":
		fmt.Println(dgram(arg))
	case "pairs":
		fmt.Println(pairs())
	case "kernel":
		fmt.Println(kernelCalls())
	case "writable":
		report("", unix.Access(arg, unix.W_OK))
	case "keyring":
		secret, _ := decodeHex(arg)
		fmt.Println(keyring(secret))
	case "socket":
		fmt.Println(openSocket(arg, rest))
	case "forks":
		n, _ := strconv.Atoi(arg)
		fmt.Println(forks(n))
	default:
		return false
	}
	return true
}

func decodeHex(s string) (string, error) {
	b := make([]byte, len(s)/2)
	for i := range b {
		v, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return "", err
		}
		b[i] = byte(v)
	}
	return string(b), nil
}

// keyring reads the session keyring's keys (KEYCTL_READ on the keyring
// lists their ids) and their payloads.
func keyring(secret string) string {
	ids := make([]byte, 4096)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, unix.KEY_SPEC_SESSION_KEYRING, ids, 0)
	if err != nil {
		return "denied: " + err.Error()
	}
	var found []string
	for i := 0; i+4 <= n && i+4 <= len(ids); i += 4 {
		id := int(int32(uint32(ids[i]) | uint32(ids[i+1])<<8 | uint32(ids[i+2])<<16 | uint32(ids[i+3])<<24))
		buf := make([]byte, 4096)
		m, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
		if err == nil && m <= len(buf) && bytes.Contains(buf[:m], []byte(secret)) {
			found = append(found, strconv.Itoa(id))
		}
	}
	if len(found) > 0 {
		return "found: key " + strings.Join(found, ",")
	}
	return fmt.Sprintf("ok %d keys, secret nowhere", n/4)
}

func openSocket(fam string, rest []string) string {
	f, err := strconv.Atoi(fam)
	if err != nil {
		return "bad family " + fam
	}
	proto := 0
	if len(rest) > 0 {
		proto, _ = strconv.Atoi(rest[0])
	}
	typ := unix.SOCK_STREAM
	if f == unix.AF_NETLINK || f == unix.AF_PACKET {
		typ = unix.SOCK_RAW
	}
	if f == unix.AF_ALG {
		typ = unix.SOCK_SEQPACKET
	}
	fd, err := unix.Socket(f, typ, proto)
	if err != nil {
		return "denied: " + err.Error()
	}
	unix.Close(fd)
	return "ok"
}

// forks starts sleeping children until n or the first failure; they are
// killed before it returns.
func forks(n int) string {
	var kids []*exec.Cmd
	defer func() {
		for _, k := range kids {
			_ = k.Process.Kill()
			_, _ = k.Process.Wait()
		}
	}()
	for len(kids) < n {
		c := exec.Command("sleep", "30")
		if err := c.Start(); err != nil {
			if errors.Is(err, syscall.EAGAIN) {
				return fmt.Sprintf("denied: %d started, then %v", len(kids), err)
			}
			return fmt.Sprintf("error after %d: %v", len(kids), err)
		}
		kids = append(kids, c)
	}
	time.Sleep(10 * time.Millisecond)
	return fmt.Sprintf("ok %d started", len(kids))
}

// setid tries each way to give a file S_ISUID or S_ISGID; every line is
// "NAME ok" or "NAME denied: ERR".
func setid(dir string) string {
	at := int(unix.AT_FDCWD)
	cwd := uintptr(at) // the kernel reads the int -100
	path := func(name string) string { return dir + "/" + name }
	ptr := func(p string) uintptr {
		b, _ := unix.BytePtrFromString(p)
		return uintptr(unsafe.Pointer(b))
	}
	var out []string
	try := func(name string, call func() error) {
		if err := call(); err != nil {
			out = append(out, name+" denied: "+err.Error())
		} else {
			out = append(out, name+" ok")
		}
	}
	plain := func(name string) string {
		p := path(name)
		_ = os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755)
		return p
	}
	// sys makes a raw call; a descriptor it returns is closed (close is
	// harmless for the calls that return 0).
	sys := func(nr uintptr, args ...uintptr) error {
		var a [6]uintptr
		copy(a[:], args)
		r, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		if e != 0 {
			return e
		}
		if r > 2 {
			unix.Close(int(r))
		}
		return nil
	}
	try("fchmod", func() error {
		f, err := os.Open(plain("fchmod"))
		if err != nil {
			return err
		}
		defer f.Close()
		return sys(unix.SYS_FCHMOD, f.Fd(), 0o4755)
	})
	try("fchmodat", func() error { return sys(unix.SYS_FCHMODAT, cwd, ptr(plain("fchmodat")), 0o2755) })
	try("fchmodat2", func() error { return sys(sysFchmodat2, cwd, ptr(plain("fchmodat2")), 0o6755, 0) })
	try("openat-creat", func() error {
		return sys(unix.SYS_OPENAT, cwd, ptr(path("openat-creat")), unix.O_CREAT|unix.O_WRONLY, 0o4755)
	})
	try("openat-tmpfile", func() error {
		fd, err := unix.Openat(at, dir, unix.O_TMPFILE|unix.O_WRONLY, 0o4755)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Linkat(at, fmt.Sprintf("/proc/self/fd/%d", fd), at, path("openat-tmpfile"), unix.AT_SYMLINK_FOLLOW)
	})
	try("mknodat", func() error { return sys(unix.SYS_MKNODAT, cwd, ptr(path("mknodat")), unix.S_IFREG|0o4755, 0) })
	try("openat2", func() error {
		fd, err := unix.Openat2(at, path("openat2"), &unix.OpenHow{Flags: unix.O_CREAT | unix.O_WRONLY, Mode: 0o4755})
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
	for _, c := range legacyCalls(path, plain, ptr, sys) {
		try(c.name, c.call)
	}
	// What a person would type.
	try("cp-chmod", func() error {
		b, err := exec.Command("sh", "-c", "cp /bin/sh "+path("rootsh")+" && chmod 6755 "+path("rootsh")).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v %s", err, strings.TrimSpace(string(b)))
		}
		return nil
	})
	return strings.Join(out, "\n")
}

// dgram is the review's /var/tmp/rev/c/dgram: a datagram pair is not bound
// to its peer, so it can send to any datagram socket it can name.
func dgram(target string) string {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		return "denied: socketpair: " + err.Error()
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	addr := &unix.SockaddrUnix{Name: target}
	if err := unix.Sendto(fds[0], []byte("hello from inside the sandbox"), 0, addr); err == nil {
		return "ok sent"
	}
	if err := unix.Connect(fds[1], addr); err != nil {
		return "denied: connect: " + err.Error()
	}
	if _, err := unix.Write(fds[1], []byte("second")); err != nil {
		return "denied: send: " + err.Error()
	}
	return "ok sent after connect"
}

func pairs() string {
	var out []string
	for _, typ := range []int{unix.SOCK_STREAM, unix.SOCK_SEQPACKET} {
		fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return "denied: " + err.Error()
		}
		unix.Close(fds[0])
		unix.Close(fds[1])
		out = append(out, strconv.Itoa(typ))
	}
	return "ok " + strings.Join(out, ",")
}

// kernelCalls calls bpf and perf_event_open with a null attribute: the
// kernel answers EFAULT (or EPERM where a sysctl closes them to users), the
// filter EPERM before the kernel looks.
func kernelCalls() string {
	var out []string
	for _, c := range []struct {
		name string
		nr   uintptr
		args [5]uintptr
	}{
		{"bpf", unix.SYS_BPF, [5]uintptr{0, 0, 0}},
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, [5]uintptr{0, 0, ^uintptr(0), ^uintptr(0), 0}},
	} {
		_, _, e := unix.Syscall6(c.nr, c.args[0], c.args[1], c.args[2], c.args[3], c.args[4], 0)
		out = append(out, fmt.Sprintf("%s %d", c.name, int(e)))
	}
	return strings.Join(out, " ")
}
