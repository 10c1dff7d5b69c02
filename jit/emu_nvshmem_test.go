package jit

import (
	"fmt"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/nvshmem"
	"github.com/kgen-dev/kgen/ptx"
)

// putKernel: block 0 of every PE puts n floats of src into dst on the next PE with
// NVSHMEM's block-scope put (nvshmemx_float_put_block), then a block-scope barrier_all.
func putKernel(t *testing.T) *ptx.Module {
	k := dsl.New("shmem_put", dsl.WithTarget(ptx.SM90))
	dst := k.PtrParam("dst", dsl.F32)
	src := k.PtrParam("src", dsl.F32)
	n := k.Param("n", dsl.U32)
	me, np := nvshmem.MyPE(k), nvshmem.NPEs(k)
	next := me.Add(1).Rem(np)
	nvshmem.Put(k, nvshmem.Block, nvshmem.SpanOf(dst, n), nvshmem.SpanOf(src, n), next)
	nvshmem.BarrierAll(k, nvshmem.Block)
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestEmuNVSHMEMPut(t *testing.T) {
	mod := putKernel(t)
	if len(NVSHMEMCalls(mod)) == 0 {
		t.Fatal("the kernel calls no NVSHMEM function")
	}
	for _, world := range []int{2, 4} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			err := RunRanks(RanksOptions{Backend: Emulator, World: world, NVSHMEM: true}, func(r *Rank) error {
				m, err := r.Device.Load(Source{Module: mod}) // no DevLib on the emulator
				if err != nil {
					return err
				}
				fn, err := m.Function("shmem_put")
				if err != nil {
					return err
				}
				const n = 300
				dst, err := SymAlloc[float32](r.NVSHMEM, n)
				if err != nil {
					return err
				}
				src, err := Alloc[float32](r.Device, n)
				if err != nil {
					return err
				}
				vals := make([]float32, n)
				for i := range vals {
					vals[i] = float32(r.Rank*1000 + i)
				}
				if err := src.CopyFromHost(vals); err != nil {
					return err
				}
				if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(128)}, dst, src, uint32(n)); err != nil {
					return err
				}
				if err := dst.CopyToHost(vals); err != nil {
					return err
				}
				prev := (r.Rank + r.World - 1) % r.World
				for i, v := range vals {
					if want := float32(prev*1000 + i); v != want {
						return fmt.Errorf("dst[%d] = %v, want %v", i, v, want)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
