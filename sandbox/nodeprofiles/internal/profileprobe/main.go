// Command profileprobe tries what a Pod that names the agent container's
// seccomp profile could try after creating a user namespace (which the
// profile allows, for bubblewrap; the test starts it with `unshare -Urn`,
// so it holds every capability there), and prints each result as
// "what: ok" or "what: ERRNO": TestProfileRefusesEscapeRoutes reads it.
package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

func main() {
	report := func(what string, err error) {
		if err == nil {
			fmt.Printf("%s: ok\n", what)
			return
		}
		fmt.Printf("%s: %s\n", what, unix.ErrnoName(err.(unix.Errno)))
	}
	for _, s := range []struct {
		what                  string
		family, typ, protocol int
	}{
		{"unix", unix.AF_UNIX, unix.SOCK_STREAM, 0},
		{"inet", unix.AF_INET, unix.SOCK_STREAM, 0},
		{"inet6", unix.AF_INET6, unix.SOCK_DGRAM, 0},
		{"netlink route", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE},
		{"netlink netfilter", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_NETFILTER},
		{"netlink xfrm", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_XFRM},
		{"packet", unix.AF_PACKET, unix.SOCK_RAW, 0},
		{"vsock", unix.AF_VSOCK, unix.SOCK_STREAM, 0},
		{"alg", unix.AF_ALG, unix.SOCK_SEQPACKET, 0},
	} {
		fd, err := unix.Socket(s.family, s.typ, s.protocol)
		if err == nil {
			unix.Close(fd)
		}
		report("socket "+s.what, err)
	}
}
