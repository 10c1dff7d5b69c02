package dsl

import "github.com/kgen-dev/kgen/ptx"

// Bulk copies (cp.async.bulk, PTX 8.0, sm_90): the TMA unit moves a contiguous run of bytes
// between global and shared memory with no tensor map. One thread issues each copy; the
// copy then runs on its own while the thread (and the SM's other warps) go on.
//
//   - BulkLoad: global -> shared, completing its bytes as transactions on an mbarrier
//     (cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes).
//   - BulkStore, BulkReduce: shared -> global (a GPU's own memory or a peer's, through a peer
//     pointer), completed per thread by BulkCommit and BulkWait
//     (cp.async.bulk.global.shared::cta.bulk_group, cp.reduce.async.bulk...).
//   - BulkPrefetchL2: global -> L2 (cp.async.bulk.prefetch.L2.global).
//
// The size is a multiple of 16 bytes and both addresses are 16-byte aligned. Build checks a
// constant size and a pointer whose constant offset breaks a known 16-byte alignment; a
// run-time size or address that breaks the rule is the caller's to avoid (the GPU faults;
// the emulator reports a misaligned access naming the instruction's Go line).

// BulkMaxBytes bounds a constant bulk copy size: a block's largest shared memory (227 KiB).
const BulkMaxBytes = 227 << 10

// bulkSize returns the size operand (a Go int or a U32 Value), checking a constant one.
func (k *Kernel) bulkSize(what string, size any) (ptx.Operand, bool) {
	n := int64(-1)
	switch x := size.(type) {
	case Value:
		if !k.own(x, what) {
			return nil, false
		}
		if x.t != U32 {
			k.errorf("%s: the size is a %s Value; want U32 (convert with To)", what, x.t)
			return nil, false
		}
		if !x.IsConst() {
			return k.operand(x), true
		}
		n = constInt(x)
	case int:
		n = int64(x)
	default:
		k.errorf("%s: the size must be a Go int or a U32 Value, got %T", what, size)
		return nil, false
	}
	if n <= 0 || n%16 != 0 || n > BulkMaxBytes {
		k.errorf("%s: %d bytes; a bulk copy moves a positive multiple of 16 bytes, at most %d (BulkMaxBytes)", what, n, BulkMaxBytes)
		return nil, false
	}
	return ptx.IntImm(ptx.U32, n), true
}

// bulkPtr checks a bulk copy's address: of this kernel, in space, and not provably off a
// 16-byte boundary (a base known 16-byte aligned plus a constant offset that is not).
func (k *Kernel) bulkPtr(what, role string, p Ptr, space ptx.Space) bool {
	if !k.checkPtr(p, what) {
		return false
	}
	if p.space != space {
		k.errorf("%s: the %s is a %s pointer; want %s", what, role, p.space, space)
		return false
	}
	if p.align > 0 && p.align%16 == 0 && p.off%16 != 0 {
		k.errorf("%s: the %s is %d bytes past a 16-byte boundary; bulk copies need 16-byte aligned addresses", what, role, ((p.off%16)+16)%16)
		return false
	}
	return true
}

func (k *Kernel) bulkTarget(what string) bool {
	if k.target.SM() < 90 {
		k.errorf("%s: bulk copies need sm_90; the kernel targets %s", what, k.target)
		return false
	}
	return true
}

// BulkLoad copies size bytes (a Go int or a U32 Value: a positive multiple of 16) from global
// memory at src to shared memory at dst, both 16-byte aligned, and completes size
// transaction bytes on bar (cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes).
// Issue it from one thread after an arrival that expects the bytes (bar.ArriveExpectTx, by
// that thread or another); threads read dst after bar.Wait of that phase. src may be a peer
// GPU's memory (a PeerTable pointer).
func (k *Kernel) BulkLoad(dst, src Ptr, size any, bar Mbarrier) {
	if !k.live() {
		return
	}
	const what = "BulkLoad"
	defer k.hold()()
	if !k.bulkTarget(what) || !k.bulkPtr(what, "destination", dst, ptx.SpaceShared) || !k.bulkPtr(what, "source", src, ptx.SpaceGlobal) {
		return
	}
	if bar.k != k {
		k.errorf("%s: the barrier is not of this kernel", what)
		return
	}
	n, ok := k.bulkSize(what, size)
	if !ok {
		return
	}
	k.emit(&ptx.Instr{Op: "cp.async.bulk", Q: []string{"shared::cluster", "global", "mbarrier::complete_tx::bytes"},
		Args: []ptx.Operand{dst.addrOperand(), src.addrOperand(), n, bar.mem()}})
}

// BulkStore copies size bytes (a Go int or a U32 Value: a positive multiple of 16) from
// shared memory at src to global memory at dst, both 16-byte aligned
// (cp.async.bulk.global.shared::cta.bulk_group). dst may be a peer GPU's memory (a PeerTable
// pointer): the copy then crosses NVLink. Issue it from one thread, after every thread that
// wrote src ran FenceProxyAsync and a barrier ordered those writes before the issue; then
// BulkCommit, and BulkWait(n, true) before src is written again, BulkWait(n, false) before
// the stores count as done (before a release that publishes them to another thread or GPU).
func (k *Kernel) BulkStore(dst, src Ptr, size any) {
	if !k.live() {
		return
	}
	const what = "BulkStore"
	defer k.hold()()
	if !k.bulkTarget(what) || !k.bulkPtr(what, "destination", dst, ptx.SpaceGlobal) || !k.bulkPtr(what, "source", src, ptx.SpaceShared) {
		return
	}
	n, ok := k.bulkSize(what, size)
	if !ok {
		return
	}
	k.emit(&ptx.Instr{Op: "cp.async.bulk", Q: []string{"global", "shared::cta", "bulk_group"},
		Args: []ptx.Operand{dst.addrOperand(), src.addrOperand(), n}})
}

// bulkReduceTypes lists, per operator, the element types cp.reduce.async.bulk takes into
// global memory (PTX ISA 8.0; ptxas 13 agrees).
var bulkReduceTypes = map[ReduceOp][]Type{
	Sum:    {U32, I32, U64, F32, F64, F16, BF16},
	Min:    {U32, I32, U64, I64, F16, BF16},
	Max:    {U32, I32, U64, I64, F16, BF16},
	BitAnd: {U32, I32, U64, I64},
	BitOr:  {U32, I32, U64, I64},
	BitXor: {U32, I32, U64, I64},
}

// BulkReduce combines size bytes of src's elements (shared memory) into dst's (global memory,
// a peer GPU's through a PeerTable pointer) with op, element by element, each element
// atomically (cp.reduce.async.bulk.global.shared::cta.bulk_group.op.type). Both pointers hold
// the same element type: Sum of u32, s32, u64, f32, f64, f16, bf16 (f16 and bf16 with
// .noftz: subnormals are kept); Min and Max of 32- and 64-bit integers, f16, bf16; the
// bitwise operators of 32- and 64-bit integers. Completion and the rules on size, alignment
// and the source's writers are BulkStore's.
func (k *Kernel) BulkReduce(op ReduceOp, dst, src Ptr, size any) {
	if !k.live() {
		return
	}
	const what = "BulkReduce"
	defer k.hold()()
	if !k.bulkTarget(what) || !k.bulkPtr(what, "destination", dst, ptx.SpaceGlobal) || !k.bulkPtr(what, "source", src, ptx.SpaceShared) {
		return
	}
	if dst.elem != src.elem {
		k.errorf("%s: the destination holds %s, the source %s", what, dst.elem, src.elem)
		return
	}
	t := dst.elem
	okType := false
	for _, x := range bulkReduceTypes[op] {
		okType = okType || x == t
	}
	if !okType {
		k.errorf("%s: %s of %s: cp.reduce.async.bulk into global memory takes %v", what, op, t, bulkReduceTypes[op])
		return
	}
	n, ok := k.bulkSize(what, size)
	if !ok {
		return
	}
	opq := map[ReduceOp]string{Sum: "add", Min: "min", Max: "max", BitAnd: "and", BitOr: "or", BitXor: "xor"}[op]
	q := []string{"global", "shared::cta", "bulk_group", opq}
	pt := t
	switch {
	case t == F16 || t == BF16:
		if op == Sum {
			q = append(q, "noftz")
		}
	case op == BitAnd || op == BitOr || op == BitXor:
		pt = ptx.B32
		if t.Bits() == 64 {
			pt = ptx.B64
		}
	}
	k.emit(&ptx.Instr{Op: "cp.reduce.async.bulk", Q: q, Types: []ptx.Type{pt},
		Args: []ptx.Operand{dst.addrOperand(), src.addrOperand(), n}})
}

// BulkPrefetchL2 asks the TMA unit to bring size bytes (a Go int or a U32 Value: a positive
// multiple of 16) of global memory at src (16-byte aligned) into the L2 cache
// (cp.async.bulk.prefetch.L2.global): a hint, with no completion to wait for.
func (k *Kernel) BulkPrefetchL2(src Ptr, size any) {
	if !k.live() {
		return
	}
	const what = "BulkPrefetchL2"
	defer k.hold()()
	if !k.bulkTarget(what) || !k.bulkPtr(what, "source", src, ptx.SpaceGlobal) {
		return
	}
	n, ok := k.bulkSize(what, size)
	if !ok {
		return
	}
	k.emit(&ptx.Instr{Op: "cp.async.bulk.prefetch", Q: []string{"L2", "global"}, Args: []ptx.Operand{src.addrOperand(), n}})
}
