package dsl_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// build builds a kernel written by f and assembles it with ptxas.
func build(t *testing.T, target ptx.Target, f func(k *dsl.Kernel)) string {
	t.Helper()
	k := dsl.New("k", dsl.WithTarget(target))
	f(k)
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	assemble(t, m)
	return m.String()
}

func TestWarpAndBlockOps(t *testing.T) {
	for _, target := range []ptx.Target{ptx.SM80, ptx.SM90, ptx.SM100a} {
		for _, dt := range []dsl.Type{dsl.F32, dsl.U32, dsl.I32, dsl.F64, dsl.U64, dsl.F16, dsl.BF16} {
			t.Run(string(target)+"/"+dt.String(), func(t *testing.T) {
				s := build(t, target, func(k *dsl.Kernel) {
					p := k.PtrParam("p", dt)
					v := k.Load(p.At(k.ThreadIdx(dsl.X)))
					a := k.ShuffleXor(v, 1)
					a = a.Add(k.ShuffleDown(v, 2)).Add(k.ShuffleUp(v, 3)).Add(k.ShuffleIdx(v, 0))
					ops := []dsl.ReduceOp{dsl.Sum, dsl.Max, dsl.Min}
					if dt.IsInt() {
						ops = append(ops, dsl.BitAnd, dsl.BitOr, dsl.BitXor)
					}
					for _, op := range ops {
						a = a.Add(k.WarpReduce(v, op))
					}
					if dt != dsl.F16 && dt != dsl.BF16 {
						a = a.Add(k.BlockReduce(v, dsl.Sum))
					}
					e := k.ElectOne()
					all := k.VoteAll(v.Gt(k.Const(dt, 0)))
					k.If(e.And(all).Or(k.VoteAny(e)).And(k.VoteUni(e)), func() { k.Store(p, a) })
					k.Store(p.At(1), k.Const(dt, 1).Add(k.Ballot(e).And(k.ActiveMask()).To(dt)))
					k.SyncWarp()
					k.NamedBarrier(1, 64)
					k.NamedBarrierArrive(2, 64)
				})
				if !strings.Contains(s, "shfl.sync.bfly.b32") {
					t.Error("no shfl.sync.bfly")
				}
			})
		}
	}
}

func TestAtomicsAndFences(t *testing.T) {
	for _, target := range []ptx.Target{ptx.SM80, ptx.SM90} {
		t.Run(string(target), func(t *testing.T) {
			build(t, target, func(k *dsl.Kernel) {
				u := k.PtrParam("u", dsl.U32)
				f := k.PtrParam("f", dsl.F32)
				h := k.PtrParam("h", dsl.F16)
				q := k.PtrParam("q", dsl.U64)
				for _, op := range []dsl.AtomOp{dsl.AtomAdd, dsl.AtomMin, dsl.AtomMax, dsl.AtomInc, dsl.AtomDec, dsl.AtomAnd, dsl.AtomOr, dsl.AtomXor, dsl.AtomExch} {
					k.Store(u.At(1), k.Atomic(op, u, 5, dsl.Relaxed(dsl.GPU)))
					if op != dsl.AtomExch {
						k.Reduce(op, u, 3, dsl.Release(dsl.System))
					}
				}
				k.Store(f, k.Atomic(dsl.AtomAdd, f, 1.5, dsl.AcqRel(dsl.System)))
				k.Reduce(dsl.AtomAdd, h, k.Const(dsl.F16, 0.5))
				k.Store(q, k.AtomicCAS(q, uint64(1), uint64(2), dsl.Acquire(dsl.GPU)))
				s := k.SharedArray(dsl.U32, 4)
				k.Reduce(dsl.AtomAdd, s, 1, dsl.Relaxed(dsl.CTA))
				k.Fence(dsl.FenceSC, dsl.GPU)
				k.Fence(dsl.FenceAcqRel, dsl.System)
				k.FenceProxyAlias()
				k.WaitUntil(u.At(2), dsl.Ge, 7, dsl.Acquire(dsl.System))
			})
		})
	}
}

func TestMultimem(t *testing.T) {
	for _, target := range []ptx.Target{ptx.SM90, ptx.SM90a, ptx.SM100a} {
		t.Run(string(target), func(t *testing.T) {
			s := build(t, target, func(k *dsl.Kernel) {
				f := k.PtrParam("f", dsl.F32)
				h := k.PtrParam("h", dsl.BF16)
				i := k.PtrParam("i", dsl.I32)
				v := k.MultimemLoadReduce(f, dsl.Sum, 4)
				k.MultimemStore(f.At(4), v)
				k.MultimemReduce(f.At(8), dsl.Sum, v[:2], dsl.Release(dsl.System))
				hv := k.MultimemLoadReduce(h, dsl.Sum, 8, dsl.AccF32())
				k.MultimemStore(h.At(8), hv, dsl.Weak())
				k.Store(f.At(12), v[0], dsl.Weak()) // a plain st: weak is what a store is without an order
				iv := k.MultimemLoadReduce(i, dsl.Min, 1, dsl.Acquire(dsl.System))
				k.MultimemReduce(i.At(1), dsl.Sum, iv, dsl.Relaxed(dsl.GPU))
			})
			for _, want := range []string{"multimem.ld_reduce.relaxed.sys.global.add.v4.f32", "multimem.st.relaxed.sys.global.v4.f32",
				"multimem.red.release.sys.global.add.v2.f32", "multimem.ld_reduce.relaxed.sys.global.add.acc::f32.v4.bf16x2",
				"multimem.ld_reduce.acquire.sys.global.min.s32", "multimem.st.weak.global.v4.bf16x2", "multimem.red.relaxed.gpu.global.add.s32",
				"st.global.f32 [%ud"} {
				if !strings.Contains(s, want) {
					t.Errorf("missing %s", want)
				}
			}
		})
	}
}

// TestMultimemFP8: fp8 buffers viewed as packed words (Ptr.As), reduced with .acc::f16 and
// min, stored with multimem.st, and a word's bytes reached through Bitcast.
func TestMultimemFP8(t *testing.T) {
	s := build(t, ptx.SM100a, func(k *dsl.Kernel) {
		in := k.PtrParam("in", dsl.E4M3)
		out := k.PtrParam("out", dsl.E5M2)
		w := in.As(dsl.E4M3x4)
		v := k.MultimemLoadReduce(w, dsl.Sum, 4, dsl.AccF16())
		k.MultimemStore(w.At(4), v)
		m := k.MultimemLoadReduce(out.As(dsl.E5M2x4), dsl.Min, 2)
		k.Store(out.As(dsl.U8).At(3), m[1].Bitcast(dsl.U32).Shr(24).To(dsl.U8))
		k.Store(out.As(dsl.F32).At(2), m[0].Bitcast(dsl.F32))
	})
	for _, want := range []string{"multimem.ld_reduce.relaxed.sys.global.add.acc::f16.v4.e4m3x4",
		"multimem.st.relaxed.sys.global.v4.e4m3x4", "multimem.ld_reduce.relaxed.sys.global.min.v2.e5m2x4",
		"mov.b32", "st.global.u8", "st.global.f32"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %s in\n%s", want, s)
		}
	}
}

func TestExternCall(t *testing.T) {
	s := build(t, ptx.SM90, func(k *dsl.Kernel) {
		p := k.PtrParam("p", dsl.F32)
		ptr := k.Extern("nvshmem_ptr", []dsl.Type{dsl.U64}, dsl.U64, dsl.I32)
		put := k.Extern("nvshmemx_putmem_block", nil, dsl.U64, dsl.U64, dsl.U64, dsl.I32)
		peer := k.Call(ptr, p, 1)
		k.Call(put, k.PtrFrom(peer, dsl.F32, ptx.SpaceGlobal), p, uint64(1024), 1)
	})
	for _, want := range []string{".extern .func (.param .b64 nvshmem_ptr_ret0) nvshmem_ptr(.param .b64 nvshmem_ptr_param0, .param .b32 nvshmem_ptr_param1);", "call.uni (retval0), nvshmem_ptr, (param0, param1);", "call.uni nvshmemx_putmem_block, (param0, param1, param2, param3);"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
}
