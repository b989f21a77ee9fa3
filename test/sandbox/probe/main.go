// Command probe tries one thing from inside the sandbox and says what
// happened, for the sandbox attack tests. Each verb prints "ok ..." or
// "denied: ERROR" and exits 0, so the test reads the outcome, not a crash.
//
//	probe read PATH         read a file or list a directory
//	probe write PATH        create a file
//	probe tcp HOST:PORT     connect directly, without the proxy
//	probe unix PATH         connect to a Unix socket
//	probe scan HEX          look for the hex-encoded secret in every readable /proc/*/environ
//	                        and cmdline (encoded so that the probe's own cmdline does not hold it)
//	probe proc PID          open /proc/PID/environ and /proc/PID/mem
//	probe fds               list open descriptors above 2 (not the Go runtime's own)
//	probe connect TARGET    send "CONNECT TARGET" to the proxy, print its status line
//
// and the verbs of hardening.go.
package main

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Println("usage: probe VERB ARG")
		os.Exit(2)
	}
	arg := ""
	if len(os.Args) > 2 {
		arg = os.Args[2]
	}
	switch os.Args[1] {
	case "read":
		report(read(arg))
	case "write":
		report("", os.WriteFile(arg, []byte("x"), 0o644))
	case "tcp":
		c, err := net.DialTimeout("tcp", arg, 3*time.Second)
		if err == nil {
			c.Close()
		}
		report("", err)
	case "unix":
		c, err := net.DialTimeout("unix", arg, 3*time.Second)
		if err == nil {
			c.Close()
		}
		report("", err)
	case "scan":
		secret, err := hex.DecodeString(arg)
		if err != nil {
			fmt.Println("bad hex:", err)
			os.Exit(2)
		}
		fmt.Println(scan(string(secret)))
	case "proc":
		var opened []string
		for _, f := range []string{"environ", "mem"} {
			if fh, err := os.Open(filepath.Join("/proc", arg, f)); err == nil {
				buf := make([]byte, 1)
				if _, err := fh.Read(buf); err == nil || f == "mem" {
					opened = append(opened, f)
				}
				fh.Close()
			}
		}
		if len(opened) > 0 {
			fmt.Println("ok opened", strings.Join(opened, ","))
		} else {
			fmt.Println("denied: /proc/" + arg + " environ and mem closed")
		}
	case "fds":
		entries, _ := os.ReadDir("/proc/self/fd")
		var open []string
		for _, e := range entries {
			if e.Name() != "0" && e.Name() != "1" && e.Name() != "2" {
				target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
				if err != nil {
					continue // the ReadDir's own descriptor, closed by now
				}
				// Skip the ReadDir's own descriptor and what the Go runtime
				// opens itself (its poller, the cgroup CPU limit files).
				if !strings.HasPrefix(target, "/proc/") && !strings.HasPrefix(target, "anon_inode:") &&
					!strings.HasPrefix(target, "/sys/fs/cgroup/") {
					open = append(open, e.Name()+"->"+target)
				}
			}
		}
		fmt.Println("ok fds:", strings.Join(open, " "))
	case "connect":
		fmt.Println(proxyConnect(arg))
	default:
		if !hardeningVerb(os.Args[1], arg, os.Args[min(3, len(os.Args)):]) {
			fmt.Println("unknown verb", os.Args[1])
			os.Exit(2)
		}
	}
}

func read(p string) (string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		entries, err := os.ReadDir(p)
		if err != nil {
			return "", err
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return strings.Join(names, ","), nil
	}
	b, err := os.ReadFile(p)
	return string(b), err
}

func report(what string, err error) {
	if err != nil {
		fmt.Println("denied:", err)
		return
	}
	fmt.Println("ok", what)
}

// scan reports every place under /proc where secret can be read.
func scan(secret string) string {
	var hits []string
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range pids {
		for _, f := range []string{"environ", "cmdline"} {
			if b, err := os.ReadFile(filepath.Join(p, f)); err == nil && bytes.Contains(b, []byte(secret)) {
				hits = append(hits, p+"/"+f)
			}
		}
	}
	if len(hits) == 0 {
		return fmt.Sprintf("ok %d processes visible, secret nowhere", len(pids))
	}
	return "found: " + strings.Join(hits, " ")
}

// proxyConnect speaks CONNECT to the sandbox's proxy with the target
// exactly as given (no client normalises "2130706433" here).
func proxyConnect(target string) string {
	c, err := net.DialTimeout("tcp", "127.0.0.1:3128", 3*time.Second)
	if err != nil {
		return "denied: " + err.Error()
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 256)
	n, _ := c.Read(buf)
	line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
	return line
}
