package sandbox

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"syscall"
)

// The seccomp filter bubblewrap installs for the agent (and everything it
// starts). It is an allow-list for sockets and a deny-list for the few
// other calls that reach past the sandbox's namespaces or leave something
// dangerous behind on the host:
//
//   - socket(): only AF_INET and AF_INET6 (the agent's own network, which
//     leads nowhere but the filter proxy) and AF_NETLINK with protocol
//     NETLINK_ROUTE (glibc's getaddrinfo and libuv's interface listing read
//     the sandbox's own addresses through it). Every other family fails
//     with EAFNOSUPPORT: AF_UNIX because filesystem sockets cross the
//     network namespace (a container runtime's or a database's socket
//     visible in the sandbox would be a way out); AF_VSOCK because it is
//     not confined by the network namespace at all (on a VM it reaches the
//     hypervisor's port space); AF_ALG, AF_PACKET, AF_KEY, AF_XDP and the
//     rest because no agent needs them and each is kernel attack surface.
//   - socketpair(): only AF_UNIX pairs of SOCK_STREAM or SOCK_SEQPACKET
//     (runtimes use them for their children's pipes: libuv, Python, Rust's
//     std; a connected pair reaches only itself). A SOCK_DGRAM pair is
//     refused with ESOCKTNOSUPPORT: a datagram socket is not bound to its
//     peer, and sendto() or connect() with a filesystem address reaches any
//     datagram socket on the host (journald, /dev/log), as socket(AF_UNIX)
//     would.
//   - chmod, fchmod, fchmodat, fchmodat2 with S_ISUID or S_ISGID in the
//     mode, and open, openat and creat with either bit in the mode of a file
//     they create (O_CREAT or O_TMPFILE), and mknod and mknodat (which make
//     regular files too): EPERM. The workspace of a root caller is given to
//     the agent through an idmapped mount, so in a root-owned workspace the
//     agent's files are root's on disk, and `chmod 4755` on a copy of a
//     shell would leave a setuid-root program on the host. mkdir needs no
//     rule: the kernel keeps only the permission and sticky bits of its
//     mode (a new directory's S_ISGID comes from its parent alone).
//     openat2 fails with ENOSYS (its mode lives in memory a filter cannot
//     read; libc and libuv fall back to openat). Clearing such bits after
//     the run is not needed, because the filter covers every way to set
//     them: the calls above (io_uring, which could make them without a
//     syscall, is refused below); a file's capabilities (security.capability)
//     need CAP_SETFCAP, which the agent does not have; writing to an existing
//     setuid file clears the bit for a caller without CAP_FSETID; and a hard
//     link to a setuid program outside the workspace fails (EXDEV: the
//     workspace is a mount of its own).
//   - io_uring_setup/enter/register: io_uring can create sockets and files
//     without the socket and open syscalls, past this filter.
//   - keyctl, add_key and request_key: the caller's session keyring is
//     inherited into the sandbox, and a key in it (a Kerberos ticket, a
//     login token) would be readable inside.
//   - bpf and perf_event_open: EPERM; kernel attack surface that no agent
//     needs (unprivileged BPF and perf are often enabled).
//   - unshare and clone with CLONE_NEWUSER, and clone3 (whose flags live in
//     memory a filter cannot read; it fails with ENOSYS, so libc falls back
//     to clone): a nested user namespace gives the agent a full set of
//     capabilities over new network and mount namespaces, kernel attack
//     surface no runtime needs. bubblewrap's --disable-userns does the
//     same through a sysctl, which a container's read-only /proc/sys
//     refuses; the filter works everywhere.
//   - every syscall of a foreign ABI (x32, i386 on x86_64): socketcall
//     hides its arguments from the filter.
//
// The program is classic BPF over struct seccomp_data: nr at offset 0,
// arch at 4, args[i] at 16+8i (their low 32 bits on little-endian machines,
// all the kernel reads of an int or mode_t argument).

const (
	bpfLdWAbs   = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfAndK     = 0x54 // BPF_ALU | BPF_AND | BPF_K
	bpfJeqK     = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJsetK    = 0x45 // BPF_JMP | BPF_JSET | BPF_K
	bpfRetK     = 0x06 // BPF_RET | BPF_K
	retAllow    = 0x7fff0000
	retErrno    = 0x00050000
	x32Bit      = 0x40000000
	archX86_64  = 0xc000003e
	archAArch64 = 0xc00000b7

	offNr, offArch = 0, 4
	offArg0        = 16

	afUnix       = 1
	afNetlink    = 16
	netlinkRoute = 0
	cloneNewUser = 0x10000000

	sockTypeMask  = 0xf // the type without SOCK_NONBLOCK and SOCK_CLOEXEC
	sockStream    = 1
	sockSeqpacket = 5

	setIDBits = 0o6000   // S_ISUID | S_ISGID
	oCreat    = 0x40     // the same on x86_64 and arm64
	oTmpfile  = 0x400000 // __O_TMPFILE, without O_DIRECTORY (which differs)

	// none marks a syscall an architecture does not have.
	none = ^uint32(0)
)

// offArg is the offset of args[i].
func offArg(i int) uint32 { return offArg0 + 8*uint32(i) }

// abi holds the syscall numbers the filter names, per architecture.
type abi struct {
	arch                       uint32
	checkX32                   bool
	socket, socketpair         uint32
	ioUring                    [3]uint32 // setup, enter, register
	keyctl, addKey, requestKey uint32
	bpf, perfEventOpen         uint32
	unshare, clone, clone3     uint32
	// Calls that set a mode: chmod(path, mode), fchmod(fd, mode),
	// fchmodat(dirfd, path, mode[, flags]), fchmodat2, creat(path, mode),
	// mknod(path, mode, dev), mknodat(dirfd, path, mode, dev);
	// open(path, flags, mode), openat(dirfd, path, flags, mode), openat2.
	chmod, fchmod, fchmodat, fchmodat2, creat, mknod, mknodat uint32
	open, openat, openat2                                     uint32
}

var abis = map[string]abi{
	"amd64": {arch: archX86_64, checkX32: true, socket: 41, socketpair: 53, ioUring: [3]uint32{425, 426, 427},
		keyctl: 250, addKey: 248, requestKey: 249, bpf: 321, perfEventOpen: 298, unshare: 272, clone: 56, clone3: 435,
		chmod: 90, fchmod: 91, fchmodat: 268, fchmodat2: 452, creat: 85, mknod: 133, mknodat: 259,
		open: 2, openat: 257, openat2: 437},
	"arm64": {arch: archAArch64, socket: 198, socketpair: 199, ioUring: [3]uint32{425, 426, 427},
		keyctl: 219, addKey: 217, requestKey: 218, bpf: 280, perfEventOpen: 241, unshare: 97, clone: 220, clone3: 435,
		chmod: none, fchmod: 52, fchmodat: 53, fchmodat2: 452, creat: none, mknod: none, mknodat: 33,
		open: none, openat: 56, openat2: 437},
}

// Filter returns the compiled program for this machine, in the byte layout
// of struct sock_filter[] that bwrap --seccomp reads.
func Filter() ([]byte, error) {
	a, ok := abis[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("no seccomp filter for %s; run with --sandbox none or on amd64/arm64", runtime.GOARCH)
	}
	return filterFor(a).assemble()
}

func filterFor(a abi) *bpf {
	p := &bpf{}
	p.ld(offArch)
	p.jeq(a.arch, "", "eperm")
	p.ld(offNr)
	if a.checkX32 {
		p.jset(x32Bit, "eperm", "")
	}
	// Which argument holds the mode of each mode-setting call.
	modeArg := []struct {
		nr  uint32
		arg string
	}{
		{a.chmod, "mode1"}, {a.fchmod, "mode1"}, {a.creat, "mode1"}, {a.mknod, "mode1"},
		{a.fchmodat, "mode2"}, {a.fchmodat2, "mode2"}, {a.mknodat, "mode2"},
		{a.open, "open"}, {a.openat, "openat"},
	}
	for _, c := range modeArg {
		if c.nr != none {
			p.jeq(c.nr, c.arg, "")
		}
	}
	p.jeq(a.socket, "socket", "")
	p.jeq(a.socketpair, "socketpair", "")
	for _, nr := range []uint32{a.ioUring[0], a.ioUring[1], a.ioUring[2], a.keyctl, a.addKey, a.requestKey, a.bpf, a.perfEventOpen} {
		p.jeq(nr, "eperm", "")
	}
	p.jeq(a.unshare, "newuser", "")
	p.jeq(a.clone, "newuser", "")
	p.jeq(a.clone3, "enosys", "")
	p.jeq(a.openat2, "enosys", "")
	p.ret(retAllow)

	// open(path, flags, mode) and openat(dirfd, path, flags, mode): the
	// mode counts only when the call creates a file.
	p.label("open")
	p.ld(offArg(1))
	p.jset(oCreat|oTmpfile, "mode2", "allow")
	p.label("openat")
	p.ld(offArg(2))
	p.jset(oCreat|oTmpfile, "mode3", "allow")
	for i, l := range []string{"mode1", "mode2", "mode3"} {
		p.label(l)
		p.ld(offArg(i + 1))
		p.jset(setIDBits, "eperm", "allow")
	}

	p.label("socket")
	p.ld(offArg(0))
	p.jeq(syscall.AF_INET, "allow", "")
	p.jeq(syscall.AF_INET6, "allow", "")
	p.jeq(afNetlink, "", "eafnosupport")
	p.ld(offArg(2))
	p.jeq(netlinkRoute, "allow", "eafnosupport")

	p.label("socketpair")
	p.ld(offArg(0))
	p.jeq(afUnix, "", "eafnosupport")
	p.ld(offArg(1))
	p.and(sockTypeMask)
	p.jeq(sockStream, "allow", "")
	p.jeq(sockSeqpacket, "allow", "esocktnosupport")

	p.label("newuser")
	p.ld(offArg(0))
	p.jset(cloneNewUser, "eperm", "allow")

	p.label("allow")
	p.ret(retAllow)
	p.label("eperm")
	p.ret(retErrno | uint32(syscall.EPERM))
	p.label("eafnosupport")
	p.ret(retErrno | uint32(syscall.EAFNOSUPPORT))
	p.label("esocktnosupport")
	p.ret(retErrno | uint32(syscall.ESOCKTNOSUPPORT))
	p.label("enosys")
	p.ret(retErrno | uint32(syscall.ENOSYS))
	return p
}

// bpf is a tiny assembler for classic BPF with named jump targets ("" is
// the next instruction), so that the filter reads as its rules.
type bpf struct {
	insns  []insn
	jumps  []jump
	labels map[string]int
}

type insn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

type jump struct {
	at     int
	jt, jf string
}

func (p *bpf) ld(off uint32)                { p.insns = append(p.insns, insn{code: bpfLdWAbs, k: off}) }
func (p *bpf) ret(v uint32)                 { p.insns = append(p.insns, insn{code: bpfRetK, k: v}) }
func (p *bpf) and(k uint32)                 { p.insns = append(p.insns, insn{code: bpfAndK, k: k}) }
func (p *bpf) jeq(k uint32, jt, jf string)  { p.cond(bpfJeqK, k, jt, jf) }
func (p *bpf) jset(k uint32, jt, jf string) { p.cond(bpfJsetK, k, jt, jf) }

func (p *bpf) cond(code uint16, k uint32, jt, jf string) {
	p.jumps = append(p.jumps, jump{at: len(p.insns), jt: jt, jf: jf})
	p.insns = append(p.insns, insn{code: code, k: k})
}

func (p *bpf) label(name string) {
	if p.labels == nil {
		p.labels = map[string]int{}
	}
	p.labels[name] = len(p.insns)
}

// assemble resolves the jumps (forward only, at most 255 instructions, as
// classic BPF requires) and encodes the program.
func (p *bpf) assemble() ([]byte, error) {
	for _, j := range p.jumps {
		for _, t := range []struct {
			name string
			off  *uint8
		}{{j.jt, &p.insns[j.at].jt}, {j.jf, &p.insns[j.at].jf}} {
			if t.name == "" {
				continue
			}
			target, ok := p.labels[t.name]
			d := target - j.at - 1
			if !ok || d < 0 || d > 255 {
				return nil, fmt.Errorf("seccomp filter: bad jump to %q from %d", t.name, j.at)
			}
			*t.off = uint8(d)
		}
	}
	out := make([]byte, 0, 8*len(p.insns))
	for _, i := range p.insns {
		out = binary.LittleEndian.AppendUint16(out, i.code)
		out = append(out, i.jt, i.jf)
		out = binary.LittleEndian.AppendUint32(out, i.k)
	}
	return out, nil
}
