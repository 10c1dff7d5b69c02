package emu

import (
	"errors"
	"fmt"
	"math/bits"
)

// ExternFunc implements a function that kernels declare with .extern .func and call. The
// emulator calls it once per calling thread with the call's arguments; it fills c.Rets and
// returns nil, or returns c.Wait(reason) to block cooperatively: the thread stays at the call
// and the handler runs again for it later (after other warps ran), with the same c.State.
// Any other error stops the launch with a KindExtern error naming the thread and call site.
//
// Side effects should happen in the invocation that completes (or be recorded in c.State so
// that a retry does not repeat them). NVSHMEM's device API is built on this hook.
type ExternFunc func(c *ExternCall) error

// ErrWait is what ExternCall.Wait returns: the call is not complete yet.
var ErrWait = errors.New("emu: extern call waits")

// ExternCall is one thread's call of an extern function.
type ExternCall struct {
	Name     string
	GPU      int // the calling GPU (the PE, in NVSHMEM terms)
	NumGPUs  int
	Block    [3]int
	Thread   [3]int
	Lane     int
	Warp     int // the warp's index in its block
	BlockDim Dim3
	GridDim  Dim3
	// Args holds one value per declared parameter: the parameter's bits, zero-extended
	// (byte-array parameters: their first 8 bytes; all their bytes are in ArgBytes).
	Args     []uint64
	ArgBytes [][]byte
	// Rets receives one value per declared return parameter.
	Rets []uint64
	// State is kept across the retries of this call by this thread; nil on the first try.
	State any
	// Retries counts the earlier invocations of this call by this thread that waited.
	Retries int

	reason string
	w      *warp
	lane   int
}

// errCall is the error of an ExternCall method on a call the emulator did not make (nil or
// a zero ExternCall{}), or nil.
func (c *ExternCall) errCall(op string) error {
	if c == nil || c.w == nil {
		return fmt.Errorf("emu: ExternCall.%s on a nil or zero ExternCall (use the one the emulator passes the handler)", op)
	}
	return nil
}

// Wait reports that the call cannot complete yet; return its result from the handler. On
// a nil or zero ExternCall it returns errCall's error, not ErrWait.
func (c *ExternCall) Wait(reason string) error {
	if err := c.errCall("Wait"); err != nil {
		return err
	}
	c.reason = reason
	return ErrWait
}

// System returns the system the kernel runs on (for address translation: Peer, MulticastOf);
// nil for a nil or zero ExternCall (whose methods are errors).
func (c *ExternCall) System() *System {
	if c.errCall("System") != nil {
		return nil
	}
	return c.w.l.sys
}

// BlockLocal returns a map private to the calling block and kept for the launch, for
// handlers of block- or warp-collective functions to coordinate their threads (a fresh
// map, kept nowhere, for a nil or zero ExternCall).
func (c *ExternCall) BlockLocal() map[string]any {
	if c.errCall("BlockLocal") != nil {
		return map[string]any{}
	}
	b := c.w.b
	if b.ext == nil {
		b.ext = map[string]any{}
	}
	return b.ext
}

// Load reads len(p) bytes at a generic address as the calling thread (global memory of any
// GPU, or the thread's shared or local window). It is a strong (immediate) access.
func (c *ExternCall) Load(addr uint64, p []byte) error {
	if err := c.errCall("Load"); err != nil {
		return err
	}
	if len(p) == 0 { // nothing, at any address (as System.Read)
		return nil
	}
	b, f := c.w.genericSpan(c.lane, addr, len(p))
	if f != nil {
		return errors.New(f.msg)
	}
	copy(p, b)
	return nil
}

// Check reports whether the calling thread could read or write n bytes at a generic
// address (the error Load or Store would give), without touching them: a handler checks a
// span whose size a kernel passed before it allocates a buffer of that size (a count of 2^32
// elements made it allocate gigabytes before the access faulted). A span of 0 bytes touches
// nothing: any address passes.
func (c *ExternCall) Check(addr uint64, n int) error {
	if err := c.errCall("Check"); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("%d bytes at %#x: a negative size", n, addr)
	}
	if n == 0 {
		return nil
	}
	if _, f := c.w.genericSpan(c.lane, addr, n); f != nil {
		return errors.New(f.msg)
	}
	return nil
}

// Store writes p at a generic address as the calling thread, immediately visible.
func (c *ExternCall) Store(addr uint64, p []byte) error {
	if err := c.errCall("Store"); err != nil {
		return err
	}
	if len(p) == 0 { // nothing, at any address (as System.Write)
		return nil
	}
	b, f := c.w.genericSpan(c.lane, addr, len(p))
	if f != nil {
		return errors.New(f.msg)
	}
	copy(b, p)
	if l := c.w.l; l.weak && region(addr) >= regionGlobal0 && l.recordedSpan(addr, len(p)) {
		l.overwrite(addr, len(p), false)
	}
	c.w.l.progressed()
	return nil
}

// Load32/Load64/Store32/Store64 are typed shorthands of Load and Store.
func (c *ExternCall) Load32(addr uint64) (uint32, error) {
	var b [4]byte
	err := c.Load(addr, b[:])
	return uint32(getN(b[:], 4)), err
}

// Load64 reads 8 bytes.
func (c *ExternCall) Load64(addr uint64) (uint64, error) {
	var b [8]byte
	err := c.Load(addr, b[:])
	return getN(b[:], 8), err
}

// Store32 writes 4 bytes.
func (c *ExternCall) Store32(addr uint64, v uint32) error {
	var b [4]byte
	putN(b[:], 4, uint64(v))
	return c.Store(addr, b[:])
}

// Store64 writes 8 bytes.
func (c *ExternCall) Store64(addr uint64, v uint64) error {
	var b [8]byte
	putN(b[:], 8, v)
	return c.Store(addr, b[:])
}

// Atomic applies f to the size-byte (4 or 8) value at addr atomically with respect to every
// GPU and returns the old value. A nil f is an error.
func (c *ExternCall) Atomic(addr uint64, size int, f func(old uint64) uint64) (uint64, error) {
	if err := c.errCall("Atomic"); err != nil {
		return 0, err
	}
	if f == nil {
		return 0, errors.New("emu: ExternCall.Atomic: the update function f is nil")
	}
	if size != 4 && size != 8 {
		return 0, fmt.Errorf("Atomic: size %d (want 4 or 8)", size)
	}
	b, fl := c.w.genericSpan(c.lane, addr, size)
	if fl != nil {
		return 0, errors.New(fl.msg)
	}
	old := getN(b, size)
	nv := f(old)
	if nv != old {
		putN(b, size, nv)
		c.w.l.progressed()
	}
	return old, nil
}

// Fence makes the calling thread's buffered weak stores visible (weak mode), as
// fence.sc.sys would; on a nil or zero ExternCall it does nothing.
func (c *ExternCall) Fence() {
	if c.errCall("Fence") == nil {
		c.w.l.flushThread(c.w, c.lane)
	}
}

// RegisterExtern installs the handler of the extern function name (replacing any earlier).
// On a nil *System it does nothing (every launch of it is an error).
func (s *System) RegisterExtern(name string, h ExternFunc) {
	if s == nil {
		return
	}
	if s.externs == nil { // the zero System
		s.externs = map[string]ExternFunc{}
	}
	s.externs[name] = h
}

func (w *warp) externCall(in *dinst, pc int32, g, m uint32) bool {
	l := w.l
	w.setPC(g&^m, pc+1)
	if m == 0 {
		return false
	}
	h := l.sys.externs[in.extern]
	if h == nil {
		w.fault(in, bits.TrailingZeros32(m), KindExtern, fmt.Sprintf("extern function %s has no handler (System.RegisterExtern)", errName(in.extern)))
		return true
	}
	waited := false
	for x := m; x != 0; x &= x - 1 {
		ln := bits.TrailingZeros32(x)
		c := w.ext[ln]
		if c == nil {
			c = &ExternCall{Name: in.extern, GPU: w.b.gpu, NumGPUs: len(l.sys.gpus), Block: w.b.id, Thread: w.tid(ln),
				Lane: ln, Warp: w.idx, BlockDim: l.blk, GridDim: l.grid, w: w, lane: ln}
			c.Args = make([]uint64, len(in.argOps))
			c.ArgBytes = make([][]byte, len(in.argOps))
			for i, a := range in.argOps {
				bs := make([]byte, a.size)
				if a.local >= 0 {
					copy(bs, w.local[ln*l.lsize+int(a.local):])
				} else {
					putN(bs, int(min(a.size, 8)), w.r[a.slot+int32(ln)])
				}
				c.ArgBytes[i] = bs
				c.Args[i] = getN(bs, int(min(a.size, 8)))
			}
			c.Rets = make([]uint64, len(in.retOps))
			w.ext[ln] = c
			if l.gRace {
				l.raceRelease(w, ln, scSys)
			}
			l.progressed() // a new call is progress even if it waits (it may let others finish)
		}
		c.reason = ""
		err := h(c)
		if errors.Is(err, ErrWait) {
			c.Retries++
			waited = true
			continue
		}
		w.ext[ln] = nil
		if err != nil {
			w.fault(in, ln, KindExtern, fmt.Sprintf("%s: %v", errName(in.extern), err))
			return true
		}
		if l.gRace {
			l.raceAcquire(w, ln, scSys)
		}
		for i, r := range in.retOps {
			v := uint64(0)
			if i < len(c.Rets) {
				v = c.Rets[i]
			}
			if r.local >= 0 {
				putN(w.local[ln*l.lsize+int(r.local):], int(min(r.size, 8)), v)
			} else if r.slot >= 0 {
				w.r[r.slot+int32(ln)] = v & r.mask
			}
		}
		w.pc[ln] = pc + 1
		l.progressed()
	}
	if waited {
		l.extBlocked++
		return true
	}
	return false
}

// copyArgs passes a call's arguments into the callee's parameter frame (per-thread local).
func (w *warp) copyArgs(in *dinst, ln int) {
	ls := w.l.lsize
	loc := w.local[ln*ls : (ln+1)*ls]
	for i, a := range in.argOps {
		if i >= len(in.callee.params) {
			break
		}
		p := in.callee.params[i]
		if a.local >= 0 {
			copy(loc[p.local:p.local+p.size], loc[a.local:a.local+min(a.size, p.size)])
		} else {
			putN(loc[p.local:], int(min(p.size, 8)), w.r[a.slot+int32(ln)])
		}
	}
}

// copyRets passes the callee's return parameters to the call's destinations.
func (w *warp) copyRets(call *dinst, ret *dinst, ln int) {
	ls := w.l.lsize
	loc := w.local[ln*ls : (ln+1)*ls]
	for i, r := range call.retOps {
		if i >= len(call.callee.rets) {
			break
		}
		p := call.callee.rets[i]
		if r.local >= 0 {
			copy(loc[r.local:r.local+min(r.size, p.size)], loc[p.local:p.local+p.size])
		} else if r.slot >= 0 {
			w.r[r.slot+int32(ln)] = getN(loc[p.local:], int(min(p.size, 8))) & r.mask
		}
	}
}
