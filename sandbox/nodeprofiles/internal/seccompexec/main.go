// Command seccompexec runs a command under an OCI seccomp profile the way
// a container runtime applies a Localhost profile: no_new_privs, the
// filter, then exec. Tests use it to show that bubblewrap builds its
// sandbox under the agent container's profile (and not without each of
// the calls the profile adds).
//
//	seccompexec PROFILE.json -- COMMAND [ARGS...]
//
// Syscall names are resolved for the machine's architecture from the
// kernel headers (linux-libc-dev), plus the few calls newer than Debian's
// headers; names the architecture lacks are skipped, as runc does.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

type profile struct {
	DefaultAction   string `json:"defaultAction"`
	DefaultErrnoRet *int   `json:"defaultErrnoRet"`
	Syscalls        []struct {
		Names    []string `json:"names"`
		Action   string   `json:"action"`
		ErrnoRet *int     `json:"errnoRet"`
		Args     []struct {
			Index uint   `json:"index"`
			Value uint64 `json:"value"`
			Op    string `json:"op"`
		} `json:"args"`
	} `json:"syscalls"`
}

// newer are x86_64 syscalls past the headers of Debian 12's kernel 6.1.
var newer = map[string]int{"cachestat": 451, "fchmodat2": 452, "map_shadow_stack": 453, "futex_wake": 454,
	"futex_wait": 455, "futex_requeue": 456}

func main() {
	if len(os.Args) < 4 || os.Args[2] != "--" {
		fmt.Fprintln(os.Stderr, "usage: seccompexec PROFILE.json -- COMMAND [ARGS...]")
		os.Exit(2)
	}
	if runtime.GOARCH != "amd64" {
		fmt.Fprintln(os.Stderr, "seccompexec: amd64 only")
		os.Exit(2)
	}
	var p profile
	data, err := os.ReadFile(os.Args[1])
	if err == nil {
		err = json.Unmarshal(data, &p)
	}
	if err != nil {
		fail(err)
	}
	numbers, err := syscallNumbers("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
	if err != nil {
		fail(err)
	}
	prog := compile(p, numbers)
	path, err := exec.LookPath(os.Args[3])
	if err != nil {
		fail(err)
	}
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fail(err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog) / 8), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
	if _, _, e := syscall.RawSyscall(unix.SYS_SECCOMP, 1 /* SECCOMP_SET_MODE_FILTER */, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		fail(e)
	}
	fail(syscall.Exec(path, os.Args[3:], os.Environ()))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "seccompexec:", err)
	os.Exit(126)
}

func syscallNumbers(header string) (map[string]int, error) {
	f, err := os.Open(header)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int{}
	for k, v := range newer {
		out[k] = v
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "#define" && strings.HasPrefix(fields[1], "__NR_") {
			if n, err := strconv.Atoi(fields[2]); err == nil {
				out[strings.TrimPrefix(fields[1], "__NR_")] = n
			}
		}
	}
	return out, sc.Err()
}

const (
	ldAbs, jeqK, jsetK, ret = 0x20, 0x15, 0x45, 0x06
	allow, errno            = 0x7fff0000, 0x00050000
	archX8664, x32          = 0xc000003e, 0x40000000
)

// compile is the profile as classic BPF: a wrong architecture or an x32
// call is refused, each rule's calls (whose arguments match: SCMP_CMP_EQ,
// as both words of the 64-bit value) return its action, the rest the
// default. Each call of a rule is a block that loads the call number
// again (an argument test replaces it), so every jump stays inside its
// block.
func compile(p profile, numbers map[string]int) []byte {
	def := uint32(errno | 1)
	if p.DefaultErrnoRet != nil {
		def = uint32(errno | *p.DefaultErrnoRet)
	}
	var insns [][4]uint32 // code, jt, jf, k
	add := func(code, jt, jf, k uint32) { insns = append(insns, [4]uint32{code, jt, jf, k}) }
	add(ldAbs, 0, 0, 4)
	add(jeqK, 1, 0, archX8664)
	add(ret, 0, 0, def)
	add(ldAbs, 0, 0, 0)
	add(jsetK, 0, 1, x32)
	add(ret, 0, 0, def)
	for _, rule := range p.Syscalls {
		action := uint32(allow)
		if rule.Action == "SCMP_ACT_ERRNO" {
			action = errno | 1
			if rule.ErrnoRet != nil {
				action = uint32(errno | *rule.ErrnoRet)
			}
		}
		for _, a := range rule.Args {
			if a.Op != "SCMP_CMP_EQ" || a.Index > 5 {
				fail(fmt.Errorf("argument test %+v: only SCMP_CMP_EQ is supported here", a))
			}
		}
		for _, name := range rule.Names {
			nr, ok := numbers[name]
			if !ok {
				continue
			}
			// The block: load nr; test nr; per argument load and test the
			// low and the high word; return. A failed test skips the rest.
			rest := uint32(1 + 4*len(rule.Args)) // what follows the number's test
			add(ldAbs, 0, 0, 0)
			add(jeqK, 0, rest, uint32(nr))
			for i, a := range rule.Args {
				off := uint32(16 + 8*a.Index)
				left := rest - 1 - uint32(4*i) // instructions after this argument's first load
				add(ldAbs, 0, 0, off)
				add(jeqK, 0, left-1, uint32(a.Value)) // a miss skips to the next block
				add(ldAbs, 0, 0, off+4)
				add(jeqK, 0, left-3, uint32(a.Value>>32))
			}
			add(ret, 0, 0, action)
		}
	}
	add(ret, 0, 0, def)
	out := make([]byte, 0, 8*len(insns))
	for _, i := range insns {
		out = binary.LittleEndian.AppendUint16(out, uint16(i[0]))
		out = append(out, byte(i[1]), byte(i[2]))
		out = binary.LittleEndian.AppendUint32(out, i[3])
	}
	return out
}
