package jit

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// tableWaitKernel: thread 0 raises the peer's flag and waits for its own, both reached
// through a table of flag addresses in device memory (tab[g] is GPU g's flag): the launch's
// only pointer argument is the table, private memory, so CollectiveAuto does not gather it.
func tableWaitKernel(t *testing.T) *ptx.Module {
	k := dsl.New("tabwait")
	tab := k.PtrParam("tab", dsl.U64)
	rank := k.Param("rank", dsl.U32)
	k.If(k.ThreadIdx(dsl.X).Eq(0), func() {
		peer := k.PtrFrom(k.Load(tab.At(rank.Xor(1))), dsl.U32, ptx.SpaceGlobal)
		mine := k.PtrFrom(k.Load(tab.At(rank)), dsl.U32, ptx.SpaceGlobal)
		k.Store(peer, 1, dsl.Release(dsl.System))
		k.WaitUntil(mine, dsl.Ge, 1, dsl.Acquire(dsl.System))
	})
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEmuTableWaitRunsInEveryMode: on 2 emulated ranks, a launch that waits on its
// peer through pointers in a device array (which the emulator once ran alone, spinning,
// unless LaunchConfig.Collective gathered it) runs beside the peer's launch in every mode:
// every rank's stream runs on its own.
func TestEmuTableWaitRunsInEveryMode(t *testing.T) {
	mod := tableWaitKernel(t)
	for _, mode := range []CollectiveMode{CollectiveAuto, CollectiveOn, CollectiveOff} {
		err := RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true, Open: []Option{WithEmuOptions(emu.Options{StepBudget: 50000})}}, func(r *Rank) error {
			sh := r.NVSHMEM
			m, err := r.Device.Load(Source{Module: mod})
			if err != nil {
				return err
			}
			fn, err := m.Function("tabwait")
			if err != nil {
				return err
			}
			flag, err := SymAlloc[uint32](sh, 1)
			if err != nil {
				return err
			}
			addrs := make([]uint64, 2)
			for g := range addrs {
				p, err := sh.PeerPtr(flag, g)
				if err != nil {
					return err
				}
				addrs[g] = uint64(p)
			}
			tab, err := Alloc[uint64](r.Device, 2)
			if err != nil {
				return err
			}
			if err := tab.CopyFromHost(addrs); err != nil {
				return err
			}
			if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32), Collective: mode}, tab, uint32(r.Rank)); err != nil {
				return err
			}
			return r.Device.Synchronize()
		})
		if err != nil {
			t.Fatalf("mode %d: %v", mode, err)
		}
	}
}
