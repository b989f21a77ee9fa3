// Command fakeparser stands in for a node's apparmor_parser in
// TestInstallAppArmor: run with -r inside the node's root (chroot), it
// keeps the profile text it read at /parsed and registers the profile in
// /sys/kernel/security/apparmor/profiles as the kernel would list it.
package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] != "-r" {
		fail("want exactly -r, got %q", os.Args[1:])
	}
	text, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("%v", err)
	}
	m := regexp.MustCompile(`(?m)^profile (\S+) `).FindSubmatch(text)
	if m == nil {
		fail("no profile in the input")
	}
	if err := os.WriteFile("/parsed", text, 0o644); err != nil {
		fail("%v", err)
	}
	f, err := os.OpenFile("/sys/kernel/security/apparmor/profiles", os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		fail("%v", err)
	}
	defer f.Close()
	fmt.Fprintf(f, "%s (enforce)\n", m[1])
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "apparmor_parser: "+format+"\n", args...)
	os.Exit(1)
}
