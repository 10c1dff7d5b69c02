package shmemu_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/nvshmem"
	"github.com/kgen-dev/kgen/nvshmem/shmemu"
)

// TestPutSignalAcrossNodes: PE 0 sends parts slots of m words to PE 1 on the other node
// with put_signal (thread scope) or put_signal_nbi (block scope), one signal increment each,
// then quiets. PE 1 first looks at the signal and the first slot before anything can have
// arrived (the network delays it), then waits for each signal value in turn and checks the
// slot it announces: the data is never visible after its signal without being complete.
func TestPutSignalAcrossNodes(t *testing.T) {
	const parts, m = 4, 100
	for _, tc := range []struct {
		name  string
		scope nvshmem.Scope
		put   func(k *dsl.Kernel, s nvshmem.Scope, dst, src, sig, val any, sop nvshmem.SignalOp, pe any)
	}{
		{"put_signal/thread", nvshmem.Thread, nvshmem.PutSignal},
		{"put_signal_nbi/block", nvshmem.Block, nvshmem.PutSignalNBI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := dsl.New("k")
			data, src := k.PtrParam("data", dsl.U32), k.PtrParam("src", dsl.U32)
			sig, out := k.PtrParam("sig", dsl.U64), k.PtrParam("out", dsl.U32)
			me := nvshmem.MyPE(k)
			t0 := k.ThreadIdx(dsl.X).Eq(0)
			k.If(me.Eq(0), func() {
				for i := 0; i < parts; i++ {
					put := func() {
						tc.put(k, tc.scope, nvshmem.SpanOf(data.At(i*m), m), nvshmem.SpanOf(src.At(i*m), m), sig, uint64(1), nvshmem.SignalAdd, 1)
					}
					if tc.scope == nvshmem.Thread {
						k.If(t0, put)
					} else {
						put()
					}
				}
				k.If(t0, func() { nvshmem.Quiet(k) })
			})
			k.If(me.Eq(1).And(t0), func() {
				k.Store(out.At(1), nvshmem.SignalFetch(k, sig).To(dsl.U32).Add(uint32(1))) // 1: nothing arrived yet
				k.Store(out.At(2), k.Load(data.At(0), dsl.Volatile()).Add(uint32(1)))
				for i := 0; i < parts; i++ {
					nvshmem.SignalWaitUntil(k, sig, nvshmem.CmpGE, uint64(i+1))
					k.For(k.Const(dsl.U32, 0), uint32(m), 1, func(j dsl.Value) {
						k.If(k.Load(data.At(j.Add(uint32(i*m)))).Ne(j.Add(uint32(i*1000))), func() {
							k.Store(out.At(0), uint32(i+1)) // slot i incomplete after its signal
						})
					})
				}
			})
			mod, err := k.Build()
			if err != nil {
				t.Fatal(err)
			}
			s, e := nodeSystem(t, 2, 2)
			dataM, _ := s.MallocSymmetric(4 * parts * m)
			srcM, _ := s.MallocSymmetric(4 * parts * m)
			sigM, _ := s.MallocSymmetric(8)
			outM, _ := s.MallocSymmetric(4 * 3)
			vals := make([]uint32, parts*m)
			for i := range vals {
				vals[i] = uint32(i/m*1000 + i%m)
			}
			emu.WriteSlice(s, srcM.On(0), vals)
			for _, opt := range []emu.Options{{}, {Weak: true, Seed: 1}, {Weak: true, Seed: 7}, {Seed: 11}} {
				emu.WriteSlice(s, dataM.On(1), make([]uint32, parts*m))
				emu.WriteSlice(s, sigM.On(1), []uint64{0})
				emu.WriteSlice(s, outM.On(1), []uint32{0, 0, 0})
				start := s.Now()
				if err := s.Launch(emu.Launch{Module: mod, Entry: "k", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(64), Options: opt,
					ArgsFor: func(g int) []any { return []any{dataM.On(g), srcM.On(g), sigM.On(g), outM.On(g)} }}); err != nil {
					t.Fatalf("%+v: %v", opt, err)
				}
				checkPutSignal(t, s, e, outM.On(1), start, m, opt)
			}
		})
	}
}

func checkPutSignal(t *testing.T, s *emu.System, e *shmemu.Emulator, out uint64, start int64, m int, opt emu.Options) {
	t.Helper()
	got, _ := emu.ReadSlice[uint32](s, out, 3)
	if got[0] != 0 {
		t.Errorf("%+v: slot %d was incomplete after its signal", opt, got[0]-1)
	}
	if got[1] != 1 || got[2] != 1 {
		t.Errorf("%+v: before anything could arrive PE 1 saw signal %d and data[0] %d, want 0 and 0 (delivered late)", opt, int(got[1])-1, int(got[2])-1)
	}
	if p := e.Pending(); p != 0 {
		t.Errorf("%+v: %d operations still pending after quiet", opt, p)
	}
	busy, lat := s.Network().Steps(4*m + 8)
	if d := s.Now() - start; d < lat+busy {
		t.Errorf("%+v: the launch took %d steps, less than one transfer's %d", opt, d, lat+busy)
	}
}

// TestLateArrivalAcrossLaunches: a blocking put_signal to another node returns before the
// data arrives: after a launch that ends without quiet the data is still in flight; the next
// launch's signal wait on the target completes when it arrives (the clock skips ahead while
// every warp waits).
func TestLateArrivalAcrossLaunches(t *testing.T) {
	k := dsl.New("k")
	data, sig, out := k.PtrParam("data", dsl.U32), k.PtrParam("sig", dsl.U64), k.PtrParam("out", dsl.U32)
	first := k.Param("first", dsl.U32)
	me := nvshmem.MyPE(k)
	k.If(k.ThreadIdx(dsl.X).Eq(0), func() {
		k.If(first.Eq(uint32(1)).And(me.Eq(0)), func() {
			nvshmem.PutSignal(k, nvshmem.Thread, nvshmem.SpanOf(data.At(1), 1), nvshmem.SpanOf(data, 1), sig, uint64(7), nvshmem.SignalSet, 1)
		})
		k.If(first.Eq(uint32(0)).And(me.Eq(1)), func() {
			nvshmem.SignalWaitUntil(k, sig, nvshmem.CmpEQ, uint64(7))
			k.Store(out, k.Load(data.At(1)))
		})
	})
	mod, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	s, e := nodeSystem(t, 2, 2)
	if err := s.SetNetwork(emu.Network{Latency: time.Millisecond, BytesPerSecond: 1e9}); err != nil {
		t.Fatal(err)
	}
	dataM, _ := s.MallocSymmetric(8)
	sigM, _ := s.MallocSymmetric(8)
	outM, _ := s.MallocSymmetric(4)
	emu.WriteSlice(s, dataM.On(0), []uint32{42})
	launch := func(first uint32) error {
		return s.Launch(emu.Launch{Module: mod, Entry: "k", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(32),
			ArgsFor: func(g int) []any { return []any{dataM.On(g), sigM.On(g), outM.On(g), first} }})
	}
	if err := launch(1); err != nil {
		t.Fatal(err)
	}
	if e.Pending() != 1 {
		t.Errorf("after the first launch %d operations pending, want the put_signal", e.Pending())
	}
	if got, _ := emu.ReadSlice[uint32](s, dataM.On(1), 2); got[1] != 0 {
		t.Errorf("the put arrived within the launch that issued it (%d steps, latency 1 ms)", s.Now())
	}
	if err := launch(0); err != nil {
		t.Fatal(err)
	}
	if got, _ := emu.ReadSlice[uint32](s, outM.On(1), 1); got[0] != 42 {
		t.Errorf("PE 1 read %d after the signal, want 42", got[0])
	}
	if s.Now() < int64(time.Millisecond/emu.StepTime) {
		t.Errorf("the clock reads %d steps after a 1 ms transfer", s.Now())
	}
	if e.Pending() != 0 {
		t.Errorf("%d pending", e.Pending())
	}
}

// TestFetchAndAMOAcrossNodes: g and a fetching AMO on another node's PE return its values;
// a non-fetching atomic add arrives late, and barrier_all completes it before any PE leaves.
func TestFetchAndAMOAcrossNodes(t *testing.T) {
	k := dsl.New("k")
	p, out := k.PtrParam("p", dsl.U64), k.PtrParam("out", dsl.U64)
	me := nvshmem.MyPE(k)
	k.If(k.ThreadIdx(dsl.X).Eq(0).And(me.Eq(0)), func() {
		k.Store(out.At(0), nvshmem.G(k, p, 1))
		k.Store(out.At(1), nvshmem.AtomicFetchAdd(k, p, uint64(5), 1))
		nvshmem.AtomicAdd(k, p, uint64(100), 1)
	})
	nvshmem.BarrierAll(k, nvshmem.Block)
	k.If(k.ThreadIdx(dsl.X).Eq(0).And(me.Eq(1)), func() { k.Store(out.At(2), k.Load(p)) })
	mod, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	s, e := nodeSystem(t, 2, 2)
	pM, _ := s.MallocSymmetric(8)
	outM, _ := s.MallocSymmetric(8 * 3)
	emu.WriteSlice(s, pM.On(1), []uint64{1000})
	if err := s.Launch(emu.Launch{Module: mod, Entry: "k", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(64),
		ArgsFor: func(g int) []any { return []any{pM.On(g), outM.On(g)} }}); err != nil {
		t.Fatal(err)
	}
	o0, _ := emu.ReadSlice[uint64](s, outM.On(0), 2)
	o1, _ := emu.ReadSlice[uint64](s, outM.On(1), 3)
	if o0[0] != 1000 || o0[1] != 1000 || o1[2] != 1105 {
		t.Errorf("g = %d, fetch_add = %d (want 1000, 1000); PE 1 after the barrier: %d (want 1105)", o0[0], o0[1], o1[2])
	}
	if e.Pending() != 0 {
		t.Errorf("%d pending", e.Pending())
	}
}

// TestNetworkSettings: the network's numbers are checked, and the default delays a
// transfer by its latency plus its bytes over the bandwidth.
func TestNetworkSettings(t *testing.T) {
	s, _ := nodeSystem(t, 2, 2)
	for _, n := range []emu.Network{{Latency: -1}, {BytesPerSecond: -5}} {
		if err := s.SetNetwork(n); err == nil {
			t.Errorf("SetNetwork(%v) succeeded", n)
		}
	}
	busy, lat := emu.DefaultNetwork.Steps(50_000)
	if want := int64(emu.DefaultNetwork.Latency / emu.StepTime); lat != want || busy != 1000 {
		t.Errorf("50 kB on %v: busy %d latency %d steps, want 1000 and %d", emu.DefaultNetwork, busy, lat, want)
	}
	if err := s.SetNodes(3); err == nil || fmt.Sprint(err) == "" {
		t.Errorf("2 GPUs on 3 nodes: %v", err)
	}
}

// TestFenceAcrossNodes: PE 0 puts a block of data to PE 1 on the other node, fences, and
// sets a flag there with nvshmem_p; PE 1 spins on the flag with plain acquire loads (no
// NVSHMEM wait, so the delivery must come while it spins) and then finds all the data.
func TestFenceAcrossNodes(t *testing.T) {
	const n = 512
	k := dsl.New("k")
	data, src, flag, out := k.PtrParam("data", dsl.U32), k.PtrParam("src", dsl.U32), k.PtrParam("flag", dsl.U32), k.PtrParam("out", dsl.U32)
	me := nvshmem.MyPE(k)
	t0 := k.ThreadIdx(dsl.X).Eq(0)
	k.If(me.Eq(0).And(t0), func() {
		nvshmem.PutNBI(k, nvshmem.Thread, nvshmem.SpanOf(data, n), nvshmem.SpanOf(src, n), 1)
		nvshmem.Fence(k)
		nvshmem.P(k, flag, uint32(1), 1)
		nvshmem.Quiet(k)
	})
	k.If(me.Eq(1).And(t0), func() {
		k.WaitUntil(flag, dsl.Ge, uint32(1), dsl.Acquire(dsl.System))
		k.For(k.Const(dsl.U32, 0), uint32(n), 1, func(j dsl.Value) {
			k.If(k.Load(data.At(j)).Ne(j.Add(uint32(5))), func() { k.Store(out, j.Add(uint32(1))) })
		})
	})
	mod, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	s, e := nodeSystem(t, 2, 2)
	dataM, _ := s.MallocSymmetric(4 * n)
	srcM, _ := s.MallocSymmetric(4 * n)
	flagM, _ := s.MallocSymmetric(4)
	outM, _ := s.MallocSymmetric(4)
	vals := make([]uint32, n)
	for i := range vals {
		vals[i] = uint32(i + 5)
	}
	emu.WriteSlice(s, srcM.On(0), vals)
	for _, opt := range []emu.Options{{}, {Weak: true, Seed: 4}, {StepBudget: 5000}} {
		// With a progress budget far below the latency, the spinning target is not reported
		// as stuck: the clock moves to the flag's arrival.
		net := emu.DefaultNetwork
		if opt.StepBudget > 0 {
			net.Latency = time.Millisecond
		}
		if err := s.SetNetwork(net); err != nil {
			t.Fatal(err)
		}
		emu.WriteSlice(s, dataM.On(1), make([]uint32, n))
		emu.WriteSlice(s, flagM.On(1), []uint32{0})
		if err := s.Launch(emu.Launch{Module: mod, Entry: "k", GPUs: s.All(), Grid: emu.D1(1), Block: emu.D1(32), Options: opt,
			ArgsFor: func(g int) []any { return []any{dataM.On(g), srcM.On(g), flagM.On(g), outM.On(g)} }}); err != nil {
			t.Fatalf("%+v: %v", opt, err)
		}
		if got, _ := emu.ReadSlice[uint32](s, outM.On(1), 1); got[0] != 0 {
			t.Errorf("%+v: data[%d] missing when the flag put after the fence was seen", opt, got[0]-1)
		}
		if e.Pending() != 0 {
			t.Errorf("%+v: %d pending", opt, e.Pending())
		}
	}
}
