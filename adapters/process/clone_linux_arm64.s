#include "textflag.h"

// func cloneVM(flags, stack uintptr, s *forkSpec, keepg uintptr) (pid uintptr, errno uintptr)
//
// clone(flags, stack): the child starts on stack, a region of its own,
// and calls subSupervise(s) there, which never returns (if it did, the
// child would exit 126). s is kept in R20 across the system call, which
// the kernel preserves and the child inherits. The parent returns the
// child's pid, or -1 and the errno.
//
// The child calls subSupervise through its func value (·subEntry), in
// the register ABI (argument in R0), rather than by name: a call by name
// from assembly goes through a generated wrapper that, under -race, calls
// into the race runtime. Sharing the supervisor's memory (keepg zero), it
// leaves g (R28) zero: nothing there may use it, and anything that did
// would fault rather than touch the supervisor's goroutines. A forked
// child (keepg set: its memory is a copy) keeps the cloning goroutine's,
// as a forked Go child has, for what race-detector builds call.
TEXT ·cloneVM(SB),NOSPLIT|NOFRAME,$0-48
	MOVD	flags+0(FP), R0
	MOVD	stack+8(FP), R1
	MOVD	s+16(FP), R20
	MOVD	keepg+24(FP), R21
	MOVD	$0, R2
	MOVD	$0, R3
	MOVD	$0, R4
	MOVD	$220, R8	// SYS_clone
	SVC
	CBZ	R0, child
	CMN	$4095, R0
	BCC	ok
	MOVD	$-1, R4
	MOVD	R4, pid+32(FP)
	NEG	R0, R0
	MOVD	R0, errno+40(FP)
	RET
ok:
	MOVD	R0, pid+32(FP)
	MOVD	ZR, errno+40(FP)
	RET
child:
	// The callee may spill its register argument into its caller's
	// frame: leave room for that.
	SUB	$64, RSP
	MOVD	R20, R0
	CBNZ	R21, call
	MOVD	ZR, g
call:
	MOVD	·subEntry(SB), R26
	MOVD	(R26), R27
	CALL	(R27)
exit:
	MOVD	$126, R0
	MOVD	$94, R8	// SYS_exit_group
	SVC
	B	exit
