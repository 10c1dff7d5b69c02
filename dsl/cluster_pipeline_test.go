package dsl_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/ptx"
)

// sharedTile64 is a K-major bf16 tile of rows x 64 with the 128-byte swizzle.
func sharedTile64(k *dsl.Kernel, rows, stages int) dsl.SharedTile {
	la, _ := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 128)
	l, _ := dsl.TileToShape(la, rows, 64)
	return k.SharedTile(dsl.BF16, l, stages)
}

// TestTMAPipelineClusterMisuse: misuse of the cluster pieces is a Build error at the
// caller's line naming the problem.
func TestTMAPipelineClusterMisuse(t *testing.T) {
	cases := []misuse{
		{"plain Load of a shared copy", "load it with LoadMulticast", func(k *dsl.Kernel) int {
			c := k.MakeTMACopyMulticast(k.TensorMapPtrParam("tm"), sharedTile64(k, 64, 2), 2)
			p := k.MakeTMAPipelineCluster(2, 1, 2, c)
			st := p.ProducerState()
			p.ProducerAcquire(st)
			return at(func() { p.Load(st, c, 0, 0) })
		}},
		{"shared copy in a plain pipeline", "copy 0 is shared by 2 blocks; the pipeline's cluster has 1", func(k *dsl.Kernel) int {
			c := k.MakeTMACopyMulticast(k.TensorMapPtrParam("tm"), sharedTile64(k, 64, 2), 2)
			return at(func() { k.MakeTMAPipeline(2, 1, c) })
		}},
		{"TMA store through a shared load's copy", "store through a MakeTMACopy", func(k *dsl.Kernel) int {
			c := k.MakeTMACopyMulticast(k.TensorMapPtrParam("tm"), sharedTile64(k, 64, 2), 2)
			return at(func() { c.Store(0, 0, 0) })
		}},
		{"no parts", "0 parts", func(k *dsl.Kernel) int {
			s := sharedTile64(k, 64, 2)
			return at(func() { k.MakeTMACopyMulticast(k.TensorMapPtrParam("tm"), s, 0) })
		}},
		{"a tile that does not split", "1 boxes of 8 rows do not split into 2 equal parts", func(k *dsl.Kernel) int {
			s := sharedTile64(k, 8, 2)
			return at(func() { k.MakeTMACopyMulticast(k.TensorMapPtrParam("tm"), s, 2) })
		}},
		{"cluster too large", "a cluster of 17 blocks", func(k *dsl.Kernel) int {
			c := k.MakeTMACopy(k.TensorMapPtrParam("tm"), sharedTile64(k, 64, 2))
			return at(func() { k.MakeTMAPipelineCluster(2, 1, 17, c) })
		}},
		{"cluster scheduler of no blocks", "clusters of 0 blocks", func(k *dsl.Kernel) int {
			return at(func() { k.MakeClusterTileScheduler(3, 2, 4, 0) })
		}},
		{"remote arrive at a float rank", "Mbarrier.ArriveCluster", func(k *dsl.Kernel) int {
			b := k.Mbarriers(1).At(0)
			return at(func() { b.ArriveCluster(k.Const(dsl.F32, 1)) })
		}},
	}
	checkMisuses(t, "dsl/cluster_pipeline_test.go", cases, dsl.WithTarget(ptx.SM90a))
	checkMisuses(t, "dsl/cluster_pipeline_test.go", []misuse{
		{"remote arrive on sm_80", "Mbarrier.ArriveCluster: mbarrier transaction counts and parity waits need sm_90", func(k *dsl.Kernel) int {
			b := k.Mbarriers(1).At(0)
			return at(func() { b.ArriveCluster(1) })
		}},
	}, dsl.WithTarget(ptx.SM80))
}

// TestMakeTMACopyMulticastParts: a tile of several boxes splits into whole boxes (the box
// unchanged), a tile of one box into boxes of fewer rows (the box's rows divided).
func TestMakeTMACopyMulticastParts(t *testing.T) {
	k := dsl.New("k", dsl.WithTarget(ptx.SM90a))
	tm := k.TensorMapPtrParam("tm")
	one := k.MakeTMACopyMulticast(tm, sharedTile64(k, 64, 1), 2) // one 64-row box
	la, _ := dsl.GMMALayoutAtom(dsl.BF16, dsl.KMajor, 128)
	l, _ := dsl.TileToShape(la, 64, 256) // four boxes along K
	four := k.MakeTMACopyMulticast(tm, k.SharedTile(dsl.BF16, l, 1), 2)
	if _, err := k.Build(); err != nil {
		t.Fatal(err)
	}
	if one.Box != [2]int{64, 32} || one.Bytes != 64*64*2 || one.Parts != 2 {
		t.Errorf("one box: box %v, %d bytes, %d parts; want (64, 32), 8192, 2", one.Box, one.Bytes, one.Parts)
	}
	if four.Box != [2]int{64, 64} || four.Bytes != 64*256*2 {
		t.Errorf("four boxes: box %v, %d bytes; want (64, 64), 32768", four.Box, four.Bytes)
	}
}

// TestTMAPipelineClusterOnEmulator: a cluster of 2 runs a 2-stage ring over 5 K steps of a
// 64 x 64 bf16 tile that the blocks load together (each its 32 rows, multicast to both);
// one consumer warp per block copies each stage out and releases it on both blocks through
// mapa. Both blocks see every K step's whole tile, and the ring wraps (phases flip).
func TestTMAPipelineClusterOnEmulator(t *testing.T) {
	const steps = 5
	k := dsl.New("ring", dsl.WithTarget(ptx.SM90a))
	tm := k.TensorMapPtrParam("tm")
	out := k.PtrParam("out", dsl.BF16)
	s := sharedTile64(k, 64, 2)
	c := k.MakeTMACopyMulticast(tm, s, 2)
	p := k.MakeTMAPipelineCluster(2, 1, 2, c)
	tid := k.ThreadIdx(dsl.X)
	rank := k.BlockRankInCluster()
	k.If(tid.Eq(uint32(0)), func() {
		st := p.ProducerState()
		k.For(uint32(0), uint32(steps), uint32(1), func(kt dsl.Value) {
			p.ProducerAcquire(st)
			p.LoadMulticast(st, c, 0, kt.Mul(uint32(64)), k.Const(dsl.U16, 3))
			p.ProducerCommit(st)
			st.Advance()
		})
	})
	k.If(tid.Ge(uint32(32)), func() {
		st := p.ConsumerState()
		lane := tid.Sub(uint32(32))
		k.For(uint32(0), uint32(steps), uint32(1), func(kt dsl.Value) {
			p.ConsumerWait(st)
			view := s.Tensor(st.Index)
			k.For(uint32(0), uint32(64*64/32), uint32(1), func(j dsl.Value) {
				i := j.Mul(uint32(32)).Add(lane)
				mn, kk := i.Shr(uint32(6)), i.And(uint32(63))
				k.Store(out.At(rank.Mul(uint32(steps)).Add(kt).Mul(uint32(4096)).Add(i)), view.Load(mn, kk))
			})
			k.If(lane.Eq(uint32(0)), func() { p.ConsumerRelease(st) })
			st.Advance()
		})
	})
	k.ClusterSync()
	m, sys := onOneGPU(t, k)
	assemble(t, m)
	src := m.String()
	for _, want := range []string{"mapa.shared::cluster.u64", "mbarrier.arrive.shared::cluster.b64 _,", ".multicast::cluster", "fence.mbarrier_init.release.cluster"} {
		if !strings.Contains(src, want) {
			t.Errorf("the PTX has no %s", want)
		}
	}
	vals, raw := elems(dsl.BF16, 64*64*steps, 5) // B: 64 rows (MN) x 320 (K), K contiguous
	g, _ := sys.Malloc(0, len(raw))
	po, _ := sys.Malloc(0, 2*len(raw))
	pm, _ := sys.Malloc(0, 128)
	tmap := emu.TensorMap{Elem: ptx.BF16, Rank: 2, Global: g, Dims: [5]uint64{64 * steps, 64}, Strides: [5]uint64{0, 2 * 64 * steps},
		Box: [5]uint32{uint32(c.Box[0]), uint32(c.Box[1])}, Swizzle: c.SwizzleBytes}
	enc := tmap.Encode()
	for _, err := range []error{emu.WriteSlice(sys, g, raw), emu.WriteSlice(sys, pm, enc[:]),
		sys.Launch(emu.Launch{Module: m, Entry: "ring", Grid: emu.D1(2), Block: emu.D1(64), Cluster: emu.D1(2), Args: []any{pm, po}})} {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := emu.ReadSlice[uint16](sys, po, 2*steps*4096)
	if err != nil {
		t.Fatal(err)
	}
	for b := 0; b < 2; b++ {
		for kt := 0; kt < steps; kt++ {
			for i := 0; i < 4096; i++ {
				mn, kk := i/64, i%64
				want := vals[mn*64*steps+kt*64+kk]
				if f := float64(fp.BF16ToF32(got[(b*steps+kt)*4096+i])); f != want {
					t.Fatalf("block %d step %d element (%d, %d) = %g, want %g", b, kt, mn, kk, f, want)
				}
			}
		}
	}
}

// TestClusterTileSchedulerOnEmulator: 3 x 2 tiles over 2 clusters of 2 blocks: the blocks
// of a cluster take row tiles 2m and 2m+1 of the same column, as many tiles each, and every
// tile inside the grid is taken exactly once (the block past row 2 gets row 3, outside).
func TestClusterTileSchedulerOnEmulator(t *testing.T) {
	k := dsl.New("sched", dsl.WithTarget(ptx.SM90a))
	out := k.PtrParam("out", dsl.U32)
	s := k.MakeClusterTileScheduler(3, 2, 4, 2)
	b := k.BlockIdx(dsl.X)
	cnt := k.Var(dsl.U32, 0)
	k.If(k.ThreadIdx(dsl.X).Eq(uint32(0)), func() {
		s.ForEach(func(m, n dsl.Value) {
			at := b.Mul(uint32(16)).Add(cnt.Mul(uint32(2)))
			k.Store(out.At(at.Add(uint32(1))), m)
			k.Store(out.At(at.Add(uint32(2))), n)
			k.Set(cnt, cnt.Add(uint32(1)))
		})
		k.Store(out.At(b.Mul(uint32(16))), cnt)
	})
	m, sys := onOneGPU(t, k)
	po, _ := sys.Malloc(0, 4*16*4)
	if err := sys.Launch(emu.Launch{Module: m, Entry: "sched", Grid: emu.D1(4), Block: emu.D1(32), Cluster: emu.D1(2), Args: []any{po}}); err != nil {
		t.Fatal(err)
	}
	got, err := emu.ReadSlice[uint32](sys, po, 16*4)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]uint32]int{}
	for blk := 0; blk < 4; blk++ {
		n := got[16*blk]
		if peer := got[16*(blk^1)]; n != peer {
			t.Errorf("block %d runs %d tiles, its cluster's other block %d", blk, n, peer)
		}
		for i := 0; i < int(n); i++ {
			tm, tn := got[16*blk+1+2*i], got[16*blk+2+2*i]
			if int(tm%2) != blk%2 {
				t.Errorf("block %d (rank %d) got row tile %d", blk, blk%2, tm)
			}
			seen[[2]uint32{tm, tn}]++
		}
	}
	for tm := uint32(0); tm < 4; tm++ {
		for tn := uint32(0); tn < 2; tn++ {
			if seen[[2]uint32{tm, tn}] != 1 {
				t.Errorf("tile (%d, %d) taken %d times, want once", tm, tn, seen[[2]uint32{tm, tn}])
			}
		}
	}
	if len(seen) != 8 {
		t.Errorf("tiles taken: %v; want the 3 x 2 grid and the 2 rows past it once each", seen)
	}
}
