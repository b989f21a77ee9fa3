// Command forward relays TCP connections from one address to another:
// hack/cluster-demo.sh uses it to show the loopback-only mock model
// (cmd/mockmodel) to the cluster's Pods on the node bridge address.
//
//	forward LISTEN_ADDR TARGET_ADDR
package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: forward LISTEN_ADDR TARGET_ADDR")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "forward:", err)
			os.Exit(1)
		}
		go relay(c, os.Args[2])
	}
}

func relay(c net.Conn, target string) {
	defer c.Close()
	t, err := net.Dial("tcp", target)
	if err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		return
	}
	defer t.Close()
	// A relay: either side's error or close ends its direction, and the
	// half-close passes that end on; there is nothing else to do with it.
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(t, c); _ = t.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, t); _ = c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	<-done
	<-done
}
