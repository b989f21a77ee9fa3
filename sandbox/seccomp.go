package sandbox

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"syscall"
)

// The seccomp filter bubblewrap installs for the agent. It refuses, with
// EPERM:
//   - socket(AF_UNIX, ...): filesystem Unix sockets cross --unshare-net, so
//     a host socket visible in the sandbox (a container runtime's, a
//     database's) would be a way out. socketpair stays allowed: runtimes
//     use it for their children's pipes, and a connected pair reaches only
//     itself.
//   - io_uring_setup: io_uring can create sockets without the socket
//     syscall, past this filter.
//   - every syscall of a foreign ABI (x32, i386 on x86_64): socketcall
//     hides its arguments from the filter.
//
// The program is classic BPF over struct seccomp_data: nr at offset 0,
// arch at 4, args[0] at 16 (its low 32 bits on little-endian machines).

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
)

type abi struct {
	arch                 uint32
	socket, ioUringSetup uint32
	checkX32             bool
}

var abis = map[string]abi{
	"amd64": {arch: archX86_64, socket: 41, ioUringSetup: 425, checkX32: true},
	"arm64": {arch: archAArch64, socket: 198, ioUringSetup: 425},
}

type insn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// Filter returns the compiled program for this machine, in the byte layout
// of struct sock_filter[] that bwrap --seccomp reads.
func Filter() ([]byte, error) {
	a, ok := abis[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("no seccomp filter for %s; run with --sandbox none or on amd64/arm64", runtime.GOARCH)
	}
	deny := retErrno | uint32(syscall.EPERM)
	// Jump offsets count instructions after the jump. Layout:
	//  0 ld arch
	//  1 jeq arch ? 2 : DENY
	//  2 ld nr
	//  3 jset x32 ? DENY : 4        (a no-op test on arm64)
	//  4 jeq socket ? 7 : 5
	//  5 jeq io_uring_setup ? DENY : 6
	//  6 ret allow
	//  7 ld args[0]
	//  8 jeq AF_UNIX ? DENY : 9
	//  9 ret allow
	// 10 DENY: ret errno
	x32 := uint32(0)
	if a.checkX32 {
		x32 = x32Bit
	}
	prog := []insn{
		{bpfLdWAbs, 0, 0, 4},
		{bpfJeqK, 0, 8, a.arch},
		{bpfLdWAbs, 0, 0, 0},
		{bpfJsetK, 6, 0, x32},
		{bpfJeqK, 2, 0, a.socket},
		{bpfJeqK, 4, 0, a.ioUringSetup},
		{bpfRetK, 0, 0, retAllow},
		{bpfLdWAbs, 0, 0, 16},
		{bpfJeqK, 1, 0, syscall.AF_UNIX},
		{bpfRetK, 0, 0, retAllow},
		{bpfRetK, 0, 0, deny},
	}
	out := make([]byte, 0, 8*len(prog))
	for _, i := range prog {
		out = binary.LittleEndian.AppendUint16(out, i.code)
		out = append(out, i.jt, i.jf)
		out = binary.LittleEndian.AppendUint32(out, i.k)
	}
	return out, nil
}
