//go:build !(linux && amd64)

package initproc

import "syscall"

// canVfork: rawVforkIntoUserNS is written for linux/amd64 only; elsewhere
// the runner starts the helper.
const canVfork = false

func rawVforkIntoUserNS(*int32) (pid, errno uintptr) { return 0, uintptr(syscall.ENOSYS) }
