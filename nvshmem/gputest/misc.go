package gputest

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/nvshmem"
	"github.com/kgen-dev/kgen/ptx"
)

// The thread-scope operations: queries, peer and multicast pointers, p and g of every scalar
// type, every AMO on every type, signal_op, signal_fetch, signal_wait_until, fence, quiet.
// They work in one symmetric byte arena:
//
//	[0, 256)       out: 32 uint64 results
//	[256, 512)     the p slot of each scalar type (8 bytes each)
//	[512, 768)     the g result of each scalar type
//	[1024, ...)    per (AMO, type): the target slot, then the fetched value (16 bytes)
//	3072, 3080     two signal words
const (
	arenaSize = 4096
	offP      = 256
	offG      = 512
	offAMO    = 1024
	offSig    = 3072
)

var scalarTypes = []dsl.Type{dsl.F32, dsl.F64, dsl.I8, dsl.I16, dsl.I32, dsl.I64, dsl.U8, dsl.U16, dsl.U32, dsl.U64}

func pValue(t dsl.Type, pe int) float64 { return float64(pe*3 + 1 + int(t.Bytes())) }

type amoPair struct {
	op nvshmem.AMO
	t  dsl.Type
}

func amoPairs() []amoPair {
	var out []amoPair
	for _, op := range nvshmem.AMOs() {
		for _, t := range nvshmem.AMOTypes(op) {
			out = append(out, amoPair{op, t})
		}
	}
	return out
}

// amoInit, amoOperand: the slot's initial value and the operand (compare_swap's comparand
// is the initial value, so it swaps).
func amoInit(t dsl.Type) float64 {
	if t.IsFloat() {
		return 1.5
	}
	return 0x0F0F
}

func amoOperand(t dsl.Type) float64 {
	if t.IsFloat() {
		return 2.25
	}
	return 0x00FF
}

func takes(op nvshmem.AMO) (cond, val, fetch bool) {
	switch op {
	case nvshmem.AtomicFetchOp:
		return false, false, true
	case nvshmem.AtomicSetOp:
		return false, true, false
	case nvshmem.AtomicSwapOp:
		return false, true, true
	case nvshmem.AtomicCompareSwapOp:
		return true, true, true
	case nvshmem.AtomicIncOp:
		return false, false, false
	case nvshmem.AtomicFetchIncOp:
		return false, false, true
	case nvshmem.AtomicAddOp, nvshmem.AtomicAndOp, nvshmem.AtomicOrOp, nvshmem.AtomicXorOp:
		return false, true, false
	}
	return false, true, true // the fetching add, and, or, xor
}

// amoResult is the slot's value after op (NVSHMEM's semantics).
func amoResult(op nvshmem.AMO, t dsl.Type) float64 {
	a, v := amoInit(t), amoOperand(t)
	ia, iv := int64(a), int64(v)
	switch op {
	case nvshmem.AtomicFetchOp:
		return a
	case nvshmem.AtomicSetOp, nvshmem.AtomicSwapOp, nvshmem.AtomicCompareSwapOp:
		return v
	case nvshmem.AtomicIncOp, nvshmem.AtomicFetchIncOp:
		return a + 1
	case nvshmem.AtomicAddOp, nvshmem.AtomicFetchAddOp:
		return a + v
	case nvshmem.AtomicAndOp, nvshmem.AtomicFetchAndOp:
		return float64(ia & iv)
	case nvshmem.AtomicOrOp, nvshmem.AtomicFetchOrOp:
		return float64(ia | iv)
	}
	return float64(ia ^ iv)
}

// goValue is v as the Go number the DSL takes for a constant of type t.
func goValue(t dsl.Type, v float64) any {
	if t.IsFloat() {
		return v
	}
	return int64(v)
}

func miscCase() Case {
	return Case{
		Name: "nvshmem_misc",
		Build: func(k *dsl.Kernel) {
			arena := k.PtrParam("arena", dsl.U8)
			out := typed(k, arena, 0, dsl.U64)
			me, np, next, _ := ring(k)
			k.If(k.ThreadIdx(dsl.X).Eq(0), func() {
				W := nvshmem.TeamWorld
				k.Store(out.At(0), me.To(dsl.U64))
				k.Store(out.At(1), np.To(dsl.U64))
				k.Store(out.At(2), nvshmem.TeamMyPE(k, W).To(dsl.U64))
				k.Store(out.At(3), nvshmem.TeamNPEs(k, nvshmem.TeamShared).To(dsl.U64))
				k.Store(out.At(4), nvshmem.TeamTranslatePE(k, nvshmem.TeamNode, me, W).To(dsl.U64))
				mc := nvshmem.MulticastPtr(k, W, arena)
				k.Store(out.At(5), k.Select(nvshmem.IsNull(k, mc), k.Const(dsl.U64, 1), uint64(0)))
				pp := nvshmem.PeerPtr(k, arena, next)
				k.Store(out.At(6), k.Select(nvshmem.IsNull(k, pp), k.Const(dsl.U64, 1), uint64(0)))
				for i, t := range scalarTypes {
					nvshmem.P(k, typed(k, arena, offP+8*i, t), me.Mul(3).Add(int(pValue(t, 0))).To(t), next)
				}
				for j, p := range amoPairs() {
					slot := typed(k, arena, offAMO+16*j, p.t)
					cond, val, fetch := takes(p.op)
					var c, v any
					if cond {
						c = goValue(p.t, amoInit(p.t))
					}
					if val {
						v = goValue(p.t, amoOperand(p.t))
					}
					r := nvshmem.Atomic(k, p.op, slot, c, v, next)
					if fetch {
						k.Store(typed(k, arena, offAMO+16*j+8, p.t), r)
					}
				}
				sig, sig2 := typed(k, arena, offSig, dsl.U64), typed(k, arena, offSig+8, dsl.U64)
				nvshmem.Signal(k, sig, 5, nvshmem.SignalSet, next)
				nvshmem.Signal(k, sig2, 3, nvshmem.SignalAdd, next)
				nvshmem.Fence(k)
				nvshmem.Signal(k, sig2, 4, nvshmem.SignalAdd, next)
				nvshmem.Quiet(k)
				nvshmem.BarrierAll(k, nvshmem.Thread)
				for i, t := range scalarTypes {
					g := nvshmem.G(k, typed(k, arena, offP+8*i, t), next)
					k.Store(typed(k, arena, offG+8*i, t), g)
				}
				k.Store(out.At(7), nvshmem.SignalWaitUntil(k, sig, nvshmem.CmpEQ, 5))
				k.Store(out.At(8), nvshmem.SignalFetch(k, sig2))
				k.Store(out.At(9), uint64(math.MaxUint64))
				k.If(nvshmem.IsNull(k, pp).Not(), func() {
					k.Store(out.At(9), k.Load(typed(k, pp, 0, dsl.U64)))
				})
				nvshmem.BarrierAll(k, nvshmem.Thread)
			})
		},
		Run: func(m Machine, km *ptx.Module, entry string) error {
			arena, err := m.Alloc(arenaSize)
			if err != nil {
				return err
			}
			init := make([]byte, arenaSize)
			for j, p := range amoPairs() {
				copy(init[offAMO+16*j:], encode(p.t, amoInit(p.t)))
			}
			for _, pe := range m.Local() {
				if err := m.Write(arena, pe, init); err != nil {
					return err
				}
			}
			if err := m.Launch(km, entry, Block, func(pe int) []any { return []any{arena.Addr(pe)} }); err != nil {
				return err
			}
			np := m.NPEs()
			var known []string
			for _, pe := range m.Local() {
				b := make([]byte, arenaSize)
				if err := m.Read(arena, pe, b); err != nil {
					return err
				}
				u := func(i int) uint64 { return binary.LittleEndian.Uint64(b[8*i:]) }
				next, prev := mod(pe+1, np), mod(pe-1, np)
				mcNull := uint64(1)
				if m.Multicast() {
					mcNull = 0
				}
				for i, w := range []uint64{uint64(pe), uint64(np), uint64(pe), uint64(np), uint64(pe), mcNull, 0, 5, 7, uint64(next)} {
					if u(i) != w {
						return fmt.Errorf("PE %d: out[%d] = %d, want %d (0 my_pe, 1 n_pes, 2 team_my_pe, 3 team_n_pes, 4 translate, 5 mc_ptr null, 6 peer ptr null, 7 signal_wait_until, 8 signal_fetch, 9 peer load)", pe, i, u(i), w)
					}
				}
				for i, t := range scalarTypes {
					if got, want := decode(t, b[offP+8*i:]), pValue(t, prev); got != want {
						return fmt.Errorf("PE %d: nvshmem_%s_p delivered %v, want %v", pe, t, got, want)
					}
					if got, want := decode(t, b[offG+8*i:]), pValue(t, pe); got != want {
						return fmt.Errorf("PE %d: nvshmem_%s_g returned %v, want %v", pe, t, got, want)
					}
				}
				for j, p := range amoPairs() {
					name, _ := nvshmem.AMOName(p.op, p.t)
					if got, want := decode(p.t, b[offAMO+16*j:]), amoResult(p.op, p.t); got != want {
						return fmt.Errorf("PE %d: %s left %v, want %v", pe, name, got, want)
					}
					if _, _, fetch := takes(p.op); fetch {
						got, want := decode(p.t, b[offAMO+16*j+8:]), amoInit(p.t)
						if got != want && p.op == nvshmem.AtomicSwapOp && p.t == dsl.F64 && got == float64(math.Float64bits(want)) {
							// NVSHMEM 3.4.5's nvshmem_double_atomic_swap returns the old value's bits
							// converted as an integer (its bitcode: `uitofp i64 %old to double`, where
							// the float version has a bitcast): a bug of the library, not of kgen.
							known = append(known, fmt.Sprintf("PE %d: %s returned %v (the bits of %v converted by uitofp)", pe, name, got, want))
							continue
						}
						if got != want {
							return fmt.Errorf("PE %d: %s returned %v, want %v", pe, name, got, want)
						}
					}
				}
				if s1, s2 := binary.LittleEndian.Uint64(b[offSig:]), binary.LittleEndian.Uint64(b[offSig+8:]); s1 != 5 || s2 != 7 {
					return fmt.Errorf("PE %d: signals %d, %d; want 5, 7", pe, s1, s2)
				}
			}
			if known != nil {
				return &KnownBugError{Notes: known}
			}
			return nil
		},
	}
}

// ---- put of every element type (and sum-reduce of a few), at block scope ----

const typesN = 8

// reduceTyped says which types the types case also sum-reduces: the half-precision floats
// and the 64-bit types (f32 and i32 reductions are in the collective cases). Every reduction
// instantiates several algorithms in NVSHMEM's device library, and the JIT link on the GPU
// grows with each.
func reduceTyped(t dsl.Type) bool {
	return t == dsl.F16 || t == dsl.BF16 || t == dsl.F64 || t == dsl.I64
}

func typesValue(pe, e int) float64 { return float64(pe + e + 1) }

func typesCase() Case {
	types := nvshmem.Types()
	// per type: src, dst, red, each typesN elements of up to 8 bytes.
	off := func(i, which int) int { return (3*i + which) * typesN * 8 }
	return Case{
		Name: "nvshmem_types",
		Build: func(k *dsl.Kernel) {
			arena := k.PtrParam("arena", dsl.U8)
			_, _, next, _ := ring(k)
			for i, t := range types {
				src := vec(k, typed(k, arena, off(i, 0), t), typesN)
				dst := vec(k, typed(k, arena, off(i, 1), t), typesN)
				red := vec(k, typed(k, arena, off(i, 2), t), typesN)
				nvshmem.Put(k, nvshmem.Block, dst, src, next)
				if reduceTyped(t) {
					nvshmem.Reduce(k, nvshmem.Block, nvshmem.TeamWorld, nvshmem.Sum, red, src)
				}
			}
			nvshmem.BarrierAll(k, nvshmem.Block)
		},
		Run: func(m Machine, km *ptx.Module, entry string) error {
			size := off(len(types), 0)
			arena, err := m.Alloc(size)
			if err != nil {
				return err
			}
			for _, pe := range m.Local() {
				b := make([]byte, size)
				for i, t := range types {
					for e := 0; e < typesN; e++ {
						copy(b[off(i, 0)+e*t.Bytes():], encode(t, typesValue(pe, e)))
					}
				}
				if err := m.Write(arena, pe, b); err != nil {
					return err
				}
			}
			if err := m.Launch(km, entry, Block, func(pe int) []any { return []any{arena.Addr(pe)} }); err != nil {
				return err
			}
			np := m.NPEs()
			for _, pe := range m.Local() {
				b := make([]byte, size)
				if err := m.Read(arena, pe, b); err != nil {
					return err
				}
				prev := mod(pe-1, np)
				for i, t := range types {
					tn, _ := nvshmem.TypeName(t)
					for e := 0; e < typesN; e++ {
						if got, want := decode(t, b[off(i, 1)+e*t.Bytes():]), typesValue(prev, e); got != want {
							return fmt.Errorf("PE %d: nvshmemx_%s_put_block element %d = %v, want %v", pe, tn, e, got, want)
						}
						if !reduceTyped(t) {
							continue
						}
						sum := 0.0
						for q := 0; q < np; q++ {
							sum += typesValue(q, e)
						}
						if got := decode(t, b[off(i, 2)+e*t.Bytes():]); got != sum {
							return fmt.Errorf("PE %d: nvshmemx_%s_sum_reduce_block element %d = %v, want %v", pe, tn, e, got, sum)
						}
					}
				}
			}
			return nil
		},
	}
}
