package jit

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/nvshmem"
	"github.com/kgen-dev/kgen/ptx"
)

// TestRunRanksNodes: 2 nodes x 2 ranks: every rank learns its node, its local rank and its
// node's PEs; peer addresses reach the node only, and multicast the node only.
func TestRunRanksNodes(t *testing.T) {
	err := RunRanks(RanksOptions{Backend: Emulator, World: 4, Nodes: 2, NVSHMEM: true}, func(r *Rank) error {
		if r.Node != r.Rank/2 || r.LocalRank != r.Rank%2 {
			return fmt.Errorf("rank %d: node %d local rank %d, want %d, %d", r.Rank, r.Node, r.LocalRank, r.Rank/2, r.Rank%2)
		}
		if got, want := r.NVSHMEM.NodePEs(), []int{r.Node * 2, r.Node*2 + 1}; !slices.Equal(got, want) {
			return fmt.Errorf("rank %d: NodePEs %v, want %v", r.Rank, got, want)
		}
		buf, err := SymAlloc[float32](r.NVSHMEM, 16)
		if err != nil {
			return err
		}
		for pe := 0; pe < r.World; pe++ {
			p, err := r.NVSHMEM.PeerPtr(buf, pe)
			if pe/2 == r.Node {
				if err != nil || p == 0 {
					return fmt.Errorf("rank %d: PeerPtr(PE %d of its node): %#x, %v", r.Rank, pe, uint64(p), err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), "another node") {
				return fmt.Errorf("rank %d: PeerPtr(PE %d of the other node): %#x, %v; want an error naming the node", r.Rank, pe, uint64(p), err)
			}
		}
		_, err = r.NVSHMEM.MulticastPtr(buf)
		var me *MulticastError
		if !errors.As(err, &me) || !strings.Contains(me.Reason, "span several nodes") {
			return fmt.Errorf("rank %d: MulticastPtr on 2 nodes: %v; want a *MulticastError saying the world spans nodes", r.Rank, err)
		}
		if p, err := r.NVSHMEM.NodeMulticastPtr(buf); err != nil || p == 0 {
			return fmt.Errorf("rank %d: NodeMulticastPtr: %#x, %v", r.Rank, uint64(p), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunRanksOneNode: without Nodes every rank is on node 0 and every pointer works.
func TestRunRanksOneNode(t *testing.T) {
	t.Setenv(EmuNodesEnv, "")
	err := RunRanks(RanksOptions{Backend: Emulator, World: 3, NVSHMEM: true}, func(r *Rank) error {
		if r.Node != 0 || r.LocalRank != r.Rank || len(r.NVSHMEM.NodePEs()) != 3 {
			return fmt.Errorf("rank %d: node %d local %d node PEs %v", r.Rank, r.Node, r.LocalRank, r.NVSHMEM.NodePEs())
		}
		buf, err := SymAlloc[float32](r.NVSHMEM, 4)
		if err != nil {
			return err
		}
		if _, err := r.NVSHMEM.MulticastPtr(buf); err != nil {
			return err
		}
		_, err = r.NVSHMEM.PeerPtr(buf, (r.Rank+1)%3)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunRanksNodesEnv: KGEN_EMU_NODES gives the nodes when RanksOptions.Nodes is 0, and
// a world that does not split evenly is refused naming both numbers.
func TestRunRanksNodesEnv(t *testing.T) {
	t.Setenv(EmuNodesEnv, "3")
	err := RunRanks(RanksOptions{Backend: Emulator, World: 6}, func(r *Rank) error {
		if r.Node != r.Rank/2 || r.LocalRank != r.Rank%2 {
			return fmt.Errorf("rank %d: node %d local %d", r.Rank, r.Node, r.LocalRank)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = RunRanks(RanksOptions{Backend: Emulator, World: 6, Nodes: 4}, func(*Rank) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "6 ranks") || !strings.Contains(err.Error(), "4 nodes") {
		t.Errorf("6 ranks on 4 nodes: %v", err)
	}
	t.Setenv(EmuNodesEnv, "two")
	if err := RunRanks(RanksOptions{Backend: Emulator, World: 2}, func(*Rank) error { return nil }); err == nil || !strings.Contains(err.Error(), EmuNodesEnv) {
		t.Errorf("%s=two: %v", EmuNodesEnv, err)
	}
}

// remoteKernel does op (a plain store, load or atomic) on p[0] from thread 0.
func remoteKernel(t *testing.T, op string) (*ptx.Module, int) {
	k := dsl.New("remote_"+op, dsl.WithTarget(ptx.SM90))
	p := k.PtrParam("p", dsl.U32)
	out := k.PtrParam("out", dsl.U32)
	_, _, line, _ := runtime.Caller(0)
	k.If(k.ThreadIdx(dsl.X).Eq(uint32(0)), func() {
		switch op {
		case "store":
			k.Store(p.At(0), uint32(7)) // line+4
		case "load":
			k.Store(out.At(0), k.Load(p.At(0))) // line+6
		default:
			k.Atomic(dsl.AtomAdd, p.At(0), uint32(1)) // line+8
		}
	})
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m, line + map[string]int{"store": 4, "load": 6, "atomic": 8}[op]
}

// TestRemoteNodeAccess: on 2 nodes x 2 ranks, each rank dereferences the symmetric buffer of
// the next rank through an address it was handed on the host (not nvshmem_ptr): rank 1
// reaches into rank 2, on the other node, and the emulator reports the executing GPU, the
// target GPU and both nodes, and the Go line of the access.
func TestRemoteNodeAccess(t *testing.T) {
	for _, op := range []string{"store", "load", "atomic"} {
		t.Run(op, func(t *testing.T) {
			mod, line := remoteKernel(t, op)
			addrs := make([]DevicePtr, 4)
			var mu sync.Mutex
			err := RunRanks(RanksOptions{Backend: Emulator, World: 4, Nodes: 2, NVSHMEM: true}, func(r *Rank) error {
				m, err := r.Device.Load(Source{Module: mod})
				if err != nil {
					return err
				}
				fn, err := m.Function(mod.Funcs[0].Name)
				if err != nil {
					return err
				}
				buf, err := SymAlloc[uint32](r.NVSHMEM, 4)
				if err != nil {
					return err
				}
				mu.Lock()
				addrs[r.Rank] = buf.DevPtr()
				mu.Unlock()
				if err := r.NVSHMEM.BarrierAll(); err != nil { // every address is known
					return err
				}
				mu.Lock()
				next := addrs[(r.Rank+1)%r.World]
				mu.Unlock()
				if r.Rank == 3 {
					next = buf.DevPtr() // only rank 1 crosses to the other node
				}
				return fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32)}, next, buf.DevPtr())
			})
			var ee *emu.Error
			if !errors.As(err, &ee) {
				t.Fatalf("got %v, want an emulator error", err)
			}
			msg := err.Error()
			t.Log(msg)
			for _, want := range []string{"GPU 1 (node 0)", "GPU 2 (node 1)", fmt.Sprintf("topology_test.go:%d", line)} {
				if !strings.Contains(msg, want) {
					t.Errorf("error does not name %q: %v", want, err)
				}
			}
			if ee.Kind != emu.KindRemoteNode || ee.GPU != 1 {
				t.Errorf("kind %q on GPU %d, want %q on GPU 1", ee.Kind, ee.GPU, emu.KindRemoteNode)
			}
			var re *RankError
			if !errors.As(err, &re) || re.Rank != 1 {
				t.Errorf("the failure is not rank 1's: %v", err)
			}
		})
	}
}

// ringSignalKernel: every PE puts n floats of src into dst on the next PE with a block-scope
// put_signal_nbi, waits for its own signal, then quiets.
func ringSignalKernel(t *testing.T) *ptx.Module {
	k := dsl.New("ring_signal", dsl.WithTarget(ptx.SM90))
	dst, src := k.PtrParam("dst", dsl.F32), k.PtrParam("src", dsl.F32)
	sig := k.PtrParam("sig", dsl.U64)
	n := k.Param("n", dsl.U32)
	epoch := k.Param("epoch", dsl.U64)
	me, np := nvshmem.MyPE(k), nvshmem.NPEs(k)
	nvshmem.PutSignalNBI(k, nvshmem.Block, nvshmem.SpanOf(dst, n), nvshmem.SpanOf(src, n), sig, uint64(1), nvshmem.SignalAdd, me.Add(1).Rem(np))
	k.If(k.ThreadIdx(dsl.X).Eq(uint32(0)), func() { nvshmem.SignalWaitUntil(k, sig, nvshmem.CmpGE, epoch) })
	k.SyncThreads()
	k.If(k.ThreadIdx(dsl.X).Eq(uint32(0)), func() { nvshmem.Quiet(k) })
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRunRanksNodesRing: a put_signal ring over 2 nodes x 2 ranks (two links between the
// nodes) delivers every part, in strict and weak mode and under a random schedule, with the
// network from RanksOptions or from KGEN_EMU_NETWORK; the logical clock shows the latency.
func TestRunRanksNodesRing(t *testing.T) {
	mod := ringSignalKernel(t)
	slow := &emu.Network{Latency: 50 * time.Microsecond, BytesPerSecond: 1e9}
	for _, tc := range []struct {
		name string
		net  *emu.Network
		env  string
		opt  emu.Options
	}{
		{"strict", slow, "", emu.Options{}},
		{"weak", nil, "50us,1e9", emu.Options{Weak: true, Seed: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EmuNetworkEnv, tc.env)
			const n = 333
			err := RunRanks(RanksOptions{Backend: Emulator, World: 4, Nodes: 2, NVSHMEM: true, Network: tc.net,
				Open: []Option{WithEmuOptions(tc.opt)}}, func(r *Rank) error {
				m, err := r.Device.Load(Source{Module: mod})
				if err != nil {
					return err
				}
				fn, err := m.Function("ring_signal")
				if err != nil {
					return err
				}
				dst, err := SymAlloc[float32](r.NVSHMEM, n)
				if err != nil {
					return err
				}
				src, err := SymAlloc[float32](r.NVSHMEM, n)
				if err != nil {
					return err
				}
				sig, err := SymAlloc[uint64](r.NVSHMEM, 1)
				if err != nil {
					return err
				}
				if err := r.NVSHMEM.BarrierAll(); err != nil {
					return err
				}
				prev := (r.Rank + r.World - 1) % r.World
				vals := make([]float32, n)
				for epoch := 1; epoch <= 2; epoch++ {
					for i := range vals {
						vals[i] = float32(epoch*10000 + r.Rank*1000 + i)
					}
					if err := src.CopyFromHost(vals); err != nil {
						return err
					}
					if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(128)}, dst, src, sig, uint32(n), uint64(epoch)); err != nil {
						return err
					}
					if err := dst.CopyToHost(vals); err != nil {
						return err
					}
					for i, v := range vals {
						if want := float32(epoch*10000 + prev*1000 + i); v != want {
							return fmt.Errorf("rank %d launch %d: dst[%d] = %v, want %v", r.Rank, epoch, i, v, want)
						}
					}
					// The ranks' streams run on their own: without this barrier the previous
					// rank's next launch may overwrite dst before this rank has read it.
					if err := r.NVSHMEM.BarrierAll(); err != nil {
						return err
					}
				}
				if r.Rank == 0 {
					m := r.Device.impl.(*emuDevice).m
					m.mu.Lock()
					now := m.sys.Now()
					m.mu.Unlock()
					if min := int64(2 * 50 * time.Microsecond / emu.StepTime); now < min {
						return fmt.Errorf("the clock reads %d steps after two launches over a 50 us network, want >= %d", now, min)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Setenv(EmuNetworkEnv, "fast")
	if err := RunRanks(RanksOptions{Backend: Emulator, World: 2, Nodes: 2}, func(*Rank) error { return nil }); err == nil || !strings.Contains(err.Error(), EmuNetworkEnv) {
		t.Errorf("%s=fast: %v", EmuNetworkEnv, err)
	}
}

// TestNodeMulticast: on 2 nodes x 2 ranks, multimem.red through NodeMulticastPtr adds into
// the copies of the rank's node only; the world's multicast address of the same buffer
// (taken from a one-node view, as a stale pointer would be) is refused by the emulator with
// the Go line.
func TestNodeMulticast(t *testing.T) {
	k := dsl.New("mm_add", dsl.WithTarget(ptx.SM90))
	p := k.PtrParam("p", dsl.U32)
	_, _, line, _ := runtime.Caller(0)
	k.If(k.ThreadIdx(dsl.X).Eq(uint32(0)), func() {
		k.MultimemReduce(p, dsl.Sum, []dsl.Value{k.Const(dsl.U32, 1)}) // line+2
	})
	mod, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, world := range []bool{false, true} {
		err := RunRanks(RanksOptions{Backend: Emulator, World: 4, Nodes: 2, NVSHMEM: true}, func(r *Rank) error {
			m, err := r.Device.Load(Source{Module: mod})
			if err != nil {
				return err
			}
			fn, err := m.Function("mm_add")
			if err != nil {
				return err
			}
			buf, err := SymAlloc[uint32](r.NVSHMEM, 1)
			if err != nil {
				return err
			}
			mc, err := r.NVSHMEM.NodeMulticastPtr(buf)
			if err != nil {
				return err
			}
			if world {
				em := r.Device.impl.(*emuDevice).m
				em.mu.Lock()
				w, err := em.sys.MulticastOf(uint64(mc))
				em.mu.Unlock()
				if err != nil {
					return err
				}
				mc = DevicePtr(w)
			}
			if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32)}, mc); err != nil {
				return err
			}
			// Every rank's add has landed only after a barrier (the ranks' streams run on
			// their own).
			if err := r.NVSHMEM.BarrierAll(); err != nil {
				return err
			}
			got := make([]uint32, 1)
			if err := buf.CopyToHost(got); err != nil {
				return err
			}
			if got[0] != 2 {
				return fmt.Errorf("rank %d: %d adds reached its copy, want its node's 2", r.Rank, got[0])
			}
			return nil
		})
		if !world {
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		var ee *emu.Error
		if !errors.As(err, &ee) || ee.Kind != emu.KindMulticast || !strings.Contains(err.Error(), "span 2 nodes") ||
			!strings.Contains(err.Error(), fmt.Sprintf("topology_test.go:%d", line+2)) {
			t.Errorf("multimem on the world's multicast address over 2 nodes: %v", err)
		}
	}
}

// TestGPUNode: a GPU rank's node comes from GROUP_RANK, else RANK/LOCAL_WORLD_SIZE; a
// RanksOptions.Nodes that disagrees with WORLD_SIZE/LOCAL_WORLD_SIZE is an error.
func TestGPUNode(t *testing.T) {
	for _, c := range []struct {
		group, local string
		nodes, rank  int
		want         int
		err          string
	}{
		{"", "", 0, 5, 0, ""},
		{"", "4", 0, 5, 1, ""},
		{"3", "4", 0, 5, 3, ""},
		{"", "4", 2, 7, 1, ""},
		{"", "4", 4, 7, 0, "wants 4 nodes"},
		{"", "x", 0, 1, 0, "LOCAL_WORLD_SIZE"},
		{"-1", "4", 0, 1, 0, "GROUP_RANK"},
	} {
		t.Setenv("GROUP_RANK", c.group)
		t.Setenv("LOCAL_WORLD_SIZE", c.local)
		got, err := gpuNode(c.nodes, Rendezvous{Rank: c.rank, WorldSize: 8})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: %d, %v; want an error naming %q", c, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%+v: node %d, %v; want %d", c, got, err, c.want)
		}
	}
}
