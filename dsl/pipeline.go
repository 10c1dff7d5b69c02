package dsl

import "github.com/kgen-dev/kgen/ptx"

// Pipeline is a multistage cp.async pipeline over the K tiles of a main loop (CUTLASS's
// multistage mainloop): tile t lands in shared-memory stage t % stages; up to stages-1 tiles
// are in flight while the block computes on the oldest. stages is a Go int: the waits are
// fixed at build time.
//
//	pipe := k.CpAsyncPipeline(stages, kTiles, func(stage, t dsl.Value) { ...cp.async copies of tile t... })
//	pipe.Start()
//	k.For(0, kTiles, 1, func(t dsl.Value) {
//		pipe.Wait(t)                    // tile t is in shared memory, the stage of t-1 is free
//		pipe.Issue(t.Add(stages - 1))   // the next load, into the stage of t-1
//		... compute on pipe.Stage(t) ...
//	})
type Pipeline struct {
	k      *Kernel
	stages int
	tiles  Value
	load   func(stage, tile Value)
}

// CpAsyncPipeline returns a pipeline of stages shared-memory stages (at least 2) over tiles
// K tiles; load issues the cp.async copies of one tile into one stage (both I32 Values).
func (k *Kernel) CpAsyncPipeline(stages int, tiles Value, load func(stage, tile Value)) *Pipeline {
	if !k.live() {
		return nil
	}
	if stages < 2 {
		k.errorf("CpAsyncPipeline: %d stages; a pipeline needs at least 2", stages)
		stages = 2
	}
	if k.own(tiles, "CpAsyncPipeline") && !isInt(tiles.t) {
		k.errorf("CpAsyncPipeline: the tile count is %s, not an integer", tiles.t)
	}
	if k.target.SM() < 80 {
		k.errorf("CpAsyncPipeline: cp.async needs sm_80 or later; the kernel targets %s", k.target)
	}
	if load == nil {
		k.errorf("CpAsyncPipeline: the load function is nil")
		load = func(stage, tile Value) {}
	}
	return &Pipeline{k: k, stages: stages, tiles: tiles.To(I32), load: load}
}

// dead reports a nil or zero pipeline (not made by CpAsyncPipeline), whose uses do nothing:
// there is no kernel to record an error on.
func (p *Pipeline) dead() bool { return p == nil || p.k == nil }

// Stages returns the number of stages.
func (p *Pipeline) Stages() int {
	if p == nil {
		return 0
	}
	return p.stages
}

// Stage returns the stage tile t uses: t % stages.
func (p *Pipeline) Stage(t Value) Value {
	if p.dead() {
		return Value{}
	}
	if !p.k.own(t, "Pipeline.Stage") {
		return p.k.poison(I32)
	}
	return p.k.imod(t.To(I32), int64(p.stages))
}

// Start issues tiles 0 .. stages-2, one commit group each (empty past the last tile): a
// runtime loop, so that the loads' code is emitted once more, not stages-1 times.
func (p *Pipeline) Start() {
	if p.dead() {
		return
	}
	defer p.k.hold()()
	p.k.For(int32(0), int32(p.stages-1), int32(1), func(s Value) { p.Issue(s) })
}

// Issue loads tile t into its stage when t < tiles and commits a group (an empty one
// otherwise, so that every iteration's wait counts alike).
func (p *Pipeline) Issue(t Value) {
	if p.dead() {
		orphan("Pipeline.Issue", t.k)
		return
	}
	if !p.k.own(t, "Pipeline.Issue") {
		return
	}
	k := p.k
	defer k.hold()()
	t = t.To(I32)
	k.If(t.Lt(p.tiles), func() { p.load(p.Stage(t), t) })
	k.emit(&ptx.Instr{Op: "cp.async.commit_group"})
}

// Wait blocks until tile t has landed for every thread: cp.async.wait_group stages-2 while
// stages-2 later tiles are in flight, cp.async.wait_all for the last ones (so that the
// waits never count the empty groups past the last tile), then a barrier (which also frees
// the stage computed on before it).
func (p *Pipeline) Wait(t Value) {
	if p.dead() {
		orphan("Pipeline.Wait", t.k)
		return
	}
	if !p.k.own(t, "Pipeline.Wait") {
		return
	}
	k := p.k
	defer k.hold()()
	if p.stages == 2 {
		k.emit(&ptx.Instr{Op: "cp.async.wait_all"})
	} else {
		k.If(t.To(I32).Add(int32(p.stages-1)).Le(p.tiles), func() {
			k.emit(&ptx.Instr{Op: "cp.async.wait_group", Args: []ptx.Operand{ptx.IntImm(ptx.U32, int64(p.stages-2))}})
		}).Else(func() {
			k.emit(&ptx.Instr{Op: "cp.async.wait_all"})
		})
	}
	k.SyncThreads()
}

// Drain waits for every cp.async group of the thread (cp.async.wait_all), then a barrier.
func (p *Pipeline) Drain() {
	if p.dead() {
		return
	}
	p.k.emit(&ptx.Instr{Op: "cp.async.wait_all"})
	p.k.SyncThreads()
}
