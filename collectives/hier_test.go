package collectives

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// acrossTopologies are the topologies (nodes x GPUs per node) the collectives run on
// across nodes, with a memory model and schedule each; 1x8 is the single-node path.
var acrossTopologies = []struct {
	nodes, local int
	weak         bool
	seed         int64
}{
	{2, 2, true, 1}, {2, 4, false, 0}, {3, 2, true, 2}, {4, 2, false, 3}, {1, 8, true, 4},
}

// runAcross runs f on every rank of an emulator of nodes nodes of local GPUs.
func runAcross(t *testing.T, nodes, local int, weak bool, seed int64, o Options, f func(e *rankEnv) error) {
	t.Helper()
	if err := runNodesErr(nodes*local, nodes, false, weak, seed, o, f); err != nil {
		t.Fatal(err)
	}
}

// wantAlgorithm is the kernel the cost model's choice for coll of bytes on the Comm's
// topology names (the hierarchical kernels here: the default model chooses them on every
// topology of acrossTopologies, which the test checks).
func wantAlgorithm(t *testing.T, c *Comm, coll Collective, bytes int, hier string) string {
	a, _ := c.cost.Choose(coll, c.Topology(), int64(bytes))
	switch {
	case c.Topology().Nodes == 1 && a == AlgFlat:
		return ""
	case c.Topology().Nodes > 1 && a == AlgHierarchical:
		return hier
	}
	t.Errorf("the cost model chose %q for %s of %d bytes on %v; the test expects flat on one node and hierarchical across nodes", a, coll, bytes, c.Topology())
	return hier
}

// TestCollectivesAcrossNodes runs AllReduce (out of place and in place), ReduceScatter and
// AllGather for every dtype and op on 2x2, 2x4, 3x2, 4x2 and 1x8, at odd sizes, in the strict
// and the weak memory model, against the Go reference; the kernel each call runs is the
// one the cost model chooses (and the one AllReduceAlgorithm etc. report).
func TestCollectivesAcrossNodes(t *testing.T) {
	ctx := context.Background()
	for _, tp := range acrossTopologies {
		for _, dt := range DTypes() {
			t.Run(fmt.Sprintf("%dx%d/%s", tp.nodes, tp.local, dt), func(t *testing.T) {
				t.Parallel()
				runAcross(t, tp.nodes, tp.local, tp.weak, tp.seed, testOpts, func(e *rankEnv) error {
					c, g := e.c, e.c.NumGPUs()
					if got := c.Topology(); got != (Topology{Nodes: tp.nodes, GPUsPerNode: tp.local}) {
						return fmt.Errorf("Topology() = %v, want %dx%d", got, tp.nodes, tp.local)
					}
					if node, local := c.NodeRank(); node != c.Rank()/tp.local || local != c.Rank()%tp.local {
						return fmt.Errorf("rank %d: NodeRank() = %d, %d", c.Rank(), node, local)
					}
					check := func(what, ran, reported, hier string, coll Collective, bytes int) error {
						want := wantAlgorithm(t, c, coll, bytes, hier)
						if want == "" {
							want = reported // one node: the flat choice, as AllReduceAlgorithm says
						}
						if ran != want || reported != want {
							return fmt.Errorf("%s: ran %q, the Comm reports %q, the cost model chose %q", what, ran, reported, want)
						}
						return nil
					}
					for _, n := range []int{7, 301} {
						a, err := c.Alloc(dt, n)
						if err != nil {
							return err
						}
						b, err := c.Alloc(dt, n)
						if err != nil {
							return err
						}
						for call, op := range []Op{Sum, Max, Min} {
							in, err := e.fill(a)
							if err != nil {
								return err
							}
							dst := b
							if call%2 == 1 {
								dst = a
							}
							if err := c.AllReduceTo(ctx, dst, a, op); err != nil {
								return err
							}
							what := fmt.Sprintf("AllReduce n=%d %s call %d", n, kernels.OpName(op), call)
							if err := e.expect(what, dst, func(_, i int) float64 { return reduce(op, dt, in, i) }); err != nil {
								return err
							}
							if err := check(what, c.LastAlgorithm(), c.AllReduceAlgorithm(dt, op, n), "hier_allreduce_"+kernels.OpName(op), AllReduceCollective, n*dt.Bytes()); err != nil {
								return err
							}
						}
						src, err := c.Alloc(dt, n*g)
						if err != nil {
							return err
						}
						for _, op := range []Op{Sum, Max, Min} {
							in, err := e.fill(src)
							if err != nil {
								return err
							}
							if err := c.ReduceScatter(ctx, b, src, op); err != nil {
								return err
							}
							what := fmt.Sprintf("ReduceScatter m=%d %s", n, kernels.OpName(op))
							if err := e.expect(what, b, func(r, i int) float64 { return reduce(op, dt, in, r*n+i) }); err != nil {
								return err
							}
							if err := check(what, c.LastAlgorithm(), c.ReduceScatterAlgorithm(dt, op, n), "hier_reducescatter_"+kernels.OpName(op), ReduceScatterCollective, g*n*dt.Bytes()); err != nil {
								return err
							}
						}
						for call := 0; call < 2; call++ {
							in, err := e.fill(a)
							if err != nil {
								return err
							}
							if err := c.AllGather(ctx, src, a); err != nil {
								return err
							}
							what := fmt.Sprintf("AllGather n=%d call %d", n, call)
							if err := e.expect(what, src, func(_, i int) float64 { return in[i/n][i%n] }); err != nil {
								return err
							}
							if err := check(what, c.LastAlgorithm(), c.AllGatherAlgorithm(dt, n), "hier_allgather", AllGatherCollective, g*n*dt.Bytes()); err != nil {
								return err
							}
						}
					}
					return nil
				})
			})
		}
	}
}

// TestAlgorithmOption runs the collectives with Options.Algorithm: the NVSHMEM rings on 2x2
// (the cost model never chooses them: docs/collectives.md "Cost model"), except for an
// all-reduce whose size does not split into whole parts, which runs hierarchical and says
// why in the debug log; the hierarchical kernels on one node of 4.
func TestAlgorithmOption(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		nodes, local int
		alg          Algorithm
		ar, rs, ag   string // the kernels for whole parts
	}{
		{2, 2, AlgNVSHMEMRing, "nvshmem_reducescatter_ring_sum+nvshmem_allgather_ring", "nvshmem_reducescatter_ring_max", "nvshmem_allgather_ring"},
		{1, 4, AlgHierarchical, "hier_allreduce_sum", "hier_reducescatter_max", "hier_allgather"},
	} {
		t.Run(fmt.Sprintf("%dx%d/%s", tc.nodes, tc.local, tc.alg), func(t *testing.T) {
			o := testOpts
			o.Algorithm = tc.alg
			runAcross(t, tc.nodes, tc.local, true, 5, o, func(e *rankEnv) error {
				c, g := e.c, e.c.NumGPUs()
				for _, n := range []int{8, 7} {
					a, err := c.Alloc(dsl.F32, n)
					if err != nil {
						return err
					}
					in, err := e.fill(a)
					if err != nil {
						return err
					}
					if err := c.AllReduce(ctx, a, Sum); err != nil {
						return err
					}
					if err := e.expect(fmt.Sprintf("AllReduce n=%d", n), a, func(_, i int) float64 { return reduce(Sum, dsl.F32, in, i) }); err != nil {
						return err
					}
					want := tc.ar
					if tc.alg == AlgNVSHMEMRing && n%g != 0 {
						want = "hier_allreduce_sum"
						if !strings.Contains(e.log.String(), "whole parts") {
							return fmt.Errorf("no debug log says why the ring did not run:\n%s", e.log)
						}
					}
					if got := c.LastAlgorithm(); got != want || c.AllReduceAlgorithm(dsl.F32, Sum, n) != want {
						return fmt.Errorf("AllReduce n=%d ran %q (reports %q), want %q", n, got, c.AllReduceAlgorithm(dsl.F32, Sum, n), want)
					}
					src, err := c.Alloc(dsl.F32, n*g)
					if err != nil {
						return err
					}
					if in, err = e.fill(src); err != nil {
						return err
					}
					if err := c.ReduceScatter(ctx, a, src, Max); err != nil {
						return err
					}
					if err := e.expect("ReduceScatter", a, func(r, i int) float64 { return reduce(Max, dsl.F32, in, r*n+i) }); err != nil {
						return err
					}
					if got := c.LastAlgorithm(); got != tc.rs || c.ReduceScatterAlgorithm(dsl.F32, Max, n) != tc.rs {
						return fmt.Errorf("ReduceScatter ran %q, want %q", got, tc.rs)
					}
					if in, err = e.fill(a); err != nil {
						return err
					}
					if err := c.AllGather(ctx, src, a); err != nil {
						return err
					}
					if err := e.expect("AllGather", src, func(_, i int) float64 { return in[i/n][i%n] }); err != nil {
						return err
					}
					if got := c.LastAlgorithm(); got != tc.ag || c.AllGatherAlgorithm(dsl.F32, n) != tc.ag {
						return fmt.Errorf("AllGather ran %q, want %q", got, tc.ag)
					}
				}
				return nil
			})
		})
	}
}

// TestFlatRefusedAcrossNodes asks a 2x2 Comm for a flat peer-to-peer kernel (the two-shot
// all-reduce, and Broadcast, which has only flat kernels): both are refused with an error
// naming the ranks out of reach, and AllReduce picks the hierarchical kernel; with
// Options.Algorithm flat, AllReduce, ReduceScatter and AllGather are refused likewise.
func TestFlatRefusedAcrossNodes(t *testing.T) {
	ctx := context.Background()
	flat := testOpts
	flat.Algorithm = AlgFlat
	runAcross(t, 2, 2, false, 0, flat, func(e *rankEnv) error {
		c := e.c
		a, err := c.Alloc(dsl.F32, 6)
		if err != nil {
			return err
		}
		all, err := c.Alloc(dsl.F32, 24)
		if err != nil {
			return err
		}
		want := fmt.Sprintf("ranks 2-3 are on other nodes than rank %d", c.Rank())
		if c.Rank() >= 2 {
			want = fmt.Sprintf("ranks 0-1 are on other nodes than rank %d", c.Rank())
		}
		for what, err := range map[string]error{"AllReduce": c.AllReduce(ctx, a, Sum), "ReduceScatter": c.ReduceScatter(ctx, a, all, Sum), "AllGather": c.AllGather(ctx, all, a)} {
			if err == nil || !strings.Contains(err.Error(), want) {
				return fmt.Errorf("%s with Options.Algorithm flat on 2x2: error %v, want one naming %q", what, err, want)
			}
		}
		if got := c.AllReduceAlgorithm(dsl.F32, Sum, 6); got != "" {
			return fmt.Errorf("AllReduceAlgorithm with Options.Algorithm flat on 2x2 = %q, want none", got)
		}
		return nil
	})
	runAcross(t, 2, 2, false, 0, testOpts, func(e *rankEnv) error {
		c := e.c
		b, err := c.Alloc(dsl.F32, 64)
		if err != nil {
			return err
		}
		want := fmt.Sprintf("ranks 2-3 are on other nodes than rank %d", c.Rank())
		if c.Rank() >= 2 {
			want = fmt.Sprintf("ranks 0-1 are on other nodes than rank %d", c.Rank())
		}
		cl := &call{what: "AllReduce", dt: dsl.F32, n: 64, op: Sum, reduces: true, root: -1}
		err = c.allReduce(ctx, cl, reduction(kernels.FamilyP2PAllReduce2Shot, Sum, dsl.F32), b, b)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "p2p_allreduce_2shot") {
			return fmt.Errorf("the flat two-shot kernel on 2x2: error %v, want one naming the kernel and %q", err, want)
		}
		err = c.Broadcast(ctx, b, b, 0)
		if err == nil || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("Broadcast on 2x2: error %v, want one naming %q", err, want)
		}
		if err := c.AllReduce(ctx, b, Sum); err != nil {
			return err
		}
		if got := c.LastAlgorithm(); got != "hier_allreduce_sum" {
			return fmt.Errorf("AllReduce on 2x2 ran %q, want hier_allreduce_sum", got)
		}
		if !strings.Contains(e.log.String(), "topology=2x2") || !strings.Contains(e.log.String(), "remote_ranks") {
			return fmt.Errorf("the log does not state the topology:\n%s", e.log)
		}
		return nil
	})
}

// TestNodeOf checks the topology a rank derives from the ranks it reaches, and the errors
// for groups that are not aligned runs of consecutive ranks, naming the odd ranks.
func TestNodeOf(t *testing.T) {
	span := func(from, to int) []int { return seq(from, to-from+1) }
	for _, c := range []struct {
		rank, world int
		reach, miss []int
		want        string // the node, or a part of the error
	}{
		{5, 8, span(4, 7), span(0, 3), "2x4 node 1 local 1 remote 0-3"},
		{0, 8, span(0, 7), nil, "1x8 node 0 local 0 remote none"},
		{4, 6, span(4, 5), span(0, 3), "3x2 node 2 local 0 remote 0-3"},
		{2, 4, []int{2}, []int{0, 1, 3}, "4x1 node 2 local 0 remote 0-1, 3"},
		{5, 8, []int{4, 5, 6}, []int{0, 1, 2, 3, 7}, "rank 5 reaches ranks 4-6 by peer pointers (nvshmem_ptr), not an aligned group of consecutive ranks splitting the 8 ranks evenly (it would be ranks 3-5); ranks out of reach: 0-3, 7"},
		{1, 8, []int{1, 2}, []int{0, 3, 4, 5, 6, 7}, "rank 1 reaches ranks 1-2 by peer pointers (nvshmem_ptr), not an aligned group of consecutive ranks splitting the 8 ranks evenly (it would be ranks 0-1); ranks out of reach: 0, 3-7"},
		{0, 8, []int{0, 2, 4, 6}, []int{1, 3, 5, 7}, "rank 0 reaches ranks 0, 2, 4, 6"},
		{8, 16, span(8, 16-1), span(0, 7), "2x8 node 1 local 0 remote 0-7"},
		{0, 18, span(0, 8), span(9, 17), "9 GPUs share rank 0's NVLink domain: the kernels handle 1 to 8 per node"},
		{0, 33, []int{0}, span(1, 32), "33 nodes of 1 GPUs: the hierarchical kernels handle at most 32 nodes"},
	} {
		n, err := nodeOf(c.rank, c.world, c.reach, c.miss)
		got := fmt.Sprintf("%v node %d local %d remote %s", n.topo, n.index, n.local, rankList(n.remote))
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("rank %d of %d reaching %v: got %q, want %q", c.rank, c.world, c.reach, got, c.want)
		}
	}
}

// TestChoiceFollowsCostModel checks, without launching, the kernel AllReduceAlgorithm,
// ReduceScatterAlgorithm and AllGatherAlgorithm name for sizes from 1 element to 2^26 on
// each topology against the cost model's choice: flat on one node (the size rules then pick
// the kernel), the hierarchical kernels for hierarchical, the rings for nvshmem_ring. (A
// model that chooses nothing, such as a network of zero bandwidth, is refused by New:
// TestNewRefusesInvalidCostModel.)
func TestChoiceFollowsCostModel(t *testing.T) {
	h100 := H100CostModel()
	for _, tp := range acrossTopologies {
		for _, m := range []*CostModel{nil, &h100} {
			o := testOpts
			o.CostModel = m
			runAcross(t, tp.nodes, tp.local, false, 0, o, func(e *rankEnv) error {
				c, g := e.c, e.c.NumGPUs()
				for n := 1; n <= 1<<26; n *= 4 {
					for _, dt := range []dsl.Type{dsl.F32, dsl.BF16} {
						b := n * dt.Bytes()
						for _, x := range []struct {
							coll  Collective
							bytes int
							got   string
							hier  string
							ring  string
						}{
							{AllReduceCollective, b, c.AllReduceAlgorithm(dt, Sum, n), "hier_allreduce_sum", "nvshmem_reducescatter_ring_sum+nvshmem_allgather_ring"},
							{ReduceScatterCollective, g * b, c.ReduceScatterAlgorithm(dt, Sum, n), "hier_reducescatter_sum", "nvshmem_reducescatter_ring_sum"},
							{AllGatherCollective, g * b, c.AllGatherAlgorithm(dt, n), "hier_allgather", "nvshmem_allgather_ring"},
						} {
							a, _ := c.cost.Choose(x.coll, c.Topology(), int64(x.bytes))
							want := x.hier
							switch {
							case c.Topology().Nodes == 1:
								if a != AlgFlat || strings.HasPrefix(x.got, "hier_") || strings.HasPrefix(x.got, "nvshmem_") || x.got == "" {
									return fmt.Errorf("%v %s of %d %s: the model chose %q, the Comm %q; want flat kernels", c.Topology(), x.coll, n, dt, a, x.got)
								}
								continue
							case a == AlgNVSHMEMRing && (x.coll != AllReduceCollective || n%g == 0) && (x.coll == AllGatherCollective || g <= kernels.CollMaxGPUs):
								want = x.ring
							}
							if x.got != want {
								return fmt.Errorf("%v %s of %d %s: the model chose %q, the Comm %q; want %q", c.Topology(), x.coll, n, dt, a, x.got, want)
							}
						}
					}
				}
				return nil
			})
		}
	}
}

// TestBarrierAcrossNodes runs Barrier on 2x2 and 3x2 (hier_allgather of one word per rank)
// between all-reduces on one Comm: the barriers and the all-reduces share the pads' and the
// rail signals' epochs, and the all-reduces stay right.
func TestBarrierAcrossNodes(t *testing.T) {
	ctx := context.Background()
	for _, tp := range [][2]int{{2, 2}, {3, 2}} {
		runAcross(t, tp[0], tp[1], true, 3, testOpts, func(e *rankEnv) error {
			c := e.c
			b, err := c.Alloc(dsl.F32, 37)
			if err != nil {
				return err
			}
			for call := 0; call < 3; call++ {
				if err := c.Barrier(ctx); err != nil {
					return err
				}
				if got := c.LastAlgorithm(); got != "hier_allgather" {
					return fmt.Errorf("Barrier on %v ran %q, want hier_allgather", c.Topology(), got)
				}
				in, err := e.fill(b)
				if err != nil {
					return err
				}
				if err := c.AllReduce(ctx, b, Sum); err != nil {
					return err
				}
				if err := e.expect(fmt.Sprintf("AllReduce after Barrier %d", call), b, func(_, i int) float64 { return reduce(Sum, dsl.F32, in, i) }); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// TestNewRefusesInvalidCostModel: an Options.CostModel with a NaN, zero, infinite or
// negative number is an error at New naming the field, not a model that prices nothing and
// silently runs the hierarchical algorithms.
func TestNewRefusesInvalidCostModel(t *testing.T) {
	bad := map[string]func(m *CostModel){
		"NVLink.Bandwidth: NaN":     func(m *CostModel) { m.NVLink.Bandwidth = math.NaN() },
		"Network.Bandwidth: 0":      func(m *CostModel) { m.Network.Bandwidth = 0 },
		"Multicast.Bandwidth: +Inf": func(m *CostModel) { m.Multicast.Bandwidth = math.Inf(1) },
		"Network.Latency: -1ns":     func(m *CostModel) { m.Network.Latency = -1 },
		"Launch: -1ns":              func(m *CostModel) { m.Launch = -1 },
	}
	err := jit.RunRanks(jit.RanksOptions{Backend: jit.Emulator, World: 2, NVSHMEM: true}, func(r *jit.Rank) error {
		for want, spoil := range bad {
			m := H100CostModel()
			spoil(&m)
			c, err := New(context.Background(), r, Options{CostModel: &m})
			if err == nil {
				c.Close()
				return fmt.Errorf("CostModel with %s accepted", want)
			}
			if !strings.Contains(err.Error(), "Options.CostModel field "+want) {
				return fmt.Errorf("CostModel with %s: %v", want, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
