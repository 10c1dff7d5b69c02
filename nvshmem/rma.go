package nvshmem

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/nvshmem/abi"
	"github.com/kgen-dev/kgen/ptx"
)

// Remote memory access: p, g, put, get (blocking and _nbi) and put-with-signal at thread,
// warp and block scope, and the signal operations.

// The element types of P and G are abi.ScalarTypes. half and bfloat16 are missing: NVSHMEM
// passes them by value as 2-byte aggregates (.param .align 2 .b8 x[2]), which dsl.Extern
// cannot declare; move them with Put/Get of one element.

func isScalarType(t dsl.Type) bool {
	for _, s := range abi.ScalarTypes() {
		if s == t {
			return true
		}
	}
	return false
}

// abiVal is the declared .param type of a value of type t (B32 or B64: any value of the
// width passes) and converts v to a value of that width.
func abiVal(t dsl.Type, v dsl.Value) (dsl.Type, dsl.Value) {
	switch {
	case t.Bits() == 64:
		return ptx.B64, v
	case t.Bits() == 32:
		return ptx.B32, v
	case t.Kind() == ptx.KindSigned:
		return ptx.B32, v.To(dsl.I32)
	}
	return ptx.B32, v.To(dsl.U32)
}

// retType is the declared return type for a value of type t: narrow integers come back as
// 32-bit integers (llc promotes them); fromRet converts them back.
func retType(t dsl.Type) dsl.Type {
	switch {
	case t.Bits() >= 32:
		return t
	case t.Kind() == ptx.KindSigned:
		return dsl.I32
	}
	return dsl.U32
}

// fromRet converts a value returned as retType(t) to t.
func fromRet(v dsl.Value, t dsl.Type) dsl.Value { return v.To(t) }

// valueOf makes x (a Value or a Go number) a Value of type t, recording a mismatch.
func valueOf(k *dsl.Kernel, what string, t dsl.Type, x any) (dsl.Value, bool) {
	if v, ok := x.(dsl.Value); ok {
		if v.Type() != t {
			k.Errorf("%s: value is %s, the destination holds %s (convert with To)", what, v.Type(), t)
			return dsl.Value{}, false
		}
		return v, true
	}
	return k.Const(t, x), true // Const records a bad constant
}

// P stores v into element dst (a dsl.Ptr, or a one-element Tensor) of PE pe
// (nvshmem_<type>_p). v is a Value of dst's element type or a Go number.
func P(k *dsl.Kernel, dst any, v any, pe any) {
	const what = "P"
	d := bufOf(k, what, "dst", dst)
	p, okPE := int32Arg(k, what, "pe", pe)
	if !d.valid || !okPE || !checkScalar(k, what, d.elem) {
		return
	}
	x, ok := valueOf(k, what, d.elem, v)
	if !ok {
		return
	}
	vt, xv := abiVal(d.elem, x)
	call(k, "nvshmem_"+typeName(d.elem)+"_p", nil, []dsl.Type{ptrT, vt, intT}, d.p, xv, p)
}

// G loads element src (a dsl.Ptr, or a one-element Tensor) of PE pe (nvshmem_<type>_g).
func G(k *dsl.Kernel, src any, pe any) dsl.Value {
	const what = "G"
	s := bufOf(k, what, "src", src)
	p, okPE := int32Arg(k, what, "pe", pe)
	if !s.valid || !okPE || !checkScalar(k, what, s.elem) {
		t := s.elem
		if t == 0 {
			t = dsl.U32
		}
		return k.Const(dsl.U32, 0).To(t)
	}
	r := call(k, "nvshmem_"+typeName(s.elem)+"_g", []dsl.Type{retType(s.elem)}, []dsl.Type{ptrT, intT}, s.p, p)
	return fromRet(r, s.elem)
}

func checkScalar(k *dsl.Kernel, what string, t dsl.Type) bool {
	if isScalarType(t) {
		return true
	}
	if t == dsl.F16 || t == dsl.BF16 {
		k.Errorf("%s: NVSHMEM passes %s by value as a 2-byte aggregate, which dsl.Extern cannot declare; use Put/Get of one element", what, t)
		return false
	}
	k.Errorf("%s: NVSHMEM has no %s operations", what, t)
	return false
}

// transfer resolves dst and src of a data movement: equal dtypes that NVSHMEM names; the
// count is min(size(dst), size(src)).
func transfer(k *dsl.Kernel, what string, s Scope, dst, src any) (d, sr buf, n any, ok bool) {
	if !checkScope(k, what, s) {
		return
	}
	d = bufOf(k, what, "dst", dst)
	sr = bufOf(k, what, "src", src)
	if !d.valid || !sr.valid {
		return
	}
	if d.elem != sr.elem {
		k.Errorf("%s: dst holds %s, src holds %s; the dtypes must match", what, d.elem, sr.elem)
		return
	}
	if _, named := TypeName(d.elem); !named {
		k.Errorf("%s: NVSHMEM has no %s operations", what, d.elem)
		return
	}
	return d, sr, minCount(d.n, sr.n), true
}

var rmaArgs = []dsl.Type{ptrT, ptrT, ptrT, intT}

func rma(k *dsl.Kernel, what, op string, s Scope, dst, src, pe any) {
	d, sr, n, ok := transfer(k, what, s, dst, src)
	p, okPE := int32Arg(k, what, "pe", pe)
	if !ok || !okPE {
		return
	}
	call(k, s.Func(typeName(d.elem)+"_"+op), nil, rmaArgs, d.p, sr.p, sizeArg(n), p)
}

// Put copies min(size(dst), size(src)) elements from the local src to dst on PE pe and returns
// when src may be reused (nvshmem_<type>_put, nvshmemx_<type>_put_warp, _block). dst and src
// are dsl.Tensors (contiguous) or nvshmem.Spans of the same dtype; dst is symmetric.
func Put(k *dsl.Kernel, s Scope, dst, src, pe any) { rma(k, "Put", "put", s, dst, src, pe) }

// PutNBI starts the copy of Put and returns at once; Quiet (or a barrier) completes it
// (nvshmem_<type>_put_nbi, nvshmemx_<type>_put_nbi_warp, _block).
func PutNBI(k *dsl.Kernel, s Scope, dst, src, pe any) { rma(k, "PutNBI", "put_nbi", s, dst, src, pe) }

// Get copies min(size(dst), size(src)) elements from src on PE pe into the local dst and
// returns when they have arrived (nvshmem_<type>_get, nvshmemx_<type>_get_warp, _block).
func Get(k *dsl.Kernel, s Scope, dst, src, pe any) { rma(k, "Get", "get", s, dst, src, pe) }

// GetNBI starts the copy of Get; Quiet completes it (nvshmem_<type>_get_nbi, ..._warp, _block).
func GetNBI(k *dsl.Kernel, s Scope, dst, src, pe any) { rma(k, "GetNBI", "get_nbi", s, dst, src, pe) }

// signalOf resolves a signal argument: one uint64 (a dsl.Ptr to U64 or a one-element U64
// tensor).
func signalOf(k *dsl.Kernel, what string, sig any) (dsl.Ptr, bool) {
	b := bufOf(k, what, "signal", sig)
	if !b.valid {
		return dsl.Ptr{}, false
	}
	if b.elem != dsl.U64 {
		k.Errorf("%s: a signal is one uint64, got %s", what, b.elem)
		return dsl.Ptr{}, false
	}
	if n, ok := b.n.(int); !ok || n != 1 {
		k.Errorf("%s: a signal is one uint64, got %v elements", what, b.n)
		return dsl.Ptr{}, false
	}
	return b.p, true
}

// u64Arg converts a uint64_t argument (a signal value): a non-negative Go integer or an
// integer Value (converted to U64).
func u64Arg(k *dsl.Kernel, what, arg string, x any) (any, bool) {
	if v, ok := x.(dsl.Value); ok {
		if v.Type() == ptx.NoType {
			k.Errorf("%s: %s is the zero dsl.Value", what, arg)
			return nil, false
		}
		if !v.Type().IsInt() {
			k.Errorf("%s: %s is %s, not an integer", what, arg, v.Type())
			return nil, false
		}
		if v.Type() != dsl.U64 {
			return v.To(dsl.U64), true
		}
		return v, true
	}
	switch x.(type) {
	case int, int32, int64, uint32, uint, uint64:
		if neg, u, _ := goInt(x); neg {
			k.Errorf("%s: %s %d is negative (a uint64_t: 0 to 2^64-1)", what, arg, int64(u))
			return nil, false
		}
		return x, true
	}
	k.Errorf("%s: %s is %T; want a Go integer or an integer dsl.Value", what, arg, x)
	return nil, false
}

func checkSigOp(k *dsl.Kernel, what string, op SignalOp) bool {
	if op != SignalSet && op != SignalAdd {
		k.Errorf("%s: unknown signal operation %d (SignalSet or SignalAdd)", what, op)
		return false
	}
	return true
}

var putSignalArgs = []dsl.Type{ptrT, ptrT, ptrT, ptrT, ptrT, intT, intT}

func putSignal(k *dsl.Kernel, what, op string, s Scope, dst, src, sig, val any, sop SignalOp, pe any) {
	d, sr, n, ok := transfer(k, what, s, dst, src)
	sp, okSig := signalOf(k, what, sig)
	v, okV := u64Arg(k, what, "signal value", val)
	p, okPE := int32Arg(k, what, "pe", pe)
	if !ok || !okSig || !okV || !okPE || !checkSigOp(k, what, sop) {
		return
	}
	call(k, s.Func(typeName(d.elem)+"_"+op), nil, putSignalArgs, d.p, sr.p, sizeArg(n), sp, v, int32(sop), p)
}

// PutSignal is Put followed by an update of the signal word sig on PE pe with val by sop,
// ordered after the data (nvshmem_<type>_put_signal, nvshmemx_<type>_put_signal_warp,
// _block). sig is one uint64 (a dsl.Ptr to U64 or a one-element U64 tensor).
func PutSignal(k *dsl.Kernel, s Scope, dst, src, sig, val any, sop SignalOp, pe any) {
	putSignal(k, "PutSignal", "put_signal", s, dst, src, sig, val, sop, pe)
}

// PutSignalNBI is the non-blocking PutSignal: the signal arrives after the data; Quiet
// completes both (nvshmem_<type>_put_signal_nbi, nvshmemx_<type>_put_signal_nbi_warp, _block).
func PutSignalNBI(k *dsl.Kernel, s Scope, dst, src, sig, val any, sop SignalOp, pe any) {
	putSignal(k, "PutSignalNBI", "put_signal_nbi", s, dst, src, sig, val, sop, pe)
}

// Signal updates the signal word sig on PE pe with val by sop, atomically (nvshmemx_signal_op;
// nvshmem4py's signal_op).
func Signal(k *dsl.Kernel, sig, val any, sop SignalOp, pe any) {
	const what = "Signal"
	sp, okSig := signalOf(k, what, sig)
	v, okV := u64Arg(k, what, "value", val)
	p, okPE := int32Arg(k, what, "pe", pe)
	if !okSig || !okV || !okPE || !checkSigOp(k, what, sop) {
		return
	}
	call(k, "nvshmemx_signal_op", nil, []dsl.Type{ptrT, ptrT, intT, intT}, sp, v, int32(sop), p)
}

// SignalWaitUntil waits until the local signal word sig compares to val by cmp and returns
// its value, a U64 (nvshmem_signal_wait_until).
func SignalWaitUntil(k *dsl.Kernel, sig any, cmp Cmp, val any) dsl.Value {
	const what = "SignalWaitUntil"
	sp, okSig := signalOf(k, what, sig)
	v, okV := u64Arg(k, what, "value", val)
	if !okSig || !okV {
		return k.Const(dsl.U64, 0)
	}
	if cmp < CmpEQ || cmp > CmpGE {
		k.Errorf("%s: unknown comparison %d", what, cmp)
		return k.Const(dsl.U64, 0)
	}
	return call(k, "nvshmem_signal_wait_until", []dsl.Type{dsl.U64}, []dsl.Type{ptrT, intT, ptrT}, sp, int32(cmp), v)
}

// SignalFetch returns the value of the local signal word sig, a U64 (nvshmem_signal_fetch).
func SignalFetch(k *dsl.Kernel, sig any) dsl.Value {
	sp, ok := signalOf(k, "SignalFetch", sig)
	if !ok {
		return k.Const(dsl.U64, 0)
	}
	return call(k, "nvshmem_signal_fetch", []dsl.Type{dsl.U64}, []dsl.Type{ptrT}, sp)
}
