package jit

import (
	"strings"
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

// TestEmuUngatheredSpinNamesCollectiveOn: on 2 emulated ranks, the launch that waits on its
// peer through pointers in a device array is not gathered (CollectiveAuto sees no symmetric
// argument), so each rank's launch runs alone and spins; the error says so and names
// Collective: jit.CollectiveOn, with which the same launch runs.
func TestEmuUngatheredSpinNamesCollectiveOn(t *testing.T) {
	mod := tableWaitKernel(t)
	for _, mode := range []CollectiveMode{CollectiveAuto, CollectiveOn} {
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
			return fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32), Collective: mode}, tab, uint32(r.Rank))
		})
		if mode == CollectiveOn {
			if err != nil {
				t.Fatalf("gathered: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "Collective: jit.CollectiveOn") || !strings.Contains(err.Error(), "runs on GPU(s) [") {
			t.Fatalf("ungathered: want the no-progress error naming jit.CollectiveOn, got %v", err)
		}
		t.Log(err)
	}
}
