//go:build !(linux && amd64)

package initproc

import "syscall"

// canVfork: rawVforkIntoUserNS is written for linux/amd64 only; elsewhere
// the namespaces are made by fork, in the helper.
const canVfork = false

func rawVforkIntoUserNS() (pid, errno uintptr) { return 0, uintptr(syscall.ENOSYS) }
