#include "textflag.h"

// func rawVforkIntoUserNS() (pid uintptr, errno uintptr)
//
// clone(CLONE_NEWUSER|CLONE_VM|CLONE_VFORK|SIGCHLD, stack 0): the child
// runs on this very stack, in this very memory, while this thread waits
// (CLONE_VFORK), so it must write nothing: it only compares a register and
// makes the exit_group system call. No Go code runs in it (a return or a
// call would write over the frames the parent returns through).
TEXT ·rawVforkIntoUserNS(SB),NOSPLIT,$0-16
	MOVQ	$0x10004111, DI // CLONE_NEWUSER|CLONE_VFORK|CLONE_VM|SIGCHLD
	MOVQ	$0, SI          // the child's stack: this one
	MOVQ	$0, DX
	MOVQ	$0, R10
	MOVQ	$0, R8
	MOVQ	$56, AX         // SYS_clone
	SYSCALL
	CMPQ	AX, $0
	JNE	parent
child:
	MOVQ	$0, DI
	MOVQ	$231, AX        // SYS_exit_group
	SYSCALL
	JMP	child
parent:
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	NEGQ	AX
	MOVQ	$0, pid+0(FP)
	MOVQ	AX, errno+8(FP)
	RET
ok:
	MOVQ	AX, pid+0(FP)
	MOVQ	$0, errno+8(FP)
	RET
