package dsl

// TMAPipeline is a producer/consumer ring of stages fed by TMA (CuTe DSL's PipelineTmaAsync):
// per stage a full barrier (one producer arrival plus the stage's transaction bytes) and an
// empty barrier (one arrival per consumer). The producer acquires a stage (waits until it is
// empty, arms the full barrier with the bytes its copies bring), loads it and commits; the
// consumers wait until it is full, use it and release it. Stages is a Go int: the ring's
// size and the phase arithmetic are fixed at build time.
type TMAPipeline struct {
	k           *Kernel
	stages      int
	full, empty Mbarriers
	copies      []*TMACopy
	tx          int
	loaded      int // bytes loaded since the last ProducerAcquire (build time)
	acquired    bool
	cluster     int // blocks whose consumers free each stage (MakeTMAPipelineCluster)
}

// MakeTMAPipeline allocates and initialises (from thread 0, then SyncThreads: call it where
// the whole block is) a pipeline of stages whose every stage is filled by one Load of each
// of copies; consumers is the number of ConsumerRelease calls that free a stage (threads,
// or warps when one lane of each releases).
func (k *Kernel) MakeTMAPipeline(stages, consumers int, copies ...*TMACopy) *TMAPipeline {
	if !k.live() {
		return nil
	}
	defer k.hold()()
	return k.makeTMAPipeline("MakeTMAPipeline", stages, consumers, 1, copies)
}

// MakeTMAPipelineCluster is MakeTMAPipeline over the cluster blocks of a cluster whose
// stages fill together (CUTLASS's PipelineTmaAsync with a cluster shape): each block's
// producer loads its part of the shared copies (MakeTMACopyMulticast, LoadMulticast) into
// every block, so a stage is free only once the consumers of every block have released
// it. Each block's empty barrier counts consumers arrivals from each of the cluster
// blocks (ConsumerRelease arrives on all of them, through mapa), and its full barrier the
// bytes landing in the block, from its own loads and the other blocks' multicasts. The
// barriers are initialised from thread 0 and made visible to the cluster
// (FenceMbarrierInit, ClusterSync: call it where every thread of the cluster is); the
// kernel must ClusterSync again before any block exits, so that no block arrives on the
// barriers of one that has gone.
func (k *Kernel) MakeTMAPipelineCluster(stages, consumers, cluster int, copies ...*TMACopy) *TMAPipeline {
	if !k.live() {
		return nil
	}
	defer k.hold()()
	if cluster < 1 || cluster > 16 {
		k.errorf("MakeTMAPipelineCluster: a cluster of %d blocks; want 1 to 16", cluster)
		cluster = 1
	}
	return k.makeTMAPipeline("MakeTMAPipelineCluster", stages, consumers, cluster, copies)
}

func (k *Kernel) makeTMAPipeline(what string, stages, consumers, cluster int, copies []*TMACopy) *TMAPipeline {
	p := &TMAPipeline{k: k, stages: stages, copies: copies, cluster: cluster}
	if stages < 1 || consumers < 1 || len(copies) == 0 {
		k.errorf("%s: %d stages, %d consumers, %d copies; want at least one of each", what, stages, consumers, len(copies))
		p.stages = 1
		return p
	}
	for i, c := range copies {
		if c == nil || c.k != k {
			k.errorf("%s: copy %d is not a TMACopy of this kernel", what, i)
			return p
		}
		if c.tile.Stages < stages {
			k.errorf("%s: copy %d's tile has %d stages, fewer than the pipeline's %d", what, i, c.tile.Stages, stages)
		}
		if c.Parts > 1 && c.Parts != cluster {
			k.errorf("%s: copy %d is shared by %d blocks; the pipeline's cluster has %d", what, i, c.Parts, cluster)
		}
		p.tx += c.Bytes
	}
	p.full, p.empty = k.Mbarriers(stages), k.Mbarriers(stages)
	k.If(k.ThreadIdx(X).Eq(uint32(0)), func() {
		for s := 0; s < stages; s++ {
			p.full.At(s).Init(1)
			p.empty.At(s).Init(consumers * cluster)
		}
		if cluster > 1 {
			k.FenceMbarrierInit()
		}
	})
	if cluster > 1 {
		k.ClusterSync()
	} else {
		k.SyncThreads()
	}
	return p
}

// ClusterSize is the number of cluster blocks whose consumers free each stage (1 but for
// MakeTMAPipelineCluster).
func (p *TMAPipeline) ClusterSize() int {
	if p == nil {
		return 1
	}
	return max(p.cluster, 1)
}

// Stages returns the number of stages.
func (p *TMAPipeline) Stages() int {
	if p == nil {
		return 0
	}
	return p.stages
}

// TxBytes is what each stage's full barrier expects: the sum of the copies' Bytes.
func (p *TMAPipeline) TxBytes() int {
	if p == nil {
		return 0
	}
	return p.tx
}

// ProducerState returns the producer's start: stage 0, waiting on the empty barriers' phase
// parity 1, which a fresh barrier reports complete (every stage starts empty).
func (p *TMAPipeline) ProducerState() PipelineState {
	if p.dead() {
		return PipelineState{}
	}
	return p.k.pipelineState(p.stages, 1)
}

// dead reports a nil pipeline, whose uses do nothing (there is no kernel to record an
// error on).
func (p *TMAPipeline) dead() bool { return p == nil || p.k == nil }

// ConsumerState returns the consumers' start: stage 0, parity 0.
func (p *TMAPipeline) ConsumerState() PipelineState {
	if p.dead() {
		return PipelineState{}
	}
	return p.k.pipelineState(p.stages, 0)
}

// ProducerAcquire waits until stage s is empty and arms its full barrier with TxBytes (one
// producer thread calls it).
func (p *TMAPipeline) ProducerAcquire(s PipelineState) {
	if p.dead() {
		orphan("TMAPipeline.ProducerAcquire", s.k)
		return
	}
	defer p.k.hold()()
	p.empty.At(s.Index).Wait(s.Phase)
	p.full.At(s.Index).ArriveExpectTx(p.tx)
	p.loaded, p.acquired = 0, true
}

// Load issues copy c of stage s at the tile coordinates (mn, kk) onto the stage's full
// barrier.
func (p *TMAPipeline) Load(s PipelineState, c *TMACopy, mn, kk any) {
	if p.dead() {
		orphan("TMAPipeline.Load", s.k, c.kernel(), anyKernel(mn), anyKernel(kk))
		return
	}
	defer p.k.hold()()
	if !p.acquired {
		p.k.errorf("TMAPipeline.Load: no ProducerAcquire before it")
	}
	if c == nil {
		p.k.errorf("TMAPipeline.Load: nil TMACopy")
		return
	}
	p.loaded += c.Bytes
	c.Load(p.full.At(s.Index), s.Index, mn, kk)
}

// LoadOuter is Load from a map of rank 2 + len(outer) (TMACopy.LoadOuter).
func (p *TMAPipeline) LoadOuter(s PipelineState, c *TMACopy, mn, kk any, outer ...any) {
	if p.dead() {
		orphan("TMAPipeline.LoadOuter", s.k, c.kernel(), anyKernel(mn), anyKernel(kk))
		return
	}
	defer p.k.hold()()
	if !p.acquired {
		p.k.errorf("TMAPipeline.LoadOuter: no ProducerAcquire before it")
	}
	if c == nil {
		p.k.errorf("TMAPipeline.LoadOuter: nil TMACopy")
		return
	}
	p.loaded += c.Bytes
	c.LoadOuter(p.full.At(s.Index), s.Index, mn, kk, outer...)
}

// LoadMulticast is Load multicast to the cluster's blocks in mask (of a copy made by
// MakeTMACopyMulticast: the calling block's part of it).
func (p *TMAPipeline) LoadMulticast(s PipelineState, c *TMACopy, mn, kk any, mask Value) {
	if p.dead() {
		orphan("TMAPipeline.LoadMulticast", s.k, c.kernel(), mask.k)
		return
	}
	defer p.k.hold()()
	if !p.acquired {
		p.k.errorf("TMAPipeline.LoadMulticast: no ProducerAcquire before it")
	}
	if c == nil {
		p.k.errorf("TMAPipeline.LoadMulticast: nil TMACopy")
		return
	}
	p.loaded += c.Bytes
	c.LoadMulticast(p.full.At(s.Index), s.Index, mn, kk, mask)
}

// ProducerCommit ends the stage's loads. The TMA copies complete the full barrier
// themselves; the build checks that the loads issued since ProducerAcquire bring exactly
// the bytes the barrier expects (a mismatch would hang the consumers).
func (p *TMAPipeline) ProducerCommit(s PipelineState) {
	if p.dead() {
		orphan("TMAPipeline.ProducerCommit", s.k)
		return
	}
	if !p.acquired {
		p.k.errorf("TMAPipeline.ProducerCommit: no ProducerAcquire before it")
		return
	}
	if p.loaded != p.tx {
		p.k.errorf("TMAPipeline.ProducerCommit: the stage's loads bring %d bytes; its full barrier expects %d (expect_tx): the consumers would wait forever", p.loaded, p.tx)
	}
	p.acquired = false
}

// ConsumerWait waits until stage s is full.
func (p *TMAPipeline) ConsumerWait(s PipelineState) {
	if p.dead() {
		orphan("TMAPipeline.ConsumerWait", s.k)
		return
	}
	defer p.k.hold()()
	p.full.At(s.Index).Wait(s.Phase)
}

// ConsumerRelease arrives on stage s's empty barrier (each of the consumers once); in a
// cluster pipeline on the barrier of every block of the cluster (Mbarrier.ArriveCluster).
func (p *TMAPipeline) ConsumerRelease(s PipelineState) {
	if p.dead() {
		orphan("TMAPipeline.ConsumerRelease", s.k)
		return
	}
	defer p.k.hold()()
	if p.cluster <= 1 {
		p.empty.At(s.Index).Arrive()
		return
	}
	for r := 0; r < p.cluster; r++ {
		p.empty.At(s.Index).ArriveCluster(r)
	}
}

// Full returns stage i's full barrier; Empty its empty barrier.
func (p *TMAPipeline) Full(i any) Mbarrier {
	if p.dead() {
		return Mbarrier{}
	}
	return p.full.At(i)
}

// Empty returns stage i's empty barrier.
func (p *TMAPipeline) Empty(i any) Mbarrier {
	if p.dead() {
		return Mbarrier{}
	}
	return p.empty.At(i)
}
