package nvshmem

import (
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/nvshmem/abi"
	"github.com/kgen-dev/kgen/ptx"
)

// The device API: DSL operations that call NVSHMEM 3.x's device functions with their exact C
// ABI (see docs/nvshmem.md for the table beside nvshmem4py's device API).
//
// Every operation takes the kernel first. Misuse (a dtype mismatch, a signal that is not one
// uint64, an unsupported type) is recorded on the kernel with the caller's file:line and
// returned by Build, like every DSL misuse.

func init() { dsl.MarkLibrary() }

// Scope is the group of threads that calls an operation together: one thread, a whole warp
// (nvshmemx_*_warp) or a whole block (nvshmemx_*_block). Warp and block operations must be
// called by every thread of the warp or block with the same arguments.
type Scope = abi.Scope

// The scopes.
const (
	Thread = abi.Thread
	Warp   = abi.Warp
	Block  = abi.Block
)

// Team is an NVSHMEM team handle (nvshmem_team_t, an int).
type Team = abi.Team

// The predefined teams (NVSHMEM_TEAM_WORLD, NVSHMEM_TEAM_SHARED, NVSHMEMX_TEAM_NODE).
const (
	TeamWorld  = abi.TeamWorld
	TeamShared = abi.TeamShared
	TeamNode   = abi.TeamNode
)

// SignalOp is how a signal operation updates the signal word (NVSHMEM_SIGNAL_SET, _ADD).
type SignalOp = abi.SignalOp

// The signal operations.
const (
	SignalSet = abi.SignalSet
	SignalAdd = abi.SignalAdd
)

// Cmp is the comparison of a wait (NVSHMEM_CMP_*).
type Cmp = abi.Cmp

// The comparisons (NVSHMEM's numbering: LE comes before LT).
const (
	CmpEQ = abi.CmpEQ
	CmpNE = abi.CmpNE
	CmpGT = abi.CmpGT
	CmpLE = abi.CmpLE
	CmpLT = abi.CmpLT
	CmpGE = abi.CmpGE
)

// typeName returns NVSHMEM's name of element type t ("" when it has none).
func typeName(t dsl.Type) string {
	n, _ := abi.TypeName(t)
	return n
}

// TypeName returns NVSHMEM's name of element type t ("float", "int32", ...) and whether
// NVSHMEM has typed operations for it.
func TypeName(t dsl.Type) (string, bool) { return abi.TypeName(t) }

// Types returns the element types of typed put/get, reductions, fcollect, broadcast and
// alltoall, in a fixed order.
func Types() []dsl.Type { return abi.Types() }

// Span is n elements at p: a buffer argument when the count is a runtime value or the memory
// has no tensor. n is a Go int or an integer dsl.Value.
type Span struct {
	Ptr dsl.Ptr
	N   any
}

// SpanOf returns the Span of n elements at p.
func SpanOf(p dsl.Ptr, n any) Span { return Span{Ptr: p, N: n} }

// buf is a resolved buffer argument: its first element and element count (a Go int when
// static, else a U64 Value).
type buf struct {
	p     dsl.Ptr
	n     any
	elem  dsl.Type
	valid bool
}

// bufOf resolves a buffer argument: a dsl.Tensor (contiguous; its Size elements from its
// first), a Span, or (for one element) a dsl.Ptr.
func bufOf(k *dsl.Kernel, what, arg string, x any) buf {
	switch b := x.(type) {
	case dsl.Tensor:
		if b.Elem() == ptx.NoType {
			k.Errorf("%s: %s is the zero dsl.Tensor (make tensors with the kernel's MakeTensor)", what, arg)
			return buf{}
		}
		if b.IsFragment() {
			k.Errorf("%s: %s is a register fragment; NVSHMEM moves memory (store it to a buffer first)", what, arg)
			return buf{}
		}
		if b.Size() == 0 {
			k.Errorf("%s: %s has a runtime extent; give the count with nvshmem.SpanOf", what, arg)
			return buf{}
		}
		if b.Size() > 1 && !b.Contiguous() {
			k.Errorf("%s: %s (shape %v) is not contiguous in memory; NVSHMEM copies Size() consecutive elements: pass a contiguous tensor (one call per contiguous run), or copy it to a contiguous buffer first", what, arg, b.Shape())
			return buf{}
		}
		p := b.At(0)
		if !checkSpace(k, what, arg, p) {
			return buf{}
		}
		return buf{p: p, n: b.Size(), elem: b.Elem(), valid: true}
	case Span:
		if b.Ptr.Elem() == ptx.NoType {
			k.Errorf("%s: %s is a Span of the zero dsl.Ptr", what, arg)
			return buf{}
		}
		if !checkSpace(k, what, arg, b.Ptr) {
			return buf{}
		}
		n, ok := countOf(k, what, arg, b.N)
		if !ok {
			return buf{}
		}
		return buf{p: b.Ptr, n: n, elem: b.Ptr.Elem(), valid: true}
	case dsl.Ptr:
		if b.Elem() == ptx.NoType {
			k.Errorf("%s: %s is the zero dsl.Ptr (take pointers from the kernel's parameters, PtrFrom or arrays)", what, arg)
			return buf{}
		}
		if !checkSpace(k, what, arg, b) {
			return buf{}
		}
		return buf{p: b, n: 1, elem: b.Elem(), valid: true}
	}
	k.Errorf("%s: %s is %T; want a dsl.Tensor, an nvshmem.Span or a dsl.Ptr", what, arg, x)
	return buf{}
}

// checkSpace accepts global and generic pointers: NVSHMEM takes generic addresses, and a
// global address is its own generic address.
func checkSpace(k *dsl.Kernel, what, arg string, p dsl.Ptr) bool {
	switch p.Space() {
	case ptx.SpaceGlobal, ptx.SpaceGeneric:
		return true
	}
	k.Errorf("%s: %s points into %s memory; NVSHMEM takes global (generic) addresses", what, arg, spaceName(p.Space()))
	return false
}

func spaceName(s ptx.Space) string {
	if s == ptx.SpaceGeneric {
		return "generic"
	}
	return s.String()
}

// countOf checks an element count: a non-negative Go int, or an integer Value (made U64).
func countOf(k *dsl.Kernel, what, arg string, n any) (any, bool) {
	switch c := n.(type) {
	case int:
		if c < 0 {
			k.Errorf("%s: %s count %d is negative", what, arg, c)
			return nil, false
		}
		return c, true
	case dsl.Value:
		if c.Type() == ptx.NoType {
			k.Errorf("%s: %s count is the zero dsl.Value", what, arg)
			return nil, false
		}
		if !c.Type().IsInt() {
			k.Errorf("%s: %s count is %s, not an integer", what, arg, c.Type())
			return nil, false
		}
		return c.To(dsl.U64), true
	}
	k.Errorf("%s: %s count is %T; want a Go int or an integer dsl.Value", what, arg, n)
	return nil, false
}

// minCount is min(a, b) of two counts (Go ints or U64 Values).
func minCount(a, b any) any {
	ai, aok := a.(int)
	bi, bok := b.(int)
	switch {
	case aok && bok:
		return min(ai, bi)
	case aok:
		return b.(dsl.Value).Min(uint64(ai))
	case bok:
		return a.(dsl.Value).Min(uint64(bi))
	}
	return a.(dsl.Value).Min(b.(dsl.Value))
}

// sizeArg is a count as a size_t argument.
func sizeArg(n any) any {
	if c, ok := n.(int); ok {
		return uint64(c)
	}
	return n
}

// int32Arg converts an int argument (a PE, a root, a team): a Go integer that fits a C int
// (32 bits) or an integer Value (converted to I32).
func int32Arg(k *dsl.Kernel, what, arg string, x any) (any, bool) {
	switch v := x.(type) {
	case dsl.Value:
		if v.Type() == ptx.NoType {
			k.Errorf("%s: %s is the zero dsl.Value", what, arg)
			return nil, false
		}
		if !v.Type().IsInt() {
			k.Errorf("%s: %s is %s, not an integer", what, arg, v.Type())
			return nil, false
		}
		if v.Type() == dsl.I32 {
			return v, true
		}
		return v.To(dsl.I32), true
	case Team:
		return int32(v), true
	case int, int32, int64, uint32, uint, uint64:
		if neg, u, _ := goInt(x); (neg && int64(u) >= math.MinInt32) || (!neg && u <= math.MaxInt32) {
			return x, true
		}
		k.Errorf("%s: %s %v does not fit NVSHMEM's int (32 bits: -2^31 to 2^31-1)", what, arg, x)
		return nil, false
	}
	k.Errorf("%s: %s is %T; want a Go integer or an integer dsl.Value", what, arg, x)
	return nil, false
}

// goInt returns a Go integer x as its magnitude's bits: neg reports a negative value, whose
// two's-complement bits u holds (int64(u) is the value); ok is false for other types.
func goInt(x any) (neg bool, u uint64, ok bool) {
	switch v := x.(type) {
	case int:
		return v < 0, uint64(v), true
	case int32:
		return v < 0, uint64(v), true
	case int64:
		return v < 0, uint64(v), true
	case uint32:
		return false, uint64(v), true
	case uint:
		return false, uint64(v), true
	case uint64:
		return false, v, true
	}
	return false, 0, false
}

func checkScope(k *dsl.Kernel, what string, s Scope) bool {
	if s != Thread && s != Warp && s != Block {
		k.Errorf("%s: unknown scope %v (Thread, Warp or Block)", what, s)
		return false
	}
	return true
}

// Operand types of the PTX call ABI.
var (
	ptrT = dsl.U64 // pointers, size_t, uint64_t
	intT = dsl.I32 // int, nvshmem_team_t, sig_op, cmp
)

// call declares (once per kernel) and calls an NVSHMEM function.
func call(k *dsl.Kernel, name string, rets []dsl.Type, args []dsl.Type, vals ...any) dsl.Value {
	return k.Call(k.Extern(name, rets, args...), vals...)
}

// --- queries ---

// MyPE returns the calling PE's number (nvshmem_my_pe), an I32.
func MyPE(k *dsl.Kernel) dsl.Value { return call(k, "nvshmem_my_pe", []dsl.Type{intT}, nil) }

// NPEs returns the number of PEs (nvshmem_n_pes), an I32.
func NPEs(k *dsl.Kernel) dsl.Value { return call(k, "nvshmem_n_pes", []dsl.Type{intT}, nil) }

// TeamMyPE returns the calling PE's number in team (nvshmem_team_my_pe), -1 when not a member.
func TeamMyPE(k *dsl.Kernel, team any) dsl.Value {
	t, ok := int32Arg(k, "TeamMyPE", "team", team)
	if !ok {
		return k.Const(dsl.I32, 0)
	}
	return call(k, "nvshmem_team_my_pe", []dsl.Type{intT}, []dsl.Type{intT}, t)
}

// TeamNPEs returns the number of PEs in team (nvshmem_team_n_pes).
func TeamNPEs(k *dsl.Kernel, team any) dsl.Value {
	t, ok := int32Arg(k, "TeamNPEs", "team", team)
	if !ok {
		return k.Const(dsl.I32, 0)
	}
	return call(k, "nvshmem_team_n_pes", []dsl.Type{intT}, []dsl.Type{intT}, t)
}

// TeamTranslatePE returns the number in team dst of PE pe of team src, or -1
// (nvshmem_team_translate_pe).
func TeamTranslatePE(k *dsl.Kernel, src any, pe any, dst any) dsl.Value {
	s, ok1 := int32Arg(k, "TeamTranslatePE", "src team", src)
	p, ok2 := int32Arg(k, "TeamTranslatePE", "pe", pe)
	d, ok3 := int32Arg(k, "TeamTranslatePE", "dst team", dst)
	if !ok1 || !ok2 || !ok3 {
		return k.Const(dsl.I32, 0)
	}
	return call(k, "nvshmem_team_translate_pe", []dsl.Type{intT}, []dsl.Type{intT, intT, intT}, s, p, d)
}

// --- peer and multicast pointers ---

// PeerPtr returns a pointer through which the calling thread loads and stores PE pe's copy
// of the symmetric object p points into (nvshmem_ptr; nvshmem4py's get_peer_tensor), or a
// null pointer when pe's memory is not directly reachable. Make a tensor over it with
// k.MakeTensor.
func PeerPtr(k *dsl.Kernel, p dsl.Ptr, pe any) dsl.Ptr {
	if !checkSpace(k, "PeerPtr", "the pointer", p) {
		return p
	}
	x, ok := int32Arg(k, "PeerPtr", "pe", pe)
	if !ok {
		return p
	}
	a := call(k, "nvshmem_ptr", []dsl.Type{ptrT}, []dsl.Type{ptrT, intT}, p, x)
	return k.PtrFrom(a, p.Elem(), ptx.SpaceGlobal)
}

// MulticastPtr returns the multicast (NVLink SHARP) address of the symmetric object p points
// into for team (nvshmemx_mc_ptr; nvshmem4py's get_multicast_tensor), for multimem
// operations, or a null pointer when multicast is unavailable (for example with
// NVSHMEM_DISABLE_NVLS=1): test it and fall back.
func MulticastPtr(k *dsl.Kernel, team any, p dsl.Ptr) dsl.Ptr {
	if !checkSpace(k, "MulticastPtr", "the pointer", p) {
		return p
	}
	t, ok := int32Arg(k, "MulticastPtr", "team", team)
	if !ok {
		return p
	}
	a := call(k, "nvshmemx_mc_ptr", []dsl.Type{ptrT}, []dsl.Type{intT, ptrT}, t, p)
	return k.PtrFrom(a, p.Elem(), ptx.SpaceGlobal)
}

// IsNull reports whether a pointer returned by PeerPtr or MulticastPtr is null.
func IsNull(k *dsl.Kernel, p dsl.Ptr) dsl.Value { return k.PtrValue(p).Eq(uint64(0)) }

// --- ordering ---

// Quiet waits until every put, AMO and signal the calling PE issued is complete and visible
// (nvshmem_quiet).
func Quiet(k *dsl.Kernel) { call(k, "nvshmem_quiet", nil, nil) }

// Fence orders the puts, AMOs and signals the calling PE issued to each PE before the later
// ones (nvshmem_fence).
func Fence(k *dsl.Kernel) { call(k, "nvshmem_fence", nil, nil) }
