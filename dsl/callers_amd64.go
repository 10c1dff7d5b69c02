package dsl

import "unsafe"

// framePointer returns the frame pointer of the calling function (assembly).
func framePointer() uintptr

// loadWord returns the word at addr (assembly).
func loadWord(addr uintptr) uintptr

// loadEntry returns *p, a walkTable slot (assembly: an aligned load is atomic on amd64).
func loadEntry(p *unsafe.Pointer) *walkEntry

// walkFrames fills pcs with return PCs by following frame pointers, innermost first: the
// return PC into its caller's caller first, skip of them left out. It follows the frame
// pointer saved by each function it passes, so its callers must know those functions are
// Go code that keeps one (see walkInfo). The loop calls nothing that can move the stack, so
// the addresses it follows stay valid. It stops at the outermost frame (a zero frame
// pointer) or when pcs is full.
//
//go:noinline
func walkFrames(pcs []uintptr, skip int) int {
	fp := loadWord(framePointer()) // the caller's frame record
	n := 0
	for n < len(pcs) && fp != 0 {
		pc := loadWord(fp + 8)
		if skip > 0 {
			skip--
		} else {
			pcs[n] = pc
			n++
		}
		if n == len(pcs) {
			break
		}
		fp = loadWord(fp)
	}
	return n
}

// walkKnown is walkedPos's walk: it follows frame pointers like walkFrames, skip return PCs
// left out, and passes a PC only when walkTable holds it as one the walk may go on from. It
// answers at the first PC walkTable holds as found or as a stop, or at the first it does not
// hold (walkMiss, with that PC). It calls no Go function that can move the stack while it
// holds a frame address, in any build mode: it is nosplit (no stack check of its own), calls
// only nosplit functions (loadWord, framePointer and loadEntry are frameless assembly,
// walkSlot is nosplit), and norace (no race-detector calls; what it reads was published by
// atomic stores). A Go call there did move it: under -race, atomic.Pointer.Load was a call
// whose stack check grew the stack, and the walk then read the freed old one.
//
//go:noinline
//go:nosplit
//go:norace
func walkKnown(skip int) (walkInfo, int, uintptr) {
	fp := loadWord(framePointer()) // the caller's frame record
	for d := 0; d < maxWalk+skip && fp != 0; d++ {
		pc := loadWord(fp + 8)
		if d >= skip {
			e := loadEntry(&walkTable[walkSlot(pc)])
			switch {
			case e == nil || e.pc != pc:
				return walkInfo{}, walkMiss, pc
			case e.info.found:
				return e.info, walkFound, pc
			case !e.info.next:
				return walkInfo{}, walkStop, pc
			}
		}
		fp = loadWord(fp)
	}
	return walkInfo{}, walkStop, 0
}
