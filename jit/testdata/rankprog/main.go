// Command rankprog is a multi-rank test program for `kgen launch`: each rank writes into the
// next rank's symmetric buffer through a peer pointer with a kernel that then signals the
// next rank and waits for its own signal, a barrier, and each rank checks what it received.
// It runs unchanged on N GPUs (one process per rank) and on N simulated GPUs (one process).
// RANKPROG_FAIL=R makes rank R fail (exit status 3).
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

func ringKernel() (*ptx.Module, error) {
	k := dsl.New("ring_put", dsl.WithTarget(ptx.SM90))
	peerData := k.PtrParam("peer_data", dsl.U32)
	peerFlag := k.PtrParam("peer_flag", dsl.U32)
	myFlag := k.PtrParam("my_flag", dsl.U32)
	rank := k.Param("rank", dsl.U32)
	n := k.Param("n", dsl.U32)
	i := k.GlobalThreadIdx(dsl.X)
	k.If(i.Lt(n), func() { k.Store(peerData.At(i), rank.Mul(uint32(1000)).Add(i)) })
	k.SyncThreads()
	k.If(k.ThreadIdx(dsl.X).Eq(uint32(0)), func() {
		k.Store(peerFlag.At(0), k.Const(dsl.U32, 1), dsl.Release(dsl.System))
		k.WaitUntil(myFlag.At(0), dsl.Ge, uint32(1), dsl.Acquire(dsl.System))
	})
	k.SyncThreads()
	return k.Build()
}

func rankMain(mod *ptx.Module, r *jit.Rank) error {
	if v := os.Getenv("RANKPROG_FAIL"); v == strconv.Itoa(r.Rank) {
		return fmt.Errorf("failing as asked (RANKPROG_FAIL=%s)", v)
	}
	const n = 256
	sh := r.NVSHMEM
	m, err := r.Device.Load(jit.Source{Module: mod})
	if err != nil {
		return err
	}
	fn, err := m.Function("ring_put")
	if err != nil {
		return err
	}
	data, err := jit.SymAlloc[uint32](sh, n)
	if err != nil {
		return err
	}
	flag, err := jit.SymAlloc[uint32](sh, 1)
	if err != nil {
		return err
	}
	next, prev := (r.Rank+1)%r.World, (r.Rank+r.World-1)%r.World
	pd, err := sh.PeerPtr(data, next)
	if err != nil {
		return err
	}
	pf, err := sh.PeerPtr(flag, next)
	if err != nil {
		return err
	}
	if err := fn.Launch(jit.LaunchConfig{Grid: jit.D1(1), Block: jit.D1(n)}, pd, pf, flag, uint32(r.Rank), uint32(n)); err != nil {
		return err
	}
	if err := r.Device.Synchronize(); err != nil {
		return err
	}
	if err := sh.BarrierAll(); err != nil {
		return err
	}
	got := make([]uint32, n)
	if err := data.CopyToHost(got); err != nil {
		return err
	}
	for i, v := range got {
		if want := uint32(prev*1000 + i); v != want {
			return fmt.Errorf("data[%d] = %d, want %d", i, v, want)
		}
	}
	fmt.Printf("rank %d of %d ok on %s (%s)\n", r.Rank, r.World, r.Backend, r.Device.Info().Name)
	return nil
}

func main() {
	mod, err := ringKernel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	err = jit.RunRanks(jit.RanksOptions{NVSHMEM: true}, func(r *jit.Rank) error { return rankMain(mod, r) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "rankprog:", err)
		os.Exit(3)
	}
}
