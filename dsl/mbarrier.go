package dsl

import (
	"fmt"

	"github.com/kgen-dev/kgen/ptx"
)

// Mbarrier is a shared-memory mbarrier object (8 bytes): a phase that completes when its
// expected arrivals have arrived and its expected transaction bytes (TMA copies) have landed.
type Mbarrier struct {
	k    *Kernel
	addr Value // U64 shared address
}

// Mbarriers is an array of mbarriers in static shared memory (one per pipeline stage).
type Mbarriers struct {
	k    *Kernel
	base Value
	n    int
}

// Mbarriers allocates n mbarriers (uninitialised: Init them from one thread, then
// synchronise the block).
func (k *Kernel) Mbarriers(n int) Mbarriers {
	if !k.live() {
		return Mbarriers{}
	}
	defer k.hold()()
	if n <= 0 {
		k.errorf("Mbarriers: %d barriers; want at least 1", n)
		n = 1
	}
	if n > MaxStaticSharedBytes/8 {
		k.errorf("Mbarriers: %d barriers of 8 bytes are more than the %d bytes of static shared memory", n, MaxStaticSharedBytes)
		n = 1
	}
	p := k.alignedShared("Mbarriers", 8*n, 16)
	return Mbarriers{k: k, base: p.addr, n: n}
}

// Len returns the number of barriers.
func (b Mbarriers) Len() int { return b.n }

// At returns barrier i (a Go int or an integer Value).
func (b Mbarriers) At(i any) Mbarrier {
	k := b.k
	if k == nil {
		return Mbarrier{} // the zero Mbarriers: its Mbarrier's uses do nothing
	}
	if v, ok := i.(Value); ok {
		if !k.own(v, "Mbarriers.At") {
			return Mbarrier{k: k, addr: b.base}
		}
		if !isInt(v.t) {
			k.errorf("Mbarriers.At: the index is a %s Value; want an integer", v.t)
			return Mbarrier{k: k, addr: b.base}
		}
		return Mbarrier{k: k, addr: b.base.Add(v.To(U64).Mul(uint64(8)))}
	}
	n, ok := i.(int)
	if !ok || n < 0 || n >= b.n {
		k.errorf("Mbarriers.At: %v is not a barrier 0..%d", i, b.n-1)
		n = 0
	}
	return Mbarrier{k: k, addr: b.base.Add(uint64(8 * n))}
}

func (b Mbarrier) ok(what string) bool {
	if b.k == nil {
		return false
	}
	if b.k.target.SM() < 90 {
		b.k.errorf("%s: mbarrier transaction counts and parity waits need sm_90; the kernel targets %s", what, b.k.target)
		return false
	}
	return true
}

func (b Mbarrier) mem() ptx.Operand { return ptx.Addr{Base: b.k.operand(b.addr)} }

// Init sets the barrier's expected arrival count (1 to 2^20-1) for every phase; call it
// from one thread and make it visible (SyncThreads, or FenceMbarrierInit for a cluster)
// before any arrive.
func (b Mbarrier) Init(count int) {
	if !b.ok("Mbarrier.Init") {
		return
	}
	defer b.k.hold()()
	if count < 1 || count >= 1<<20 {
		b.k.errorf("Mbarrier.Init: arrival count %d; an mbarrier counts 1 to 2^20-1", count)
		return
	}
	b.k.emit(&ptx.Instr{Op: "mbarrier.init", Q: []string{"shared"}, Types: []ptx.Type{ptx.B64}, Args: []ptx.Operand{b.mem(), ptx.IntImm(ptx.B64, int64(count))}})
}

// Arrive counts one arrival of the calling thread.
func (b Mbarrier) Arrive() {
	if !b.ok("Mbarrier.Arrive") {
		return
	}
	defer b.k.hold()()
	b.k.emit(&ptx.Instr{Op: "mbarrier.arrive", Q: []string{"shared"}, Types: []ptx.Type{ptx.B64}, Args: []ptx.Operand{b.k.reg(U64), b.mem()}})
}

// ArriveCluster counts one arrival of the calling thread on the barrier at the same shared
// offset in the cluster's block of rank (a U32 Value or Go int; the caller's own rank
// arrives locally): mapa.shared::cluster, then mbarrier.arrive.shared::cluster with the
// default .release.cta semantics, as CUTLASS's ClusterBarrier::arrive(cta_id) does (ptxas
// 13.0 puts MEMBAR.ALL.GPU before each .release.cluster arrive; docs/facts.md). It orders
// the thread's own earlier accesses only: a consumer freeing a stage has finished reading it
// (wgmma.wait_group) before it arrives. The remote block must not have exited.
func (b Mbarrier) ArriveCluster(rank any) {
	if !b.ok("Mbarrier.ArriveCluster") {
		return
	}
	k := b.k
	defer k.hold()()
	r, ok := k.val(rank, U32, "Mbarrier.ArriveCluster")
	if !ok {
		return
	}
	rr := k.operand(r)
	if r.IsConst() {
		reg := k.reg(U32)
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.U32}, Args: []ptx.Operand{reg, rr}})
		rr = reg
	}
	remote := k.reg(U64)
	k.emit(&ptx.Instr{Op: "mapa", Q: []string{"shared::cluster"}, Types: []ptx.Type{ptx.U64}, Args: []ptx.Operand{remote, k.operand(b.addr), rr}})
	k.emit(&ptx.Instr{Op: "mbarrier.arrive", Q: []string{"shared::cluster"}, Types: []ptx.Type{ptx.B64},
		Args: []ptx.Operand{ptx.Sink{}, ptx.Addr{Base: remote}}})
}

// ArriveExpectTx counts one arrival and expects bytes more transaction bytes in the current
// phase (mbarrier.arrive.expect_tx): the TMA copies completing on the barrier must bring
// exactly that many, or the phase never completes. bytes is a Go int (checked: 0 to 2^20-1)
// or a U32 Value (the run-time size of a BulkLoad, below 2^20).
func (b Mbarrier) ArriveExpectTx(bytes any) {
	if !b.ok("Mbarrier.ArriveExpectTx") {
		return
	}
	k := b.k
	defer k.hold()()
	var n ptx.Operand
	switch x := bytes.(type) {
	case int:
		if x < 0 || x >= 1<<20 {
			k.errorf("Mbarrier.ArriveExpectTx: %d bytes; a transaction count is 0 to 2^20-1", x)
			return
		}
		n = ptx.IntImm(ptx.B64, int64(x))
	case Value:
		if !k.own(x, "Mbarrier.ArriveExpectTx") {
			return
		}
		if x.t != U32 {
			k.errorf("Mbarrier.ArriveExpectTx: the byte count is a %s Value; want U32 (convert with To)", x.t)
			return
		}
		if x.IsConst() && constInt(x) >= 1<<20 {
			k.errorf("Mbarrier.ArriveExpectTx: %d bytes; a transaction count is 0 to 2^20-1", constInt(x))
			return
		}
		n = k.operand(x)
	default:
		k.errorf("Mbarrier.ArriveExpectTx: the byte count must be a Go int or a U32 Value, got %T", bytes)
		return
	}
	k.emit(&ptx.Instr{Op: "mbarrier.arrive", Q: []string{"expect_tx", "shared"}, Types: []ptx.Type{ptx.B64},
		Args: []ptx.Operand{k.reg(U64), b.mem(), n}})
}

// Wait spins until the phase with the given parity (a U32 Value or Go int, 0 or 1) has
// completed (an mbarrier.try_wait.parity loop).
func (b Mbarrier) Wait(parity any) {
	if !b.ok("Mbarrier.Wait") {
		return
	}
	k := b.k
	defer k.hold()()
	p, ok := k.val(parity, U32, "Mbarrier.Wait")
	if !ok {
		return
	}
	par := k.operand(p)
	if p.IsConst() {
		r := k.reg(U32)
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{ptx.U32}, Args: []ptx.Operand{r, par}})
		par = r
	}
	head := k.label()
	k.place(head)
	done := k.reg(Bool)
	k.emit(&ptx.Instr{Op: "mbarrier.try_wait", Q: []string{"parity", "shared"}, Types: []ptx.Type{ptx.B64}, Args: []ptx.Operand{done, b.mem(), par}})
	k.emit(&ptx.Instr{Guard: &done, GuardNeg: true, Op: "bra", Args: []ptx.Operand{ptx.Sym(head)}})
}

// FenceMbarrierInit makes mbarrier inits visible to the cluster (fence.mbarrier_init.release.cluster).
func (k *Kernel) FenceMbarrierInit() {
	if !k.live() {
		return
	}
	if k.target.SM() < 90 {
		k.errorf("FenceMbarrierInit: needs sm_90; the kernel targets %s", k.target)
		return
	}
	k.emit(&ptx.Instr{Op: "fence.mbarrier_init", Q: []string{"release", "cluster"}})
}

// FenceProxyAsync orders the thread's generic-proxy shared-memory accesses before later
// async-proxy ones (TMA stores, wgmma operands written by threads): fence.proxy.async.shared::cta.
func (k *Kernel) FenceProxyAsync() {
	if !k.live() {
		return
	}
	if k.target.SM() < 90 {
		k.errorf("FenceProxyAsync: needs sm_90; the kernel targets %s", k.target)
		return
	}
	k.emit(&ptx.Instr{Op: "fence.proxy", Q: []string{"async", "shared::cta"}})
}

// FenceProxyAsyncGlobal orders the thread's generic-proxy accesses of global memory, and
// those it has observed (an acquire of another GPU's release), before its later async-proxy
// ones (TMA loads and stores): fence.proxy.async.global. Emit it between acquiring a signal
// and loading with TMA what the signal guards.
func (k *Kernel) FenceProxyAsyncGlobal() {
	if !k.live() {
		return
	}
	if k.target.SM() < 90 {
		k.errorf("FenceProxyAsyncGlobal: needs sm_90; the kernel targets %s", k.target)
		return
	}
	k.emit(&ptx.Instr{Op: "fence.proxy", Q: []string{"async", "global"}})
}

// PipelineState is a position in a ring of stages: the stage index and the parity of the
// phase to wait for, DSL variables that Advance steps at run time (CuTe's PipelineState).
type PipelineState struct {
	k            *Kernel
	Index, Phase Value // U32 variables
	stages       int
}

// Advance moves to the next stage, flipping the phase after the last one.
func (s PipelineState) Advance() {
	k := s.k
	if k == nil {
		return // the zero PipelineState: no kernel to record the misuse in
	}
	defer k.hold()()
	next := s.Index.Add(uint32(1))
	wrap := next.Eq(uint32(s.stages))
	k.Set(s.Index, k.Select(wrap, uint32(0), next))
	k.Set(s.Phase, k.Select(wrap, s.Phase.Xor(uint32(1)), s.Phase))
}

func (k *Kernel) pipelineState(stages, phase int) PipelineState {
	return PipelineState{k: k, Index: k.Var(U32, 0), Phase: k.Var(U32, phase), stages: stages}
}

// String describes the state for error messages.
func (s PipelineState) String() string { return fmt.Sprintf("stage %v phase %v", s.Index, s.Phase) }

// ClusterSync is a barrier over every thread of the cluster (barrier.cluster.arrive.release
// then barrier.cluster.wait.acquire, both .aligned: every thread of each warp executes it):
// after it, mbarrier inits (with FenceMbarrierInit) and shared-memory writes of the
// cluster's blocks are visible.
func (k *Kernel) ClusterSync() {
	if !k.live() {
		return
	}
	if k.target.SM() < 90 {
		k.errorf("ClusterSync: clusters need sm_90; the kernel targets %s", k.target)
		return
	}
	k.uniformBarrier("ClusterSync")
	defer k.hold()()
	k.emit(&ptx.Instr{Op: "barrier.cluster.arrive", Q: []string{"release", "aligned"}})
	k.emit(&ptx.Instr{Op: "barrier.cluster.wait", Q: []string{"acquire", "aligned"}})
}
