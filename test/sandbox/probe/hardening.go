package main

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// hardeningVerb runs the verbs of the second attack round; false when verb
// is not one of them.
//
//	probe writable PATH     can this process write PATH (access W_OK, no write)
//	probe keyring HEX       read every key of the session keyring, look for the secret
//	probe socket FAM [PROTO]  open socket(FAM, ..., PROTO)
//	probe forks N           start up to N sleeping children, report how many started
func hardeningVerb(verb, arg string, rest []string) bool {
	switch verb {
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
