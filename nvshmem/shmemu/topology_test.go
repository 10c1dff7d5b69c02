package shmemu_test

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/nvshmem"
	"github.com/kgen-dev/kgen/nvshmem/shmemu"
)

// nodeSystem returns a system of gpus GPUs on nodes nodes with NVSHMEM emulated on it.
func nodeSystem(t *testing.T, gpus, nodes int) (*emu.System, *shmemu.Emulator) {
	t.Helper()
	s, err := emu.New(gpus)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetNodes(nodes); err != nil {
		t.Fatal(err)
	}
	e, err := shmemu.Emulate(s)
	if err != nil {
		t.Fatal(err)
	}
	return s, e
}

// TestNodeQueries: on 2 nodes x 2 GPUs, nvshmem_ptr is NULL for the other node's PEs, the
// node team is the PE's node, and multicast exists for the node team but not the world.
func TestNodeQueries(t *testing.T) {
	const gpus, nodes = 4, 2
	k := dsl.New("k")
	p := k.PtrParam("p", dsl.U64)
	k.If(k.ThreadIdx(dsl.X).Eq(0), func() {
		for pe := 0; pe < gpus; pe++ {
			k.Store(p.At(pe), k.PtrValue(nvshmem.PeerPtr(k, p, pe)))
		}
		k.Store(p.At(4), nvshmem.TeamNPEs(k, nvshmem.TeamNode).To(dsl.U64))
		k.Store(p.At(5), nvshmem.TeamMyPE(k, nvshmem.TeamNode).To(dsl.U64))
		k.Store(p.At(6), nvshmem.TeamTranslatePE(k, nvshmem.TeamNode, 1, nvshmem.TeamWorld).To(dsl.U64))
		k.Store(p.At(7), k.PtrValue(nvshmem.MulticastPtr(k, nvshmem.TeamWorld, p)))
		k.Store(p.At(8), k.PtrValue(nvshmem.MulticastPtr(k, nvshmem.TeamNode, p)))
		k.Store(p.At(9), nvshmem.TeamNPEs(k, nvshmem.TeamWorld).To(dsl.U64))
	})
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := nodeSystem(t, gpus, nodes)
	sym, _ := s.MallocSymmetric(8 * 10)
	if err := s.Launch(emu.Launch{Module: m, Entry: "k", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(32),
		ArgsFor: func(g int) []any { return []any{sym.On(g)} }}); err != nil {
		t.Fatal(err)
	}
	for g := 0; g < gpus; g++ {
		got, err := emu.ReadSlice[uint64](s, sym.On(g), 10)
		if err != nil {
			t.Fatal(err)
		}
		for pe := 0; pe < gpus; pe++ {
			want := uint64(0)
			if pe/2 == g/2 {
				want = sym.On(pe)
			}
			if got[pe] != want {
				t.Errorf("GPU %d: nvshmem_ptr(p, %d) = %#x, want %#x", g, pe, got[pe], want)
			}
		}
		node := uint64(g / 2 * 2)
		if got[4] != 2 || got[5] != uint64(g%2) || got[6] != node+1 {
			t.Errorf("GPU %d: node team n_pes %d my_pe %d, translate(1) = %d; want 2, %d, %d", g, got[4], got[5], got[6], g%2, node+1)
		}
		if got[7] != 0 || got[8] != sym.NodeMulticast() {
			t.Errorf("GPU %d: mc_ptr(world) = %#x (want NULL), mc_ptr(node) = %#x (want %#x)", g, got[7], got[8], sym.NodeMulticast())
		}
		if got[9] != gpus {
			t.Errorf("GPU %d: world n_pes %d", g, got[9])
		}
	}
}

// TestNodeTeamCollectives: a reduction and an fcollect over the node team combine the PEs
// of each node only, while a world reduction spans both nodes.
func TestNodeTeamCollectives(t *testing.T) {
	const gpus, nodes, n = 6, 2, 3 // 2 nodes of 3
	k := dsl.New("k")
	src, dst := k.PtrParam("src", dsl.I32), k.PtrParam("dst", dsl.I32)
	nvshmem.Reduce(k, nvshmem.Block, nvshmem.TeamNode, nvshmem.Sum, nvshmem.SpanOf(dst, n), nvshmem.SpanOf(src, n))
	nvshmem.Fcollect(k, nvshmem.Block, nvshmem.TeamNode, nvshmem.SpanOf(dst.At(n), n), nvshmem.SpanOf(src, n))
	nvshmem.Reduce(k, nvshmem.Block, nvshmem.TeamWorld, nvshmem.Sum, nvshmem.SpanOf(dst.At(4*n), n), nvshmem.SpanOf(src, n))
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := nodeSystem(t, gpus, nodes)
	in, _ := s.MallocSymmetric(4 * n)
	out, _ := s.MallocSymmetric(4 * 5 * n)
	val := func(pe, i int) int32 { return int32(pe*100 + i) }
	for pe := 0; pe < gpus; pe++ {
		emu.WriteSlice(s, in.On(pe), []int32{val(pe, 0), val(pe, 1), val(pe, 2)})
	}
	if err := s.Launch(emu.Launch{Module: m, Entry: "k", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(64),
		ArgsFor: func(g int) []any { return []any{in.On(g), out.On(g)} }}); err != nil {
		t.Fatal(err)
	}
	for pe := 0; pe < gpus; pe++ {
		got, _ := emu.ReadSlice[int32](s, out.On(pe), 5*n)
		first := pe / 3 * 3
		for i := 0; i < n; i++ {
			var node, world int32
			for q := 0; q < gpus; q++ {
				world += val(q, i)
				if q/3 == pe/3 {
					node += val(q, i)
				}
			}
			if got[i] != node || got[4*n+i] != world {
				t.Errorf("PE %d element %d: node sum %d, world sum %d; want %d, %d", pe, i, got[i], got[4*n+i], node, world)
			}
			for j := 0; j < 3; j++ {
				if w := val(first+j, i); got[n+j*n+i] != w {
					t.Errorf("PE %d: fcollect block %d element %d = %d, want %d", pe, j, i, got[n+j*n+i], w)
				}
			}
		}
	}
}
