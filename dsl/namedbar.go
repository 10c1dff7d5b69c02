package dsl

import (
	"fmt"
	"strings"

	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/ptx"
)

// NamedBar is a named barrier of the block (barrier.sync / barrier.arrive with an id and a
// thread count) allocated by name with NamedBarrierFor: warp-specialized kernels give each
// role's meeting point a name (CUTLASS's NamedBarrier enum) and the kernel hands out the
// hardware ids 1..15 (0 is SyncThreads').
type NamedBar struct {
	k       *Kernel
	Name    string
	ID      int // the hardware barrier id, 1..15
	Threads int // the threads that meet at it
}

// namedBars is a kernel's barrier ids: by name, and the ids used directly (NamedBarrier).
type namedBars struct {
	byName map[string]*namedBarUse
	byID   [16]*namedBarUse
}

type namedBarUse struct {
	name    string // "" for an id used directly
	threads int
	pos     ptx.Pos
}

func (u *namedBarUse) String() string {
	if u.name == "" {
		return fmt.Sprintf("used directly with %d threads at %s", u.threads, posOf(u.pos))
	}
	return fmt.Sprintf("%q with %d threads at %s", u.name, u.threads, posOf(u.pos))
}

func posOf(p ptx.Pos) string {
	if p.File == "" {
		return "an unknown line"
	}
	return fmt.Sprintf("%s:%d", p.File, p.Line)
}

func (k *Kernel) barIDs() *namedBars {
	if k.bars == nil {
		k.bars = &namedBars{byName: map[string]*namedBarUse{}}
	}
	return k.bars
}

// NamedBarrierFor returns the named barrier name for threads threads (a multiple of 32, at
// most 1024), giving it the lowest free id of 1..15 at its first use: the same name returns
// the same barrier. A name reused with another thread count, a sixteenth name, or an id that
// NamedBarrier also uses directly are build errors naming both uses; so is a count above the
// kernel's LaunchBounds.
func (k *Kernel) NamedBarrierFor(name string, threads int) NamedBar {
	if !k.live() {
		return NamedBar{}
	}
	b := NamedBar{k: k, Name: name, Threads: threads}
	if name == "" {
		k.errorf("NamedBarrierFor: empty name")
		return b
	}
	if threads <= 0 || threads%32 != 0 || threads > 1024 {
		k.errorf("NamedBarrierFor(%s): %d threads; want a multiple of 32 in 32..1024 (a block has at most 1024 threads)", excerpt.Quote(name), threads)
		return b
	}
	nb := k.barIDs()
	if u := nb.byName[name]; u != nil {
		for id, v := range nb.byID {
			if v == u {
				b.ID = id
			}
		}
		if u.threads != threads {
			k.errorf("NamedBarrierFor(%s): %d threads; the barrier is %s", excerpt.Quote(name), threads, u)
		}
		return b
	}
	u := &namedBarUse{name: name, threads: threads, pos: callerPos()}
	for id := 1; id < 16; id++ {
		if nb.byID[id] == nil {
			nb.byID[id], nb.byName[name] = u, u
			b.ID = id
			return b
		}
	}
	var taken []string
	for id := 1; id < 16; id++ {
		taken = append(taken, fmt.Sprintf("%d: %s", id, nb.byID[id]))
	}
	k.errorf("NamedBarrierFor(%s): no barrier id left (ids 1..15; 0 is SyncThreads'): %s", excerpt.Quote(name), strings.Join(taken, "; "))
	return b
}

// useBarID records a direct use of barrier id (NamedBarrier, NamedBarrierArrive); an id a
// name holds is an error naming both.
func (k *Kernel) useBarID(what string, id, threads int) bool {
	nb := k.barIDs()
	if u := nb.byID[id]; u != nil {
		if u.name != "" {
			k.errorf("%s: barrier id %d is the named barrier %s", what, id, u)
			return false
		}
		return true
	}
	nb.byID[id] = &namedBarUse{threads: threads, pos: callerPos()}
	return true
}

// Sync waits at the barrier until its Threads threads arrive (barrier.sync id, threads).
func (b NamedBar) Sync() {
	if b.ok("NamedBar.Sync") {
		b.k.emit(&ptx.Instr{Op: "barrier.sync", Args: []ptx.Operand{ptx.IntImm(ptx.U32, int64(b.ID)), ptx.IntImm(ptx.U32, int64(b.Threads))}})
	}
}

// Arrive signals the barrier without waiting (barrier.arrive: a producer's side).
func (b NamedBar) Arrive() {
	if b.ok("NamedBar.Arrive") {
		b.k.emit(&ptx.Instr{Op: "barrier.arrive", Args: []ptx.Operand{ptx.IntImm(ptx.U32, int64(b.ID)), ptx.IntImm(ptx.U32, int64(b.Threads))}})
	}
}

func (b NamedBar) ok(what string) bool {
	if b.k == nil {
		return false // the zero NamedBar: nothing to record the error on
	}
	if b.ID < 1 || b.ID > 15 {
		b.k.errorf("%s: barrier %q has no id (NamedBarrierFor failed)", what, b.Name)
		return false
	}
	return true
}

// checkBarrierBounds records an error for each named barrier of fn expecting more threads
// than its LaunchBounds (.maxntid) let a block have: it could never complete.
func (k *Kernel) checkBarrierBounds(fn *ptx.Func) {
	most := fn.MaxNTID[0] * max(fn.MaxNTID[1], 1) * max(fn.MaxNTID[2], 1)
	if most <= 0 {
		return
	}
	for _, in := range fn.Body {
		if in.Op != "barrier.sync" && in.Op != "barrier.arrive" || len(in.Args) != 2 {
			continue
		}
		id, ok1 := in.Args[0].(ptx.Imm)
		n, ok2 := in.Args[1].(ptx.Imm)
		if ok1 && ok2 && int64(n.Bits) > int64(most) {
			k.errs = append(k.errs, &Error{Pos: in.Pos, Msg: fmt.Sprintf("%s %d expects %d threads; the kernel's LaunchBounds allow at most %d a block, so it would never complete", in.Op, id.Bits, n.Bits, most)})
		}
	}
}
