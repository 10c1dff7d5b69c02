package dsl_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// clusterKernel stores every cluster index and size of block b at out[16*b:].
func clusterKernel(k *dsl.Kernel) {
	out := k.PtrParam("out", dsl.U32)
	base := k.BlockIdx(dsl.X).Mul(16)
	vals := []dsl.Value{}
	for _, a := range []dsl.Axis{dsl.X, dsl.Y, dsl.Z} {
		vals = append(vals, k.ClusterIdx(a), k.ClusterGridDim(a), k.BlockIdxInCluster(a), k.ClusterDim(a))
	}
	vals = append(vals, k.BlockRankInCluster(), k.ClusterSize(), k.Select(k.IsExplicitCluster(), k.Const(dsl.U32, 1), uint32(0)))
	k.If(k.ThreadIdx(dsl.X).Eq(0), func() {
		for i, v := range vals {
			k.Store(out.At(base.Add(uint32(i))), v)
		}
	})
}

func TestClusterIndices(t *testing.T) {
	for _, target := range []ptx.Target{ptx.SM90, ptx.SM100a} {
		t.Run(string(target), func(t *testing.T) {
			s := build(t, target, clusterKernel)
			for _, r := range []string{"%clusterid.x", "%nclusterid.y", "%cluster_ctaid.z", "%cluster_nctaid.x",
				"%cluster_ctarank", "%cluster_nctarank", "%is_explicit_cluster"} {
				if !strings.Contains(s, r) {
					t.Errorf("no %s", r)
				}
			}
		})
	}
}

// TestClusterIndicesOnEmulator: launched without clusters, every block is a cluster of one.
func TestClusterIndicesOnEmulator(t *testing.T) {
	k := dsl.New("clusters")
	clusterKernel(k)
	m, sys := onOneGPU(t, k)
	const blocks = 3
	buf, _ := sys.Malloc(0, 4*16*blocks)
	if err := sys.Launch(emu.Launch{Module: m, Entry: "clusters", Grid: emu.D1(blocks), Block: emu.D1(32), Args: []any{buf}}); err != nil {
		t.Fatal(err)
	}
	got, _ := emu.ReadSlice[uint32](sys, buf, 16*blocks)
	for b := uint32(0); b < blocks; b++ {
		//          clusterid, nclusterid, cluster_ctaid, cluster_nctaid per axis; rank, size, explicit
		want := []uint32{b, blocks, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0}
		if g := got[16*b : 16*b+16]; fmt.Sprint(g) != fmt.Sprint(want) {
			t.Errorf("block %d: got %v, want %v", b, g, want)
		}
	}
}

// callLine returns the line it is called from.
func callLine() int {
	_, _, l, _ := runtime.Caller(1)
	return l
}

// TestClusterNeedsSM90 checks that each cluster register on sm_80 is a Build error at the
// caller's line naming the rule, and that ptx.Verify holds the same rule underneath.
func TestClusterNeedsSM90(t *testing.T) {
	cases := []struct {
		reg string
		f   func(k *dsl.Kernel) (dsl.Value, int) // the value and the line that asked for it
	}{
		{"%clusterid", func(k *dsl.Kernel) (dsl.Value, int) { return k.ClusterIdx(dsl.X), callLine() }},
		{"%nclusterid", func(k *dsl.Kernel) (dsl.Value, int) { return k.ClusterGridDim(dsl.Y), callLine() }},
		{"%cluster_ctaid", func(k *dsl.Kernel) (dsl.Value, int) { return k.BlockIdxInCluster(dsl.Z), callLine() }},
		{"%cluster_nctaid", func(k *dsl.Kernel) (dsl.Value, int) { return k.ClusterDim(dsl.X), callLine() }},
		{"%cluster_ctarank", func(k *dsl.Kernel) (dsl.Value, int) { return k.BlockRankInCluster(), callLine() }},
		{"%cluster_nctarank", func(k *dsl.Kernel) (dsl.Value, int) { return k.ClusterSize(), callLine() }},
		{"%is_explicit_cluster", func(k *dsl.Kernel) (dsl.Value, int) { return k.IsExplicitCluster(), callLine() }},
	}
	for _, c := range cases {
		t.Run(c.reg, func(t *testing.T) {
			k := dsl.New("k", dsl.WithTarget(ptx.SM80))
			_, ln := c.f(k)
			_, err := k.Build()
			loc := fmt.Sprintf("dsl/cluster_test.go:%d: ", ln)
			want := c.reg + " needs sm_90 or later (target is sm_80)"
			if err == nil || !strings.Contains(err.Error(), loc) || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v\nwant %q at %q", err, want, loc)
			}

			// The PTX layer rejects the same module retargeted to sm_80.
			k = dsl.New("k", dsl.WithTarget(ptx.SM90))
			p := k.PtrParam("p", dsl.U32)
			v, _ := c.f(k)
			if v.Type() == dsl.Bool {
				v = k.Select(v, k.Const(dsl.U32, 1), uint32(0))
			}
			k.Store(p, v)
			m, err := k.Build()
			if err != nil {
				t.Fatal(err)
			}
			m.Target = ptx.SM80
			if err := ptx.Verify(m); err == nil || !strings.Contains(err.Error(), "needs sm_90") {
				t.Fatalf("ptx.Verify on sm_80: %v", err)
			}
		})
	}
}
