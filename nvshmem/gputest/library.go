package gputest

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// LibraryCases returns the NVSHMEM kernels of kgen's library (kernels/nvshmem_p2p.go) as
// acceptance cases, in f32.
func LibraryCases() []Case {
	const n = 4099
	val := func(pe, i int) float32 { return float32(pe*10000 + i) }
	fill := func(m Machine, s Sym, count int, f func(pe, i int) float32) error {
		for _, pe := range m.Local() {
			v := make([]float32, count)
			for i := range v {
				v[i] = f(pe, i)
			}
			if err := m.Write(s, pe, f32s(v)); err != nil {
				return err
			}
		}
		return nil
	}
	check := func(m Machine, s Sym, count int, what string, want func(pe, i int) float32) error {
		for _, pe := range m.Local() {
			got, err := readF32(m, s, pe, count)
			if err != nil {
				return err
			}
			w := make([]float32, count)
			for i := range w {
				w[i] = want(pe, i)
			}
			if err := compareF32(fmt.Sprintf("PE %d %s", pe, what), got, w); err != nil {
				return err
			}
		}
		return nil
	}
	return []Case{
		{
			Name:  "nvshmem_ring_signal_f32",
			Build: func(k *dsl.Kernel) { kernels.NVSHMEMRingSignal(k, dsl.F32) },
			Run: func(m Machine, km *ptx.Module, entry string) error {
				np := m.NPEs()
				src, err := m.Alloc(4 * n)
				if err != nil {
					return err
				}
				dst, err := m.Alloc(4 * n)
				if err != nil {
					return err
				}
				sig, err := m.Alloc(8)
				if err != nil {
					return err
				}
				for epoch := 1; epoch <= 2; epoch++ {
					v := func(pe, i int) float32 { return val(pe, i) + float32(epoch)*0.5 }
					if err := fill(m, src, n, v); err != nil {
						return err
					}
					err := m.Launch(km, entry, kernels.NVSHMEMThreads, func(pe int) []any {
						return []any{dst.Addr(pe), src.Addr(pe), sig.Addr(pe), uint32(n), uint64(epoch)}
					})
					if err != nil {
						return err
					}
					if err := check(m, dst, n, fmt.Sprintf("epoch %d dst", epoch), func(pe, i int) float32 { return v(mod(pe-1, np), i) }); err != nil {
						return err
					}
				}
				return nil
			},
		},
		{
			Name:  "nvshmem_alltoall_put_f32",
			Build: func(k *dsl.Kernel) { kernels.NVSHMEMAlltoallPut(k, dsl.F32) },
			Run: func(m Machine, km *ptx.Module, entry string) error {
				np, chunk := m.NPEs(), 1000
				src, err := m.Alloc(4 * chunk * np)
				if err != nil {
					return err
				}
				dst, err := m.Alloc(4 * chunk * np)
				if err != nil {
					return err
				}
				if err := fill(m, src, chunk*np, val); err != nil {
					return err
				}
				err = m.Launch(km, entry, kernels.NVSHMEMThreads, func(pe int) []any {
					return []any{dst.Addr(pe), src.Addr(pe), uint32(chunk)}
				})
				if err != nil {
					return err
				}
				return check(m, dst, chunk*np, "dst", func(pe, i int) float32 { return val(i/chunk, pe*chunk+i%chunk) })
			},
		},
		{
			Name:  "nvshmem_ring_get_f32",
			Build: func(k *dsl.Kernel) { kernels.NVSHMEMRingGet(k, dsl.F32) },
			Run: func(m Machine, km *ptx.Module, entry string) error {
				np := m.NPEs()
				src, err := m.Alloc(4 * n)
				if err != nil {
					return err
				}
				dst, err := m.Alloc(4 * n)
				if err != nil {
					return err
				}
				if err := fill(m, src, n, val); err != nil {
					return err
				}
				err = m.Launch(km, entry, kernels.NVSHMEMThreads, func(pe int) []any {
					return []any{dst.Addr(pe), src.Addr(pe), uint32(n)}
				})
				if err != nil {
					return err
				}
				return check(m, dst, n, "dst", func(pe, i int) float32 { return val(mod(pe-1, np), i) })
			},
		},
	}
}
