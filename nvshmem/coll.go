package nvshmem

import (
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/nvshmem/abi"
)

// Synchronization and collectives over teams, at thread, warp and block scope. A collective
// is called once per PE: by one thread (Thread), one whole warp (Warp) or one whole block
// (Block) of each PE of the team, in the same order on every PE.

// BarrierAll completes the calling PE's outstanding puts, AMOs and signals and waits until
// every PE has arrived (nvshmem_barrier_all, nvshmemx_barrier_all_warp, _block).
func BarrierAll(k *dsl.Kernel, s Scope) {
	if checkScope(k, "BarrierAll", s) {
		call(k, s.Func("barrier_all"), nil, nil)
	}
}

// SyncAll waits until every PE has arrived, without completing outstanding operations
// (nvshmem_sync_all, nvshmemx_sync_all_warp, _block).
func SyncAll(k *dsl.Kernel, s Scope) {
	if checkScope(k, "SyncAll", s) {
		call(k, s.Func("sync_all"), nil, nil)
	}
}

func teamCall(k *dsl.Kernel, what, base string, s Scope, team any) dsl.Value {
	t, ok := int32Arg(k, what, "team", team)
	if !ok || !checkScope(k, what, s) {
		return k.Const(dsl.I32, 0)
	}
	return call(k, s.Func(base), []dsl.Type{intT}, []dsl.Type{intT}, t)
}

// Barrier is BarrierAll over the PEs of team; it returns NVSHMEM's status, 0 on success
// (nvshmem_barrier, nvshmemx_barrier_warp, _block).
func Barrier(k *dsl.Kernel, s Scope, team any) dsl.Value {
	return teamCall(k, "Barrier", "barrier", s, team)
}

// TeamSync is SyncAll over the PEs of team (nvshmem_team_sync, nvshmemx_team_sync_warp,
// _block; nvshmem4py's sync).
func TeamSync(k *dsl.Kernel, s Scope, team any) dsl.Value {
	return teamCall(k, "TeamSync", "team_sync", s, team)
}

// ReduceOp is the operation of a reduction.
type ReduceOp = abi.ReduceOp

// The reductions. And, Or and Xor are for integers.
const (
	Sum  = abi.Sum
	Prod = abi.Prod
	Min  = abi.Min
	Max  = abi.Max
	And  = abi.And
	Or   = abi.Or
	Xor  = abi.Xor
)

// ReduceOps returns every reduction.
func ReduceOps() []ReduceOp { return abi.ReduceOps() }

// ReduceTypes returns the element types NVSHMEM defines op's reduction for.
func ReduceTypes(op ReduceOp) []dsl.Type {
	var out []dsl.Type
	for _, t := range Types() {
		if abi.ReduceDefined(op, t) {
			out = append(out, t)
		}
	}
	return out
}

func collArgs(k *dsl.Kernel, what string, s Scope, team, dst, src any) (t any, d, sr buf, n any, ok bool) {
	d, sr, n, ok = transfer(k, what, s, dst, src)
	t, okT := int32Arg(k, what, "team", team)
	return t, d, sr, n, ok && okT
}

var collSig = []dsl.Type{intT, ptrT, ptrT, ptrT}

// Reduce combines min(size(dst), size(src)) elements of src by op over the PEs of team and
// writes the result to dst on every PE; it returns NVSHMEM's status, 0 on success
// (nvshmem_<type>_<op>_reduce, nvshmemx_<type>_<op>_reduce_warp, _block). dst and src are
// symmetric.
func Reduce(k *dsl.Kernel, s Scope, team any, op ReduceOp, dst, src any) dsl.Value {
	what := "Reduce " + string(op)
	t, d, sr, n, ok := collArgs(k, what, s, team, dst, src)
	if !ok {
		return k.Const(dsl.I32, 0)
	}
	if !abi.ReduceDefined(op, d.elem) {
		if op == And || op == Or || op == Xor || op == Sum || op == Prod || op == Min || op == Max {
			k.Errorf("%s: NVSHMEM has no %s reduction of %s", what, op, d.elem)
		} else {
			k.Errorf("%s: unknown reduction %q", what, op)
		}
		return k.Const(dsl.I32, 0)
	}
	return call(k, s.Func(typeName(d.elem)+"_"+string(op)+"_reduce"), []dsl.Type{intT}, collSig, t, d.p, sr.p, sizeArg(n))
}

// ReduceScatter combines src by op over the PEs of team and leaves block i of the result on
// PE i: dst holds the block, src n_pes blocks; the block is size(dst) elements
// (nvshmem_<type>_<op>_reducescatter, nvshmemx_<type>_<op>_reducescatter_warp, _block).
func ReduceScatter(k *dsl.Kernel, s Scope, team any, op ReduceOp, dst, src any) dsl.Value {
	what := "ReduceScatter " + string(op)
	t, d, sr, _, ok := collArgs(k, what, s, team, dst, src)
	if !ok {
		return k.Const(dsl.I32, 0)
	}
	if !abi.ReduceDefined(op, d.elem) {
		k.Errorf("%s: NVSHMEM has no %s reduction of %s", what, op, d.elem)
		return k.Const(dsl.I32, 0)
	}
	if dn, sn, static := staticCounts(d, sr); static && dn > 0 && (sn < dn || sn%dn != 0) {
		k.Errorf("%s: dst holds %d elements, src %d: src holds n_pes blocks of dst's size (a whole multiple of it, at least one), which NVSHMEM reads", what, dn, sn)
		return k.Const(dsl.I32, 0)
	}
	return call(k, s.Func(typeName(d.elem)+"_"+string(op)+"_reducescatter"), []dsl.Type{intT}, collSig, t, d.p, sr.p, sizeArg(d.n))
}

// Fcollect concatenates src of every PE of team, in PE order, into dst on every PE: dst holds
// n_pes * size(src) elements (nvshmem_<type>_fcollect, nvshmemx_<type>_fcollect_warp,
// _block).
func Fcollect(k *dsl.Kernel, s Scope, team any, dst, src any) dsl.Value {
	const what = "Fcollect"
	t, d, sr, _, ok := collArgs(k, what, s, team, dst, src)
	if !ok {
		return k.Const(dsl.I32, 0)
	}
	if dn, sn, static := staticCounts(d, sr); static && sn > 0 && (dn < sn || dn%sn != 0) {
		k.Errorf("%s: dst holds %d elements, src %d: dst receives n_pes blocks of src's size (a whole multiple of it, at least one), which NVSHMEM writes", what, dn, sn)
		return k.Const(dsl.I32, 0)
	}
	return call(k, s.Func(typeName(d.elem)+"_fcollect"), []dsl.Type{intT}, collSig, t, d.p, sr.p, sizeArg(sr.n))
}

// staticCounts returns the element counts of d and s when both are Go ints (known when the
// kernel is built).
func staticCounts(d, s buf) (dn, sn int, ok bool) {
	dn, dok := d.n.(int)
	sn, sok := s.n.(int)
	return dn, sn, dok && sok
}

// Broadcast copies min(size(dst), size(src)) elements of src on PE root of team into dst on
// every PE of the team (nvshmem_<type>_broadcast, nvshmemx_<type>_broadcast_warp, _block).
func Broadcast(k *dsl.Kernel, s Scope, team any, dst, src any, root any) dsl.Value {
	const what = "Broadcast"
	t, d, sr, n, ok := collArgs(k, what, s, team, dst, src)
	r, okR := int32Arg(k, what, "root", root)
	if !ok || !okR {
		return k.Const(dsl.I32, 0)
	}
	return call(k, s.Func(typeName(d.elem)+"_broadcast"), []dsl.Type{intT}, append(collSig, intT), t, d.p, sr.p, sizeArg(n), r)
}

// Alltoall exchanges blocks between the PEs of team: block j of src on PE i lands in block i
// of dst on PE j. Each block is min(size(dst), size(src)) / n_pes elements, n_pes read at run
// time with nvshmem_team_n_pes (nvshmem_<type>_alltoall, nvshmemx_<type>_alltoall_warp,
// _block).
func Alltoall(k *dsl.Kernel, s Scope, team any, dst, src any) dsl.Value {
	const what = "Alltoall"
	t, d, sr, n, ok := collArgs(k, what, s, team, dst, src)
	if !ok {
		return k.Const(dsl.I32, 0)
	}
	npes := call(k, "nvshmem_team_n_pes", []dsl.Type{intT}, []dsl.Type{intT}, t).To(dsl.U64)
	var total dsl.Value
	if c, static := n.(int); static {
		total = k.Const(dsl.U64, uint64(c))
	} else {
		total = n.(dsl.Value)
	}
	return call(k, s.Func(typeName(d.elem)+"_alltoall"), []dsl.Type{intT}, collSig, t, d.p, sr.p, total.Div(npes))
}
