// Command agentrun-node-profiles keeps agentrun's sandbox profiles on a
// node: the seccomp profile under the kubelet's seccomp root and, where
// asked and the node has AppArmor, the AppArmor profile loaded into the
// kernel. The chart runs it as a DaemonSet (docs/kubernetes/pod-security.md);
// it checks again every --interval, so a profile removed by hand or lost
// in a kernel policy reload comes back.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agentrun-dev/agentrun/sandbox/nodeprofiles"
)

func main() {
	var in nodeprofiles.Installer
	var interval time.Duration
	var once bool
	flag.StringVar(&in.SeccompRoot, "seccomp-root", "/host/seccomp", "the kubelet's seccomp root as mounted (<kubelet root dir>/seccomp)")
	flag.StringVar(&in.HostRoot, "apparmor-host-root", "", "the node's / as mounted, to load the AppArmor profile with the node's apparmor_parser (needs a privileged container); empty: no AppArmor")
	flag.DurationVar(&interval, "interval", time.Minute, "how often to check the profiles again")
	flag.BoolVar(&once, "once", false, "install once and exit")
	flag.Parse()
	logger := log.New(os.Stderr, "agentrun-node-profiles: ", log.LstdFlags|log.LUTC)
	in.Log = logger.Printf

	// The first install must work: a DaemonSet Pod that cannot write the
	// profile crash-loops where the admin sees it.
	if err := in.Ensure(); err != nil {
		fmt.Fprintln(os.Stderr, "agentrun-node-profiles:", err)
		os.Exit(1)
	}
	if once {
		return
	}
	logger.Printf("profiles in place; checking every %s", interval)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if err := in.Ensure(); err != nil {
				logger.Print(err)
			}
		}
	}
}
