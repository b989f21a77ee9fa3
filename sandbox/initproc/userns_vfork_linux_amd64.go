package initproc

// canVfork: this architecture has rawVforkIntoUserNS.
const canVfork = true

// rawVforkIntoUserNS makes a child in a new user namespace that shares
// this process's memory and exits at once with childExitStatus, and
// returns its pid, unreaped, and its pidfd in *pidfd (untouched by a
// kernel without CLONE_PIDFD) (userns_vfork_linux_amd64.s). The caller
// blocks every signal on its thread first: the child inherits the mask,
// and a handler must not run in it.
//
//go:noescape
func rawVforkIntoUserNS(pidfd *int32) (pid, errno uintptr)
