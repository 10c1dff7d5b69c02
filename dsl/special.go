package dsl

import "github.com/kgen-dev/kgen/ptx"

// Axis selects the x, y or z component of a thread, block or grid index.
type Axis int

// The axes.
const (
	X Axis = iota
	Y
	Z
)

func (a Axis) suffix() string { return [...]string{".x", ".y", ".z"}[a] }

func (k *Kernel) special(name string, a Axis) Value {
	if a < X || a > Z {
		k.errorf("%s: axis %d is not X, Y or Z", name, int(a))
		return k.poison(U32)
	}
	return k.readSpecial("%" + name + a.suffix())
}

func (k *Kernel) readSpecial(s string) Value {
	t, _ := ptx.SpecialType(ptx.Special(s))
	read := func(d ptx.Reg) {
		k.emit(&ptx.Instr{Op: "mov", Types: []ptx.Type{t}, Args: []ptx.Operand{d, ptx.Special(s)}})
	}
	if s == "%clock" || s == "%clock64" || s == "%globaltimer" {
		d := k.reg(t)
		read(d)
		return Value{k: k, t: t, op: d}
	}
	// Other special registers are constant for the thread: read each once per scope.
	return k.memo(s, t, nil, read)
}

// ThreadIdx returns %tid along the axis: the thread's index in its block.
func (k *Kernel) ThreadIdx(a Axis) Value {
	if !k.live() {
		return Value{}
	}
	return k.special("tid", a)
}

// BlockDim returns %ntid along the axis: the number of threads per block.
func (k *Kernel) BlockDim(a Axis) Value {
	if !k.live() {
		return Value{}
	}
	return k.special("ntid", a)
}

// BlockIdx returns %ctaid along the axis: the block's index in the grid.
func (k *Kernel) BlockIdx(a Axis) Value {
	if !k.live() {
		return Value{}
	}
	return k.special("ctaid", a)
}

// GridDim returns %nctaid along the axis: the number of blocks in the grid.
func (k *Kernel) GridDim(a Axis) Value {
	if !k.live() {
		return Value{}
	}
	return k.special("nctaid", a)
}

// LaneID returns %laneid, the thread's index in its warp (0..31).
func (k *Kernel) LaneID() Value {
	if !k.live() {
		return Value{}
	}
	return k.readSpecial("%laneid")
}

// WarpID returns the warp's index in its block, tid.x/32 for 1-D blocks. It is warp-uniform.
// (PTX's %warpid is the hardware slot, which can change; this is the one kernels want.)
func (k *Kernel) WarpID() Value {
	if !k.live() {
		return Value{}
	}
	return k.ThreadIdx(X).Shr(5)
}

// GlobalThreadIdx returns ctaid*ntid + tid along the axis (U32).
func (k *Kernel) GlobalThreadIdx(a Axis) Value {
	if !k.live() {
		return Value{}
	}
	b, n, t := k.BlockIdx(a), k.BlockDim(a), k.ThreadIdx(a)
	return k.FMA(b, n, t)
}

// GridStride returns ntid*nctaid along the axis: the thread count of the whole grid.
func (k *Kernel) GridStride(a Axis) Value {
	if !k.live() {
		return Value{}
	}
	return k.BlockDim(a).Mul(k.GridDim(a))
}

// SyncThreads emits bar.sync 0: a barrier for every thread of the block.
func (k *Kernel) SyncThreads() {
	if !k.live() {
		return
	}
	k.uniformBarrier("SyncThreads")
	k.emit(&ptx.Instr{Op: "bar.sync", Args: []ptx.Operand{ptx.IntImm(ptx.U32, 0)}})
}

// Thread-block clusters (sm_90+): a grid is made of clusters of blocks, and the blocks of a
// cluster can share memory and synchronise. Launched without a cluster size, every block is a
// cluster of one (IsExplicitCluster is false).

// cluster reads a cluster special register, checking the target first: each needs sm_90.
func (k *Kernel) cluster(what, name string, a Axis, axis bool) Value {
	t := U32
	if name == "is_explicit_cluster" {
		t = Bool
	}
	if k.target.SM() < 90 {
		k.errorf("%s: %%%s needs sm_90 or later (target is %s)", what, name, k.target)
		return k.poison(t)
	}
	if axis {
		return k.special(name, a)
	}
	return k.readSpecial("%" + name)
}

// ClusterIdx returns %clusterid along the axis: the cluster's index in the grid. It needs
// sm_90 or later.
func (k *Kernel) ClusterIdx(a Axis) Value {
	if !k.live() {
		return Value{}
	}
	return k.cluster("ClusterIdx", "clusterid", a, true)
}

// ClusterGridDim returns %nclusterid along the axis: the number of clusters in the grid.
// It needs sm_90 or later.
func (k *Kernel) ClusterGridDim(a Axis) Value {
	if !k.live() {
		return Value{}
	}
	return k.cluster("ClusterGridDim", "nclusterid", a, true)
}

// BlockIdxInCluster returns %cluster_ctaid along the axis: the block's index in its cluster.
// It needs sm_90 or later.
func (k *Kernel) BlockIdxInCluster(a Axis) Value {
	if !k.live() {
		return Value{}
	}
	return k.cluster("BlockIdxInCluster", "cluster_ctaid", a, true)
}

// ClusterDim returns %cluster_nctaid along the axis: the number of blocks per cluster (CUDA's
// clusterDim). It needs sm_90 or later.
func (k *Kernel) ClusterDim(a Axis) Value {
	if !k.live() {
		return Value{}
	}
	return k.cluster("ClusterDim", "cluster_nctaid", a, true)
}

// BlockRankInCluster returns %cluster_ctarank: the block's linear rank in its cluster
// (0..ClusterSize()-1), the rank that addresses another block's shared memory. It needs sm_90
// or later.
func (k *Kernel) BlockRankInCluster() Value {
	if !k.live() {
		return Value{}
	}
	return k.cluster("BlockRankInCluster", "cluster_ctarank", X, false)
}

// ClusterSize returns %cluster_nctarank: the number of blocks in the cluster. It needs sm_90
// or later.
func (k *Kernel) ClusterSize() Value {
	if !k.live() {
		return Value{}
	}
	return k.cluster("ClusterSize", "cluster_nctarank", X, false)
}

// IsExplicitCluster returns %is_explicit_cluster (a Bool): whether the kernel was launched
// with an explicit cluster size. It needs sm_90 or later.
func (k *Kernel) IsExplicitCluster() Value {
	if !k.live() {
		return Value{}
	}
	return k.cluster("IsExplicitCluster", "is_explicit_cluster", X, false)
}
