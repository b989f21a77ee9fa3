// Command pause is the sandbox ("pause") container of the test cluster's
// Pods: it sleeps, reaps the children it inherits as PID 1, and exits on
// SIGINT or SIGTERM. With -once it exits 0 at once, which makes it a
// container that Succeeds (hack/cluster.sh's smoke test).
package main

import (
	"flag"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	once := flag.Bool("once", false, "exit 0 at once")
	flag.Parse()
	if *once {
		return
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
