#include "textflag.h"

// func rawVforkIntoUserNS(pidfd *int32) (pid uintptr, errno uintptr)
//
// clone(CLONE_NEWUSER|CLONE_VM|CLONE_VFORK|CLONE_PIDFD|SIGCHLD, stack 0,
// parent_tid pidfd): the child runs on this very stack, in this very
// memory, while this thread waits (CLONE_VFORK), so it must write nothing:
// it only compares a register and makes the exit_group system call, with
// childExitStatus. No Go code runs in it (a return or a call would write
// over the frames the parent returns through). The kernel writes the
// child's pidfd to *pidfd before the child runs.
TEXT ·rawVforkIntoUserNS(SB),NOSPLIT,$0-24
	MOVQ	pidfd+0(FP), DX // parent_tid: where CLONE_PIDFD puts the pidfd
	MOVQ	$0x10005111, DI // CLONE_NEWUSER|CLONE_VFORK|CLONE_PIDFD|CLONE_VM|SIGCHLD
	MOVQ	$0, SI          // the child's stack: this one
	MOVQ	$0, R10         // child_tid
	MOVQ	$0, R8          // tls
	MOVQ	$56, AX         // SYS_clone
	SYSCALL
	CMPQ	AX, $0
	JNE	parent
child:
	MOVQ	$87, DI         // childExitStatus
	MOVQ	$231, AX        // SYS_exit_group
	SYSCALL
	JMP	child
parent:
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	NEGQ	AX
	MOVQ	$0, pid+8(FP)
	MOVQ	AX, errno+16(FP)
	RET
ok:
	MOVQ	AX, pid+8(FP)
	MOVQ	$0, errno+16(FP)
	RET
