package dsl

// framePointer returns the frame pointer of the calling function (assembly).
func framePointer() uintptr

// loadWord returns the word at addr (assembly).
func loadWord(addr uintptr) uintptr

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
