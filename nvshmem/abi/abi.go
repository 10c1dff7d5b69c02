// Package abi is NVSHMEM 3.x's device ABI as data: the names of the device functions, the
// constants they take (scopes, teams, signal operations, comparisons), the reductions and
// atomic memory operations and the element types each is defined for.
//
// It imports no builder: package nvshmem (the device API as DSL operations) and package
// nvshmem/shmemu (the device library emulated on package emu) both read it.
package abi

import (
	"fmt"
	"sort"

	"github.com/kgen-dev/kgen/ptx"
)

// Scope is the group of threads that calls an operation together: one thread, a whole warp
// (nvshmemx_*_warp) or a whole block (nvshmemx_*_block).
type Scope int

// The scopes.
const (
	Thread Scope = iota
	Warp
	Block
)

func (s Scope) String() string {
	switch s {
	case Thread:
		return "thread"
	case Warp:
		return "warp"
	case Block:
		return "block"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// Func returns the device function of base at scope s: "nvshmem_"+base for Thread
// ("nvshmem_float_put"), "nvshmemx_"+base+"_warp" or "_block" otherwise.
func (s Scope) Func(base string) string {
	if s == Thread {
		return "nvshmem_" + base
	}
	return "nvshmemx_" + base + "_" + s.String()
}

// Team is an NVSHMEM team handle (nvshmem_team_t, an int).
type Team int32

// The predefined teams (NVSHMEM_TEAM_WORLD, NVSHMEM_TEAM_SHARED, NVSHMEMX_TEAM_NODE).
const (
	TeamWorld  Team = 0
	TeamShared Team = 1
	TeamNode   Team = 2
)

// SignalOp is how a signal operation updates the signal word (NVSHMEM_SIGNAL_SET, _ADD).
type SignalOp int32

// The signal operations.
const (
	SignalSet SignalOp = 9
	SignalAdd SignalOp = 10
)

// Cmp is the comparison of a wait (NVSHMEM_CMP_*).
type Cmp int32

// The comparisons (NVSHMEM's numbering: LE comes before LT).
const (
	CmpEQ Cmp = 0
	CmpNE Cmp = 1
	CmpGT Cmp = 2
	CmpLE Cmp = 3
	CmpLT Cmp = 4
	CmpGE Cmp = 5
)

// typeNames are NVSHMEM's names of the element types of typed RMA and collectives.
var typeNames = map[ptx.Type]string{
	ptx.F16: "half", ptx.BF16: "bfloat16", ptx.F32: "float", ptx.F64: "double",
	ptx.S8: "int8", ptx.S16: "int16", ptx.S32: "int32", ptx.S64: "int64",
	ptx.U8: "uint8", ptx.U16: "uint16", ptx.U32: "uint32", ptx.U64: "uint64",
}

// TypeName returns NVSHMEM's name of element type t ("float", "int32", ...) and whether
// NVSHMEM has typed operations for it.
func TypeName(t ptx.Type) (string, bool) {
	n, ok := typeNames[t]
	return n, ok
}

// Types returns the element types of typed put/get, reductions, fcollect, broadcast and
// alltoall, in a fixed order.
func Types() []ptx.Type {
	return []ptx.Type{ptx.F16, ptx.BF16, ptx.F32, ptx.F64, ptx.S8, ptx.S16, ptx.S32, ptx.S64, ptx.U8, ptx.U16, ptx.U32, ptx.U64}
}

// ScalarTypes returns the element types of p and g. half and bfloat16 are missing: NVSHMEM
// passes them by value as 2-byte aggregates (.param .align 2 .b8 x[2]).
func ScalarTypes() []ptx.Type {
	return []ptx.Type{ptx.F32, ptx.F64, ptx.S8, ptx.S16, ptx.S32, ptx.S64, ptx.U8, ptx.U16, ptx.U32, ptx.U64}
}

// ReduceOp is the operation of a reduction.
type ReduceOp string

// The reductions. And, Or and Xor are for integers.
const (
	Sum  ReduceOp = "sum"
	Prod ReduceOp = "prod"
	Min  ReduceOp = "min"
	Max  ReduceOp = "max"
	And  ReduceOp = "and"
	Or   ReduceOp = "or"
	Xor  ReduceOp = "xor"
)

// ReduceOps returns every reduction.
func ReduceOps() []ReduceOp { return []ReduceOp{Sum, Prod, Min, Max, And, Or, Xor} }

// ReduceDefined reports whether NVSHMEM defines op's reduction (and reduce-scatter) of t.
func ReduceDefined(op ReduceOp, t ptx.Type) bool {
	switch op {
	case Sum, Prod, Min, Max:
		_, ok := typeNames[t]
		return ok
	case And, Or, Xor:
		return t.IsInt()
	}
	return false
}

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

// AMOInfo is what an AMO takes and returns, and the NVSHMEM type name of each element type
// it has (from the 3.4.5 bitcode: the arithmetic AMOs have no int64 form, only long).
type AMOInfo struct {
	TakesCond  bool // compare_swap's comparand
	TakesValue bool // the operand
	Fetches    bool // returns the old value
	// Types maps each element type the AMO is defined for to NVSHMEM's name of it.
	Types map[ptx.Type]string
	// Note lists those types for error messages.
	Note string
}

var (
	amoExtended = map[ptx.Type]string{ptx.F32: "float", ptx.F64: "double", ptx.S32: "int32", ptx.S64: "int64", ptx.U32: "uint32", ptx.U64: "uint64"}
	amoBitwise  = map[ptx.Type]string{ptx.S32: "int32", ptx.S64: "int64", ptx.U32: "uint32", ptx.U64: "uint64"}
	amoArith    = map[ptx.Type]string{ptx.S32: "int32", ptx.S64: "long", ptx.U32: "uint32", ptx.U64: "uint64"}
)

const (
	amoExtendedNote = "float, double, int32, int64, uint32, uint64"
	amoBitwiseNote  = "int32, int64, uint32, uint64"
	amoArithNote    = "int32, int64 (NVSHMEM's long), uint32, uint64"
)

func amo(cond, value, fetches bool, types map[ptx.Type]string, note string) AMOInfo {
	return AMOInfo{TakesCond: cond, TakesValue: value, Fetches: fetches, Types: types, Note: note}
}

var amos = map[AMO]AMOInfo{
	AtomicFetchOp:       amo(false, false, true, amoExtended, amoExtendedNote),
	AtomicSetOp:         amo(false, true, false, amoExtended, amoExtendedNote),
	AtomicSwapOp:        amo(false, true, true, amoExtended, amoExtendedNote),
	AtomicCompareSwapOp: amo(true, true, true, amoBitwise, amoBitwiseNote),
	AtomicIncOp:         amo(false, false, false, amoArith, amoArithNote),
	AtomicFetchIncOp:    amo(false, false, true, amoArith, amoArithNote),
	AtomicAddOp:         amo(false, true, false, amoArith, amoArithNote),
	AtomicFetchAddOp:    amo(false, true, true, amoArith, amoArithNote),
	AtomicAndOp:         amo(false, true, false, amoBitwise, amoBitwiseNote),
	AtomicFetchAndOp:    amo(false, true, true, amoBitwise, amoBitwiseNote),
	AtomicOrOp:          amo(false, true, false, amoBitwise, amoBitwiseNote),
	AtomicFetchOrOp:     amo(false, true, true, amoBitwise, amoBitwiseNote),
	AtomicXorOp:         amo(false, true, false, amoBitwise, amoBitwiseNote),
	AtomicFetchXorOp:    amo(false, true, true, amoBitwise, amoBitwiseNote),
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

// AMOSpec returns what op takes and returns, and whether op is an AMO.
func AMOSpec(op AMO) (AMOInfo, bool) {
	info, ok := amos[op]
	return info, ok
}

// AMOTypes returns the element types NVSHMEM defines op for.
func AMOTypes(op AMO) []ptx.Type {
	var out []ptx.Type
	for _, t := range Types() {
		if _, ok := amos[op].Types[t]; ok {
			out = append(out, t)
		}
	}
	return out
}

// AMOName returns the device function of op on element type t ("nvshmem_long_atomic_fetch_add").
func AMOName(op AMO, t ptx.Type) (string, bool) {
	n, ok := amos[op].Types[t]
	if !ok {
		return "", false
	}
	return "nvshmem_" + n + "_atomic_" + string(op), true
}

// Functions returns, sorted, the name of every NVSHMEM device function package nvshmem's
// operations can call: the ABI test checks each against the device library, and the
// emulation (package nvshmem/shmemu) implements each.
func Functions() []string {
	set := map[string]bool{}
	add := func(n string) { set[n] = true }
	for _, n := range []string{
		"nvshmem_my_pe", "nvshmem_n_pes", "nvshmem_team_my_pe", "nvshmem_team_n_pes", "nvshmem_team_translate_pe",
		"nvshmem_ptr", "nvshmemx_mc_ptr", "nvshmem_quiet", "nvshmem_fence",
		"nvshmemx_signal_op", "nvshmem_signal_wait_until", "nvshmem_signal_fetch",
	} {
		add(n)
	}
	scopes := []Scope{Thread, Warp, Block}
	for _, s := range scopes {
		for _, b := range []string{"barrier_all", "sync_all", "barrier", "team_sync"} {
			add(s.Func(b))
		}
	}
	for _, t := range ScalarTypes() {
		add("nvshmem_" + typeNames[t] + "_p")
		add("nvshmem_" + typeNames[t] + "_g")
	}
	for _, t := range Types() {
		tn := typeNames[t]
		for _, s := range scopes {
			for _, op := range []string{"put", "put_nbi", "get", "get_nbi", "put_signal", "put_signal_nbi", "fcollect", "broadcast", "alltoall"} {
				add(s.Func(tn + "_" + op))
			}
			for _, op := range ReduceOps() {
				if ReduceDefined(op, t) {
					add(s.Func(tn + "_" + string(op) + "_reduce"))
					add(s.Func(tn + "_" + string(op) + "_reducescatter"))
				}
			}
		}
		for _, op := range AMOs() {
			if n, ok := AMOName(op, t); ok {
				add(n)
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
