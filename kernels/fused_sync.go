package kernels

import "github.com/kgen-dev/kgen/dsl"

// Building blocks for kernels that talk to other GPUs through peer pointers, the ones the
// fused GEMMs (fused.go) and the p2p collectives use: a cross-GPU barrier and per-tile
// signals, both on u32 slots of a symmetric buffer reached through a dsl.PeerTable (a device
// array of CollMaxGPUs u64 addresses, entry g being GPU g's copy, built on the host and
// passed as one parameter). Counters are epochs: the host keeps how many times a slot set
// has been used and passes it as a parameter, so slots never need resetting; waits compare
// with dsl.GeWrap (serial-number order), so the u32 epochs may wrap.

// CrossGPUBarrier synchronizes block b of every GPU through signal pads in peer memory
// (PadWords u32 slots per GPU): each Wait is a bar.sync, a st.release.sys of the barrier's
// target into every GPU's slot [b][rank] (thread t for GPU t), an ld.acquire.sys spin on the
// own slots [b][t] until every GPU's target arrived, and a bar.sync. The i-th Wait (from 1)
// of a launch has target epoch+i; the host adds Count() to the epoch after the launch. A nil
// or zero CrossGPUBarrier (not made by NewCrossGPUBarrier) does nothing.
type CrossGPUBarrier struct {
	k                  *dsl.Kernel
	pads               dsl.PeerTable
	rank, ngpus, epoch dsl.Value
	n                  int
	ord                barrierOrder
}

// NewCrossGPUBarrier returns a barrier over the pads (u32 elements) of ngpus GPUs, this GPU
// being rank, epoch barriers having completed on the pads before the launch. Launch the same
// grid (at most CollMaxBlocks blocks) on every GPU.
func NewCrossGPUBarrier(k *dsl.Kernel, pads dsl.PeerTable, rank, ngpus, epoch dsl.Value) *CrossGPUBarrier {
	if pads.Elem() != dsl.U32 {
		k.Errorf("NewCrossGPUBarrier: pads hold %s, want u32", pads.Elem())
	}
	return &CrossGPUBarrier{k: k, pads: pads, rank: rank, ngpus: ngpus, epoch: epoch}
}

// Wait returns once block b of every GPU has reached this Wait; memory accesses of each
// block before it happen before those of every block after it.
func (b *CrossGPUBarrier) Wait() {
	if b == nil || b.k == nil {
		return // not made by NewCrossGPUBarrier: no kernel to build into
	}
	b.n++
	p2pBarrier(b.k, b.pads, b.rank, b.ngpus, b.epoch.Add(uint32(b.n)), b.ord)
}

// Count returns the number of Waits built so far: what the host adds to the epoch after a
// launch.
func (b *CrossGPUBarrier) Count() int {
	if b == nil {
		return 0
	}
	return b.n
}

// TileSignals are per-tile u32 signal slots in every GPU's copy of a symmetric buffer: a
// producer block sets a slot on a peer with st.release.sys (or adds to it with
// red.release.sys) after a bar.sync, so every store its threads made before is visible to
// whoever acquires the value; a consumer block waits for its own slot with an ld.acquire.sys
// spin (thread-wise, then a bar.sync), so its threads' later accesses see those stores.
// Values are epochs compared with dsl.GeWrap: with epoch the number of earlier launches
// using the slots, a launch sets Target() and waits for Target(). Zero TileSignals (not made
// by NewTileSignals) do nothing; given a kernel's Values, that kernel's Build reports it.
type TileSignals struct {
	k           *dsl.Kernel
	pads        dsl.PeerTable
	rank, epoch dsl.Value
	ord         barrierOrder
}

// NewTileSignals returns the signals on pads (u32 elements), this GPU being rank, epoch
// launches having used them before.
func NewTileSignals(k *dsl.Kernel, pads dsl.PeerTable, rank, epoch dsl.Value) TileSignals {
	if pads.Elem() != dsl.U32 {
		k.Errorf("NewTileSignals: pads hold %s, want u32", pads.Elem())
	}
	return TileSignals{k: k, pads: pads, rank: rank, epoch: epoch}
}

// Epoch returns the number of earlier launches (the parameter given to NewTileSignals).
func (s TileSignals) Epoch() dsl.Value { return s.epoch }

// Target returns what this launch sets: epoch+1 (wrapping).
func (s TileSignals) Target() dsl.Value { return s.epoch.Add(uint32(1)) }

// kernel returns the signals' kernel; for zero TileSignals (not made by NewTileSignals) it
// records the misuse in the kernel of the first of args that is a Value, and returns nil.
func (s TileSignals) kernel(what string, args ...any) *dsl.Kernel {
	if s.k != nil {
		return s.k
	}
	for _, a := range args {
		if v, ok := a.(dsl.Value); ok && v.Kernel() != nil {
			v.Kernel().Errorf("TileSignals.%s: zero TileSignals (make them with NewTileSignals)", what)
			break
		}
	}
	return nil
}

// store is the signalling store: release unless the signals are a deliberately broken
// variant (unordered).
func (s TileSignals) store(p dsl.Ptr, v any) {
	if s.ord == ordered {
		s.k.Store(p, v, dsl.Release(dsl.System))
	} else {
		s.k.Store(p, v, dsl.Relaxed(dsl.System))
	}
}

// Set stores v into slot of GPU peer: a bar.sync, then thread 0 stores with st.release.sys.
func (s TileSignals) Set(peer, slot, v any) {
	k := s.kernel("Set", peer, slot, v)
	if k == nil {
		return
	}
	k.SyncThreads()
	k.If(k.ThreadIdx(dsl.X).Eq(0), func() { s.store(s.pads.Peer(peer).At(slot), v) })
}

// SetPeers stores v into slot of each of the first ngpus GPUs but this one: a bar.sync, then
// thread g stores GPU g's with st.release.sys.
func (s TileSignals) SetPeers(ngpus, slot, v any) {
	k := s.kernel("SetPeers", ngpus, slot, v)
	if k == nil {
		return
	}
	k.SyncThreads()
	tid := k.ThreadIdx(dsl.X)
	k.If(tid.Lt(ngpus).And(tid.Ne(s.rank)), func() { s.store(s.pads.Peer(tid).At(slot), v) })
}

// Add adds v to slot of GPU peer: a bar.sync, then thread 0 adds with red.release.sys (a
// counter several producers increment).
func (s TileSignals) Add(peer, slot, v any) {
	k := s.kernel("Add", peer, slot, v)
	if k == nil {
		return
	}
	k.SyncThreads()
	k.If(k.ThreadIdx(dsl.X).Eq(0), func() {
		p := s.pads.Peer(peer).At(slot)
		if s.ord == ordered {
			k.Reduce(dsl.AtomAdd, p, v, dsl.Release(dsl.System))
		} else {
			k.Reduce(dsl.AtomAdd, p, v, dsl.Relaxed(dsl.System))
		}
	})
}

// Wait spins until this GPU's slot reaches v (dsl.GeWrap) with ld.acquire.sys in thread 0,
// then a bar.sync passes what it acquired to the whole block.
func (s TileSignals) Wait(slot, v any) {
	k := s.kernel("Wait", slot, v)
	if k == nil {
		return
	}
	k.If(k.ThreadIdx(dsl.X).Eq(0), func() { k.WaitUntil(s.pads.Peer(s.rank).At(slot), dsl.GeWrap, v, dsl.Acquire(dsl.System)) })
	k.SyncThreads()
}

// WaitPeers spins, in thread g for each g < ngpus but this GPU, until this GPU's slot
// slot(g) reaches v (dsl.GeWrap, ld.acquire.sys), then a bar.sync: every peer's signal
// arrived.
func (s TileSignals) WaitPeers(ngpus any, slot func(g dsl.Value) dsl.Value, v any) {
	k := s.kernel("WaitPeers", ngpus, v)
	if k == nil {
		return
	}
	if slot == nil {
		k.Errorf("TileSignals.WaitPeers: the slot function is nil")
		return
	}
	tid := k.ThreadIdx(dsl.X)
	k.If(tid.Lt(ngpus).And(tid.Ne(s.rank)), func() { k.WaitUntil(s.pads.Peer(s.rank).At(slot(tid)), dsl.GeWrap, v, dsl.Acquire(dsl.System)) })
	k.SyncThreads()
}
