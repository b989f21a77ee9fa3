package sandbox

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"syscall"
)

// The seccomp filter bubblewrap installs for the agent (and everything it
// starts). It is an allow-list for sockets and a deny-list for the few
// other calls that reach past the sandbox's namespaces:
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
//     socketpair() stays allowed: runtimes use it for their children's
//     pipes, and a connected pair reaches only itself.
//   - io_uring_setup/enter/register: io_uring can create sockets without
//     the socket syscall, past this filter.
//   - keyctl, add_key and request_key: the caller's session keyring is
//     inherited into the sandbox, and a key in it (a Kerberos ticket, a
//     login token) would be readable inside.
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
// all the kernel reads of an int argument).

const (
	bpfLdWAbs   = 0x20 // BPF_LD | BPF_W | BPF_ABS
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
	offArg2        = 16 + 2*8

	afNetlink    = 16
	netlinkRoute = 0
	cloneNewUser = 0x10000000
)

// abi holds the syscall numbers the filter names, per architecture.
type abi struct {
	arch                       uint32
	checkX32                   bool
	socket                     uint32
	ioUring                    [3]uint32 // setup, enter, register
	keyctl, addKey, requestKey uint32
	unshare, clone, clone3     uint32
}

var abis = map[string]abi{
	"amd64": {arch: archX86_64, checkX32: true, socket: 41, ioUring: [3]uint32{425, 426, 427},
		keyctl: 250, addKey: 248, requestKey: 249, unshare: 272, clone: 56, clone3: 435},
	"arm64": {arch: archAArch64, socket: 198, ioUring: [3]uint32{425, 426, 427},
		keyctl: 219, addKey: 217, requestKey: 218, unshare: 97, clone: 220, clone3: 435},
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
	p.jeq(a.socket, "socket", "")
	for _, nr := range []uint32{a.ioUring[0], a.ioUring[1], a.ioUring[2], a.keyctl, a.addKey, a.requestKey} {
		p.jeq(nr, "eperm", "")
	}
	p.jeq(a.unshare, "newuser", "")
	p.jeq(a.clone, "newuser", "")
	p.jeq(a.clone3, "enosys", "")
	p.ret(retAllow)

	p.label("socket")
	p.ld(offArg0)
	p.jeq(syscall.AF_INET, "allow", "")
	p.jeq(syscall.AF_INET6, "allow", "")
	p.jeq(afNetlink, "", "eafnosupport")
	p.ld(offArg2)
	p.jeq(netlinkRoute, "allow", "eafnosupport")

	p.label("newuser")
	p.ld(offArg0)
	p.jset(cloneNewUser, "eperm", "allow")

	p.label("allow")
	p.ret(retAllow)
	p.label("eperm")
	p.ret(retErrno | uint32(syscall.EPERM))
	p.label("eafnosupport")
	p.ret(retErrno | uint32(syscall.EAFNOSUPPORT))
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
