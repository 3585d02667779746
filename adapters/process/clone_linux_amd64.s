#include "textflag.h"

// func cloneVM(flags, stack uintptr, s *forkSpec, keepg uintptr) (pid uintptr, errno uintptr)
//
// clone(flags, stack): the child starts on stack, a region of its own,
// and calls subSupervise(s) there, which never returns (if it did, the
// child would exit 126). s and keepg are kept in R12 and R13 across the
// system call, which the kernel preserves and the child inherits. The
// parent returns the child's pid, or -1 and the errno.
//
// The child calls subSupervise through its func value (·subEntry), in
// the register ABI, rather than by name: a call by name from assembly goes
// through a generated wrapper that, under -race, calls into the race
// runtime. The child sets up what that ABI expects (argument in AX, X15
// zero, room above the return address for the argument's spill slot).
// Sharing the supervisor's memory (keepg zero), it leaves R14, the
// goroutine register, zero: nothing there may use it, and anything that
// did would fault rather than touch the supervisor's goroutines. A forked
// child (keepg set: its memory is a copy) gets the cloning goroutine's, as
// a forked Go child has, for what race-detector builds call.
TEXT ·cloneVM(SB),NOSPLIT|NOFRAME,$0-48
	MOVQ	flags+0(FP), DI
	MOVQ	stack+8(FP), SI
	MOVQ	s+16(FP), R12
	MOVQ	keepg+24(FP), R13
	MOVQ	$0, DX
	MOVQ	$0, R10
	MOVQ	$0, R8
	MOVQ	$56, AX	// SYS_clone
	SYSCALL
	CMPQ	AX, $0
	JEQ	child
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	MOVQ	$-1, pid+32(FP)
	NEGQ	AX
	MOVQ	AX, errno+40(FP)
	RET
ok:
	MOVQ	AX, pid+32(FP)
	MOVQ	$0, errno+40(FP)
	RET
child:
	// The callee may spill its register argument into its caller's
	// frame, above its return address: leave room for that.
	SUBQ	$64, SP
	MOVQ	R12, AX
	XORPS	X15, X15
	XORQ	R14, R14
	CMPQ	R13, $0
	JEQ	call
	MOVQ	(TLS), R14
call:
	MOVQ	·subEntry(SB), DX
	MOVQ	0(DX), BX
	CALL	BX
exit:
	MOVQ	$126, DI
	MOVQ	$231, AX	// SYS_exit_group
	SYSCALL
	JMP	exit
