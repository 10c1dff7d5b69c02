package dsl

import (
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/kgen-dev/kgen/ptx"
)

// Every instruction carries the Go line that built it: the first caller outside package dsl
// and the marked libraries. Finding it is most of the cost of building a kernel, so
// callerPos walks frame pointers where it can (walkFrames, amd64; about ten times cheaper
// than runtime.Callers) and falls back to runtime.Callers, which is exact, whenever the walk
// might be wrong or unsafe.
//
// A frame-pointer walk sees physical frames only, and is only safe through Go code: past a
// cgo callback the saved frame pointer may be any value C left in the register. So the walk
// relies only on what was learned, from runtime.Callers, about each return PC it meets
// (walkInfo): which inlined frames it stands for and whether one of them is outside the
// DSL, and whether the walk was seen to reach the same next frame from it, out of ordinary
// Go code. It follows a saved frame pointer only from such a PC, and holds no stack address
// across a call that could move the stack: walkKnown reads what was learned from a table in
// place, and learnWalk walks again from the top for every frame it adds.

// callerPos returns the position of the first caller outside package dsl and the marked
// libraries (their tests excepted), with the path relative to the kgen module root when inside it.
//
//go:noinline
func callerPos() ptx.Pos {
	if !exactCallers.Load() {
		if pos, ok := walkedPos(); ok {
			return pos
		}
	}
	var exact [64]uintptr
	m := runtime.Callers(2, exact[:]) // skip runtime.Callers and callerPos: from its caller on
	learnWalk(exact[:m])
	pos, _ := firstOutside(exact[:m])
	return pos
}

// exactCallers makes callerPos always use runtime.Callers (tests compare the two).
var exactCallers atomic.Bool

// walkInfo is what callerPos learned about one physical return PC.
type walkInfo struct {
	pos   ptx.Pos // the first frame outside the DSL among the frames inlined there
	found bool
	next  bool // when !found: the walk may go on from here, and reaches the right frame
}

// walkInfos maps physical return PCs to their walkInfo.
var walkInfos sync.Map

// maxWalk is the deepest frame the walk looks at.
const maxWalk = 48

// walkedPos finds the first frame outside the DSL by a frame-pointer walk from callerPos's
// caller, or reports false when a frame on the way has not been learned or cannot be walked
// past. The walk reads walkTable; a PC missing there but learned in walkInfos is copied in and
// the walk goes again.
//
//go:noinline
func walkedPos() (ptx.Pos, bool) {
	for range maxWalk {
		// Skip the return PC into callerPos: the first is the one into callerPos's caller.
		info, st, pc := walkKnown(1)
		switch st {
		case walkFound:
			return info.pos, true
		case walkStop:
			return ptx.Pos{}, false
		}
		w, ok := walkInfos.Load(pc)
		if !ok {
			return ptx.Pos{}, false // not learned: runtime.Callers learns it
		}
		storeWalk(pc, w.(walkInfo))
	}
	return ptx.Pos{}, false
}

// walkTable holds recent walkInfos (*walkEntry), direct-mapped by return PC, for walkKnown:
// entries are immutable and replaced whole (storeWalk), so readers need no lock, and a
// lookup is a load, not a call (sync.Map's were most of a walk's cost). walkKnown reads it
// with loadEntry, not atomic.LoadPointer: that is a Go call under -race, and a call can move
// the stack under a walk.
var walkTable [1 << 12]unsafe.Pointer

// storeWalk publishes info for pc in walkTable.
func storeWalk(pc uintptr, info walkInfo) {
	atomic.StorePointer(&walkTable[walkSlot(pc)], unsafe.Pointer(&walkEntry{pc: pc, info: info}))
}

// walkEntry is one walkTable entry.
type walkEntry struct {
	pc   uintptr
	info walkInfo
}

// clearWalkTable empties walkTable.
func clearWalkTable() {
	for i := range walkTable {
		atomic.StorePointer(&walkTable[i], nil)
	}
}

// walkSlot returns pc's index in walkTable (nosplit: walkKnown calls it in builds that do
// not inline).
//
//go:nosplit
func walkSlot(pc uintptr) uintptr { return (pc ^ pc>>12) % uintptr(len(walkTable)) }

// What walkKnown found.
const (
	walkMiss  = iota // a PC walkTable does not hold (returned beside it)
	walkFound        // the position
	walkStop         // the end of the stack, or a PC the walk may not pass: use runtime.Callers
)

// learnWalk records walkInfos for the frames above callerPos's caller from the exact stack
// that runtime.Callers gave at the same point (one entry per logical frame: a function's
// return PC, then the frames inlined there). It walks one frame further each step, and
// past a PC only when its function is ordinary Go code (walkable).
//
//go:noinline
func learnWalk(exact []uintptr) {
	var pcs [maxWalk]uintptr
	j := 0
	for d := 1; d < maxWalk && j < len(exact); d++ {
		if walkFrames(pcs[:d], 1) < d || pcs[d-1] != exact[j] {
			return
		}
		p := pcs[d-1]
		// The walk's next PC, if the walk may go past p, and where it stands in exact: the
		// entries between are the frames inlined into p's function.
		k := -1
		if walkable(p) && walkFrames(pcs[:d+1], 1) == d+1 {
			entry := funcEntry(p)
			for t := j + 1; t < len(exact); t++ {
				if exact[t] == pcs[d] {
					k = t
					break
				}
				if funcEntry(exact[t]) != entry {
					break
				}
			}
		}
		if k < 0 {
			return // not understood past p: p keeps taking the exact path
		}
		var info walkInfo
		info.pos, info.found = firstOutside(exact[j:k])
		info.next = !info.found
		walkInfos.Store(p, info)
		storeWalk(p, info)
		if info.found {
			return
		}
		j = k
	}
}

// walkable reports whether the walk may follow the frame pointer saved by the function a
// return PC is in: ordinary Go code, not the runtime, where cgo callbacks enter Go (their
// saved frame pointer is C's) and goroutines start.
func walkable(pc uintptr) bool {
	f := runtime.FuncForPC(pc - 1)
	return f != nil && !strings.HasPrefix(f.Name(), "runtime.") && !strings.HasPrefix(f.Name(), "runtime/")
}

// funcEntry returns the entry of the physical function a return PC is in (for inlined code,
// the function it was inlined into).
func funcEntry(pc uintptr) uintptr {
	if f := runtime.FuncForPC(pc - 1); f != nil {
		return f.Entry()
	}
	return 0
}

// firstOutside returns the position of the first of pcs outside the DSL and its libraries.
func firstOutside(pcs []uintptr) (ptx.Pos, bool) {
	for _, pc := range pcs {
		if r := resolve(pc); r.found {
			return r.pos, true
		}
	}
	return ptx.Pos{}, false
}

// pcPos is what one PC from runtime.Callers (one logical frame) resolves to: its position,
// if the frame is outside the DSL and its libraries.
type pcPos struct {
	pos   ptx.Pos
	found bool
}

// posCache maps PCs to pcPos; resolving frames is expensive.
var posCache sync.Map

// resolve returns what pc resolves to, from posCache when it can.
func resolve(pc uintptr) pcPos {
	if r, ok := posCache.Load(pc); ok {
		return r.(pcPos)
	}
	r := resolvePC(pc)
	posCache.Store(pc, r)
	return r
}

func resolvePC(pc uintptr) pcPos {
	frames := runtime.CallersFrames([]uintptr{pc})
	for {
		f, more := frames.Next()
		dir := filepath.Dir(f.File)
		// Wrappers the compiler generates (method values, interface calls) are nobody's source.
		if f.File != "" && f.File != "<autogenerated>" && (dir != dslDir && !isLibrary(dir) || strings.HasSuffix(f.File, "_test.go")) {
			return pcPos{pos: ptx.Pos{File: relPath(f.File), Line: f.Line}, found: true}
		}
		if !more {
			return pcPos{}
		}
	}
}
