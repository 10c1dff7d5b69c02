package nvshmem

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/nvshmem/abi"
)

// Atomic memory operations on a symmetric object of another PE (nvshmem_<type>_atomic_<op>).

// AMO is an atomic memory operation.
type AMO = abi.AMO

// The atomic memory operations, named as in NVSHMEM.
const (
	AtomicFetchOp       = abi.AtomicFetchOp
	AtomicSetOp         = abi.AtomicSetOp
	AtomicSwapOp        = abi.AtomicSwapOp
	AtomicCompareSwapOp = abi.AtomicCompareSwapOp
	AtomicIncOp         = abi.AtomicIncOp
	AtomicFetchIncOp    = abi.AtomicFetchIncOp
	AtomicAddOp         = abi.AtomicAddOp
	AtomicFetchAddOp    = abi.AtomicFetchAddOp
	AtomicAndOp         = abi.AtomicAndOp
	AtomicFetchAndOp    = abi.AtomicFetchAndOp
	AtomicOrOp          = abi.AtomicOrOp
	AtomicFetchOrOp     = abi.AtomicFetchOrOp
	AtomicXorOp         = abi.AtomicXorOp
	AtomicFetchXorOp    = abi.AtomicFetchXorOp
)

// AMOs returns every atomic memory operation, sorted.
func AMOs() []AMO { return abi.AMOs() }

// AMOTypes returns the element types NVSHMEM defines op for.
func AMOTypes(op AMO) []dsl.Type { return abi.AMOTypes(op) }

// AMOName returns the device function of op on element type t ("nvshmem_long_atomic_fetch_add").
func AMOName(op AMO, t dsl.Type) (string, bool) { return abi.AMOName(op, t) }

// Atomic applies op to the element dest (a dsl.Ptr or a one-element Tensor) on PE pe and
// returns the old value for the fetching operations (a zero Value otherwise). cond is
// compare_swap's comparand and v the operand; pass nil for those the operation does not take.
// The named functions below (AtomicFetchAdd, ...) are shorthands.
func Atomic(k *dsl.Kernel, op AMO, dest any, cond, v any, pe any) dsl.Value {
	what := "Atomic " + string(op)
	info, known := abi.AMOSpec(op)
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
		k.Errorf("%s: NVSHMEM defines it for %s, not %s", what, info.Note, d.elem)
		return dsl.Value{}
	}
	args := []dsl.Type{ptrT}
	vals := []any{d.p}
	for _, x := range []struct {
		takes bool
		arg   string
		val   any
	}{{info.TakesCond, "cond", cond}, {info.TakesValue, "value", v}} {
		if !x.takes {
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
	if info.Fetches {
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
