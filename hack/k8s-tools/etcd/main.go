// Command etcd is etcd's own server main, built from the module proxy at the
// version k8s.io/kubernetes pins (3.6.4), for envtest.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
