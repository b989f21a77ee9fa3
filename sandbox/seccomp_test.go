package sandbox

import (
	"encoding/binary"
	"syscall"
	"testing"
)

// run interprets a classic BPF program over one struct seccomp_data, the way
// the kernel does for the instructions the filter uses.
func run(t *testing.T, prog []byte, arch, nr uint32, args ...uint64) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.LittleEndian.PutUint32(data[offNr:], nr)
	binary.LittleEndian.PutUint32(data[offArch:], arch)
	for i, a := range args {
		binary.LittleEndian.PutUint64(data[offArg0+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog)/8; pc++ {
		code := binary.LittleEndian.Uint16(prog[8*pc:])
		jt, jf := prog[8*pc+2], prog[8*pc+3]
		k := binary.LittleEndian.Uint32(prog[8*pc+4:])
		switch code {
		case bpfLdWAbs:
			acc = binary.LittleEndian.Uint32(data[k:])
		case bpfAndK:
			acc &= k
		case bpfJeqK, bpfJsetK:
			hit := acc == k
			if code == bpfJsetK {
				hit = acc&k != 0
			}
			if hit {
				pc += int(jt)
			} else {
				pc += int(jf)
			}
		case bpfRetK:
			return k
		default:
			t.Fatalf("unknown instruction %#x at %d", code, pc)
		}
	}
	t.Fatalf("the program fell off its end")
	return 0
}

func TestFilterVerdicts(t *testing.T) {
	errno := func(e syscall.Errno) uint32 { return retErrno | uint32(e) }
	const (
		afUnix, afVsock, afAlg, afPacket = 1, 40, 38, 17
		netlinkUevent                    = 15
		cloneThread                      = 0x00010000 | 0x00000100 // CLONE_THREAD|CLONE_VM
		atFDCWD                          = 0xffffff9c              // -100 as the kernel's int
	)
	for name, a := range abis {
		prog, err := filterFor(a).assemble()
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name string
			nr   uint32
			args []uint64
			want uint32
		}{
			{"inet", a.socket, []uint64{syscall.AF_INET, syscall.SOCK_STREAM, 0}, retAllow},
			{"inet6", a.socket, []uint64{syscall.AF_INET6, syscall.SOCK_DGRAM, 0}, retAllow},
			{"netlink route", a.socket, []uint64{afNetlink, syscall.SOCK_RAW, netlinkRoute}, retAllow},
			{"netlink uevent", a.socket, []uint64{afNetlink, syscall.SOCK_RAW, netlinkUevent}, errno(syscall.EAFNOSUPPORT)},
			{"unix", a.socket, []uint64{afUnix, syscall.SOCK_STREAM, 0}, errno(syscall.EAFNOSUPPORT)},
			{"vsock", a.socket, []uint64{afVsock, syscall.SOCK_STREAM, 0}, errno(syscall.EAFNOSUPPORT)},
			{"alg", a.socket, []uint64{afAlg, syscall.SOCK_SEQPACKET, 0}, errno(syscall.EAFNOSUPPORT)},
			{"packet", a.socket, []uint64{afPacket, syscall.SOCK_RAW, 0}, errno(syscall.EAFNOSUPPORT)},
			{"io_uring_setup", a.ioUring[0], nil, errno(syscall.EPERM)},
			{"io_uring_enter", a.ioUring[1], nil, errno(syscall.EPERM)},
			{"keyctl", a.keyctl, nil, errno(syscall.EPERM)},
			{"add_key", a.addKey, nil, errno(syscall.EPERM)},
			{"request_key", a.requestKey, nil, errno(syscall.EPERM)},
			{"unshare newuser", a.unshare, []uint64{cloneNewUser | syscall.CLONE_NEWNET}, errno(syscall.EPERM)},
			{"unshare mount", a.unshare, []uint64{syscall.CLONE_NEWNS}, retAllow},
			{"clone newuser", a.clone, []uint64{cloneNewUser}, errno(syscall.EPERM)},
			{"clone thread", a.clone, []uint64{cloneThread}, retAllow},
			{"clone3", a.clone3, nil, errno(syscall.ENOSYS)},
			{"read", 0, nil, retAllow},
			// Finding 6: a datagram pair reaches host datagram sockets.
			{"socketpair unix stream", a.socketpair, []uint64{afUnix, syscall.SOCK_STREAM | syscall.SOCK_CLOEXEC, 0}, retAllow},
			{"socketpair unix seqpacket", a.socketpair, []uint64{afUnix, syscall.SOCK_SEQPACKET | syscall.SOCK_NONBLOCK, 0}, retAllow},
			{"socketpair unix dgram", a.socketpair, []uint64{afUnix, syscall.SOCK_DGRAM, 0}, errno(syscall.ESOCKTNOSUPPORT)},
			{"socketpair unix dgram cloexec", a.socketpair, []uint64{afUnix, syscall.SOCK_DGRAM | syscall.SOCK_CLOEXEC, 0}, errno(syscall.ESOCKTNOSUPPORT)},
			{"socketpair unix raw", a.socketpair, []uint64{afUnix, syscall.SOCK_RAW, 0}, errno(syscall.ESOCKTNOSUPPORT)},
			{"socketpair tipc", a.socketpair, []uint64{30, syscall.SOCK_STREAM, 0}, errno(syscall.EAFNOSUPPORT)},
			// Finding 12.
			{"bpf", a.bpf, nil, errno(syscall.EPERM)},
			{"perf_event_open", a.perfEventOpen, nil, errno(syscall.EPERM)},
			// Finding 3: no setuid or setgid bits.
			{"fchmod 0755", a.fchmod, []uint64{3, 0o755}, retAllow},
			{"fchmod 4755", a.fchmod, []uint64{3, 0o4755}, errno(syscall.EPERM)},
			{"fchmod 2755", a.fchmod, []uint64{3, 0o2755}, errno(syscall.EPERM)},
			{"fchmod 1777 (sticky)", a.fchmod, []uint64{3, 0o1777}, retAllow},
			{"fchmod 4755 high bits set", a.fchmod, []uint64{3, 0xffffffff00000000 | 0o4755}, errno(syscall.EPERM)},
			{"fchmodat 0644", a.fchmodat, []uint64{atFDCWD, 0, 0o644}, retAllow},
			{"fchmodat 6755", a.fchmodat, []uint64{atFDCWD, 0, 0o6755}, errno(syscall.EPERM)},
			{"fchmodat2 4700", a.fchmodat2, []uint64{atFDCWD, 0, 0o4700, 0}, errno(syscall.EPERM)},
			{"fchmodat2 0700", a.fchmodat2, []uint64{atFDCWD, 0, 0o700, 0}, retAllow},
			{"openat read, garbage mode", a.openat, []uint64{atFDCWD, 0, syscall.O_RDONLY, 0o4755}, retAllow},
			{"openat create 0644", a.openat, []uint64{atFDCWD, 0, syscall.O_WRONLY | syscall.O_CREAT | syscall.O_TRUNC, 0o644}, retAllow},
			{"openat create 4755", a.openat, []uint64{atFDCWD, 0, syscall.O_WRONLY | syscall.O_CREAT, 0o4755}, errno(syscall.EPERM)},
			{"openat tmpfile 2755", a.openat, []uint64{atFDCWD, 0, oTmpfile | syscall.O_RDWR, 0o2755}, errno(syscall.EPERM)},
			{"mknodat regular 4755", a.mknodat, []uint64{atFDCWD, 0, syscall.S_IFREG | 0o4755, 0}, errno(syscall.EPERM)},
			{"mknodat fifo 0644", a.mknodat, []uint64{atFDCWD, 0, syscall.S_IFIFO | 0o644, 0}, retAllow},
			{"openat2", a.openat2, nil, errno(syscall.ENOSYS)},
		}
		if a.chmod != none {
			tests = append(tests, []struct {
				name string
				nr   uint32
				args []uint64
				want uint32
			}{
				{"chmod 0755", a.chmod, []uint64{0, 0o755}, retAllow},
				{"chmod 4755", a.chmod, []uint64{0, 0o4755}, errno(syscall.EPERM)},
				{"creat 0644", a.creat, []uint64{0, 0o644}, retAllow},
				{"creat 6755", a.creat, []uint64{0, 0o6755}, errno(syscall.EPERM)},
				{"mknod regular 2755", a.mknod, []uint64{0, syscall.S_IFREG | 0o2755, 0}, errno(syscall.EPERM)},
				{"open read, garbage mode", a.open, []uint64{0, syscall.O_RDONLY, 0o4755}, retAllow},
				{"open create 0600", a.open, []uint64{0, syscall.O_CREAT | syscall.O_EXCL, 0o600}, retAllow},
				{"open create 4755", a.open, []uint64{0, syscall.O_CREAT | syscall.O_WRONLY, 0o4755}, errno(syscall.EPERM)},
			}...)
		}
		for _, tt := range tests {
			if got := run(t, prog, a.arch, tt.nr, tt.args...); got != tt.want {
				t.Errorf("%s %s: verdict %#x, want %#x", name, tt.name, got, tt.want)
			}
		}
		if got := run(t, prog, 0x40000003 /* i386 */, a.socket, syscall.AF_INET); got != errno(syscall.EPERM) {
			t.Errorf("%s: a foreign architecture must be refused, got %#x", name, got)
		}
		if a.checkX32 {
			if got := run(t, prog, a.arch, x32Bit|a.socket, syscall.AF_INET); got != errno(syscall.EPERM) {
				t.Errorf("%s: an x32 syscall must be refused, got %#x", name, got)
			}
		}
	}
}

func TestAssembleRefusesBadJumps(t *testing.T) {
	p := &bpf{}
	p.jeq(1, "nowhere", "")
	p.ret(retAllow)
	if _, err := p.assemble(); err == nil {
		t.Errorf("a jump to an unknown label must fail")
	}
}
