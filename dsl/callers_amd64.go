package dsl

// framePointer returns the frame pointer of the calling function (assembly).
func framePointer() uintptr

// loadWord returns the word at addr (assembly).
func loadWord(addr uintptr) uintptr

// walkFrames fills pcs with the return PCs of the frames above its caller, innermost first,
// by following frame pointers: about ten times cheaper than runtime.Callers. The loop calls
// nothing that can move the stack, so the addresses it follows stay valid; it stops at the
// outermost frame (a zero frame pointer) or when pcs is full.
//
//go:noinline
func walkFrames(pcs []uintptr) int {
	fp := loadWord(framePointer()) // skip walkFrames' own frame: start at its caller's
	n := 0
	for n < len(pcs) && fp != 0 {
		pcs[n] = loadWord(fp + 8)
		fp = loadWord(fp)
		n++
	}
	return n
}
