#include "textflag.h"

// func rawVfork(flags uintptr) (pid uintptr, errno uintptr)
//
// clone(flags) for a child that shares this process's memory and stack
// until it execs or exits (CLONE_VM|CLONE_VFORK). The return address is
// kept in R12 across the system call, not on the stack, because the child
// runs first and its calls overwrite that stack slot; both child and
// parent push it back before returning.
TEXT ·rawVfork(SB),NOSPLIT|NOFRAME,$0-24
	MOVQ	flags+0(FP), DI
	MOVQ	$0, SI
	MOVQ	$0, DX
	MOVQ	$0, R10
	MOVQ	$0, R8
	MOVQ	$56, AX	// SYS_clone
	POPQ	R12
	SYSCALL
	PUSHQ	R12
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	MOVQ	$-1, pid+8(FP)
	NEGQ	AX
	MOVQ	AX, errno+16(FP)
	RET
ok:
	MOVQ	AX, pid+8(FP)
	MOVQ	$0, errno+16(FP)
	RET
