package nvshmem

import (
	"sort"

	"github.com/kgen-dev/kgen/dsl"
)

// Atomic memory operations on a symmetric object of another PE (nvshmem_<type>_atomic_<op>).

// AMO is an atomic memory operation.
type AMO string

// The atomic memory operations, named as in NVSHMEM.
const (
	AtomicFetchOp       AMO = "fetch"
	AtomicSetOp         AMO = "set"
	AtomicSwapOp        AMO = "swap"
	AtomicCompareSwapOp AMO = "compare_swap"
	AtomicIncOp         AMO = "inc"
	AtomicFetchIncOp    AMO = "fetch_inc"
	AtomicAddOp         AMO = "add"
	AtomicFetchAddOp    AMO = "fetch_add"
	AtomicAndOp         AMO = "and"
	AtomicFetchAndOp    AMO = "fetch_and"
	AtomicOrOp          AMO = "or"
	AtomicFetchOrOp     AMO = "fetch_or"
	AtomicXorOp         AMO = "xor"
	AtomicFetchXorOp    AMO = "fetch_xor"
)

const (
	amoTakesValue = 1 << iota
	amoFetches
	amoTakesCond
)

const (
	amoExtendedNote = "float, double, int32, int64, uint32, uint64"
	amoBitwiseNote  = "int32, int64, uint32, uint64"
	amoArithNote    = "int32, int64 (NVSHMEM's long), uint32, uint64"
)

// amoInfo is what an AMO takes and returns, and the NVSHMEM type name of each element type
// it has (from the 3.4.5 bitcode: the arithmetic AMOs have no int64 form, only long).
type amoInfo struct {
	flags int
	types map[dsl.Type]string
	note  string
}

var (
	amoExtended = map[dsl.Type]string{dsl.F32: "float", dsl.F64: "double", dsl.I32: "int32", dsl.I64: "int64", dsl.U32: "uint32", dsl.U64: "uint64"}
	amoBitwise  = map[dsl.Type]string{dsl.I32: "int32", dsl.I64: "int64", dsl.U32: "uint32", dsl.U64: "uint64"}
	amoArith    = map[dsl.Type]string{dsl.I32: "int32", dsl.I64: "long", dsl.U32: "uint32", dsl.U64: "uint64"}
)

var amos = map[AMO]amoInfo{
	AtomicFetchOp:       {amoFetches, amoExtended, amoExtendedNote},
	AtomicSetOp:         {amoTakesValue, amoExtended, amoExtendedNote},
	AtomicSwapOp:        {amoTakesValue | amoFetches, amoExtended, amoExtendedNote},
	AtomicCompareSwapOp: {amoTakesCond | amoTakesValue | amoFetches, amoBitwise, amoBitwiseNote},
	AtomicIncOp:         {0, amoArith, amoArithNote},
	AtomicFetchIncOp:    {amoFetches, amoArith, amoArithNote},
	AtomicAddOp:         {amoTakesValue, amoArith, amoArithNote},
	AtomicFetchAddOp:    {amoTakesValue | amoFetches, amoArith, amoArithNote},
	AtomicAndOp:         {amoTakesValue, amoBitwise, amoBitwiseNote},
	AtomicFetchAndOp:    {amoTakesValue | amoFetches, amoBitwise, amoBitwiseNote},
	AtomicOrOp:          {amoTakesValue, amoBitwise, amoBitwiseNote},
	AtomicFetchOrOp:     {amoTakesValue | amoFetches, amoBitwise, amoBitwiseNote},
	AtomicXorOp:         {amoTakesValue, amoBitwise, amoBitwiseNote},
	AtomicFetchXorOp:    {amoTakesValue | amoFetches, amoBitwise, amoBitwiseNote},
}

// AMOs returns every atomic memory operation, sorted.
func AMOs() []AMO {
	out := make([]AMO, 0, len(amos))
	for op := range amos {
		out = append(out, op)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// AMOTypes returns the element types NVSHMEM defines op for.
func AMOTypes(op AMO) []dsl.Type {
	var out []dsl.Type
	for _, t := range Types() {
		if _, ok := amos[op].types[t]; ok {
			out = append(out, t)
		}
	}
	return out
}

// AMOName returns the device function of op on element type t ("nvshmem_long_atomic_fetch_add").
func AMOName(op AMO, t dsl.Type) (string, bool) {
	n, ok := amos[op].types[t]
	if !ok {
		return "", false
	}
	return "nvshmem_" + n + "_atomic_" + string(op), true
}

// Atomic applies op to the element dest (a dsl.Ptr or a one-element Tensor) on PE pe and
// returns the old value for the fetching operations (a zero Value otherwise). cond is
// compare_swap's comparand and v the operand; pass nil for those the operation does not take.
// The named functions below (AtomicFetchAdd, ...) are shorthands.
func Atomic(k *dsl.Kernel, op AMO, dest any, cond, v any, pe any) dsl.Value {
	what := "Atomic " + string(op)
	info, known := amos[op]
	if !known {
		k.Errorf("%s: unknown atomic memory operation %q", what, op)
		return dsl.Value{}
	}
	d := bufOf(k, what, "dest", dest)
	p, okPE := int32Arg(k, what, "pe", pe)
	if !d.valid || !okPE {
		return dsl.Value{}
	}
	if n, ok := d.n.(int); !ok || n != 1 {
		k.Errorf("%s: dest must be one element, got %v", what, d.n)
		return dsl.Value{}
	}
	name, ok := AMOName(op, d.elem)
	if !ok {
		k.Errorf("%s: NVSHMEM defines it for %s, not %s", what, info.note, d.elem)
		return dsl.Value{}
	}
	args := []dsl.Type{ptrT}
	vals := []any{d.p}
	for _, x := range []struct {
		flag int
		arg  string
		val  any
	}{{amoTakesCond, "cond", cond}, {amoTakesValue, "value", v}} {
		if info.flags&x.flag == 0 {
			if x.val != nil {
				k.Errorf("%s takes no %s", what, x.arg)
				return dsl.Value{}
			}
			continue
		}
		if x.val == nil {
			k.Errorf("%s needs a %s", what, x.arg)
			return dsl.Value{}
		}
		xv, ok := valueOf(k, what, d.elem, x.val)
		if !ok {
			return dsl.Value{}
		}
		at, av := abiVal(d.elem, xv)
		args = append(args, at)
		vals = append(vals, av)
	}
	args = append(args, intT)
	vals = append(vals, p)
	var rets []dsl.Type
	if info.flags&amoFetches != 0 {
		rets = []dsl.Type{retType(d.elem)}
		return fromRet(call(k, name, rets, args, vals...), d.elem)
	}
	return call(k, name, rets, args, vals...)
}

// AtomicFetch returns the value of dest on PE pe atomically (nvshmem_<type>_atomic_fetch).
func AtomicFetch(k *dsl.Kernel, dest, pe any) dsl.Value {
	return Atomic(k, AtomicFetchOp, dest, nil, nil, pe)
}

// AtomicSet sets dest on PE pe to v atomically (nvshmem_<type>_atomic_set).
func AtomicSet(k *dsl.Kernel, dest, v, pe any) { Atomic(k, AtomicSetOp, dest, nil, v, pe) }

// AtomicSwap sets dest on PE pe to v and returns the old value (nvshmem_<type>_atomic_swap).
func AtomicSwap(k *dsl.Kernel, dest, v, pe any) dsl.Value {
	return Atomic(k, AtomicSwapOp, dest, nil, v, pe)
}

// AtomicCompareSwap sets dest on PE pe to v if it equals cond and returns the old value
// (nvshmem_<type>_atomic_compare_swap).
func AtomicCompareSwap(k *dsl.Kernel, dest, cond, v, pe any) dsl.Value {
	return Atomic(k, AtomicCompareSwapOp, dest, cond, v, pe)
}

// AtomicInc adds one to dest on PE pe (nvshmem_<type>_atomic_inc).
func AtomicInc(k *dsl.Kernel, dest, pe any) { Atomic(k, AtomicIncOp, dest, nil, nil, pe) }

// AtomicFetchInc adds one to dest on PE pe and returns the old value.
func AtomicFetchInc(k *dsl.Kernel, dest, pe any) dsl.Value {
	return Atomic(k, AtomicFetchIncOp, dest, nil, nil, pe)
}

// AtomicAdd adds v to dest on PE pe (nvshmem_<type>_atomic_add).
func AtomicAdd(k *dsl.Kernel, dest, v, pe any) { Atomic(k, AtomicAddOp, dest, nil, v, pe) }

// AtomicFetchAdd adds v to dest on PE pe and returns the old value.
func AtomicFetchAdd(k *dsl.Kernel, dest, v, pe any) dsl.Value {
	return Atomic(k, AtomicFetchAddOp, dest, nil, v, pe)
}

// AtomicAnd ands v into dest on PE pe (nvshmem_<type>_atomic_and).
func AtomicAnd(k *dsl.Kernel, dest, v, pe any) { Atomic(k, AtomicAndOp, dest, nil, v, pe) }

// AtomicFetchAnd ands v into dest on PE pe and returns the old value.
func AtomicFetchAnd(k *dsl.Kernel, dest, v, pe any) dsl.Value {
	return Atomic(k, AtomicFetchAndOp, dest, nil, v, pe)
}

// AtomicOr ors v into dest on PE pe (nvshmem_<type>_atomic_or).
func AtomicOr(k *dsl.Kernel, dest, v, pe any) { Atomic(k, AtomicOrOp, dest, nil, v, pe) }

// AtomicFetchOr ors v into dest on PE pe and returns the old value.
func AtomicFetchOr(k *dsl.Kernel, dest, v, pe any) dsl.Value {
	return Atomic(k, AtomicFetchOrOp, dest, nil, v, pe)
}

// AtomicXor xors v into dest on PE pe (nvshmem_<type>_atomic_xor).
func AtomicXor(k *dsl.Kernel, dest, v, pe any) { Atomic(k, AtomicXorOp, dest, nil, v, pe) }

// AtomicFetchXor xors v into dest on PE pe and returns the old value.
func AtomicFetchXor(k *dsl.Kernel, dest, v, pe any) dsl.Value {
	return Atomic(k, AtomicFetchXorOp, dest, nil, v, pe)
}
