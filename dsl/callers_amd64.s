#include "textflag.h"

// func framePointer() uintptr
// The caller's frame pointer (BP: this function sets up no frame of its own).
TEXT ·framePointer(SB),NOSPLIT|NOFRAME,$0-8
	MOVQ BP, ret+0(FP)
	RET

// func loadWord(addr uintptr) uintptr
// The word at addr: one step of a frame-pointer walk, outside Go's pointer rules.
TEXT ·loadWord(SB),NOSPLIT|NOFRAME,$0-16
	MOVQ addr+0(FP), AX
	MOVQ (AX), AX
	MOVQ AX, ret+8(FP)
	RET

// func loadEntry(p *unsafe.Pointer) *walkEntry
// The walkTable entry at p, read without a Go call (see walkKnown).
TEXT ·loadEntry(SB),NOSPLIT|NOFRAME,$0-16
	MOVQ p+0(FP), AX
	MOVQ (AX), AX
	MOVQ AX, ret+8(FP)
	RET
