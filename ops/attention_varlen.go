package ops

import (
	"context"
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// AttentionVarLenOptions are AttentionVarLen's less common settings. A nil
// *AttentionVarLenOptions means no mask, Scale 1/sqrt(head dim), MaxSeqQ totalQ and no LSE.
type AttentionVarLenOptions struct {
	// Causal masks key j of a sequence from its query i unless j <= i + seqK_b - seqQ_b
	// (bottom-right per sequence, as Attention).
	Causal bool
	// Scale multiplies Q K^T; 0 means 1/sqrt(head dim). It must be positive and finite.
	Scale float32
	// MaxSeqQ is the longest query sequence (FlashAttention's max_seqlen_q): the grid covers
	// this many queries a sequence, and the rows of a longer sequence past it are not
	// written. 0 means totalQ (always enough; more blocks that return at once).
	MaxSeqQ int
	// LSE, when set, receives each row's log-sum-exp: [heads, totalQ] f32, contiguous. The
	// zero Tensor is unset.
	LSE Tensor[float32]
}

// AttentionVarLen computes forward attention over a batch of sequences of different
// lengths packed end to end (FlashAttention's varlen): q and out are [totalQ, heads, d], k
// and v [totalK, kvHeads, d], all contiguous and 16-byte aligned, of fp.BF16 or fp.F16; d is
// 64, 128 or 256; heads a multiple of kvHeads. cuQ and cuK are [batch+1] int32 prefix sums
// on the device (cu_seqlens_q, cu_seqlens_k): sequence b's queries are rows cuQ[b]..cuQ[b+1]
// and its keys rows cuK[b]..cuK[b+1]. A sequence without keys gets O 0 and LSE -Inf.
//
// The offsets are trusted device data, read by the kernel: they are not checked, but the
// kernel clamps them so that it never faults. Sequence b starts at cu[b] clamped to [0,
// total] and ends at cu[b+1] clamped to [start, total]; a decreasing pair is an empty
// sequence, and sequences that overlap (after a decrease) write their common rows in an
// unspecified order. Rows of no sequence are not written. A block reads the rows after its
// sequence (masked, never stored), so a non-finite value in a neighbouring sequence's V can
// reach a row's output (0 * Inf).
//
// It runs kernels.AttentionSM90 with VarLen (compute capability 9.0; elsewhere it is an
// error), configured as Attention's (AttentionSM90ConfigFor over MaxSeqQ, keys not known). out may be q
// itself but shares no memory with k, v, cuQ, cuK or the LSE.
func AttentionVarLen[T jit.Elem](ctx context.Context, s *jit.Stream, out, q, k, v Tensor[T], cuQ, cuK Tensor[int32], o *AttentionVarLenOptions) error {
	const op = "AttentionVarLen"
	dt := jit.ElemType[T]()
	dev, err := attentionOperands(ctx, op, q, out, [2]named[T]{{"k", k}, {"v", v}}, [2]named[int32]{{"cuQ", cuQ}, {"cuK", cuK}}, 3,
		[4]string{"[totalQ, heads, d]", "[totalK, kvHeads, d]", "[totalK, kvHeads, d]", "[totalQ, heads, d] (q's)"})
	if err != nil {
		return err
	}
	totalQ, heads, hd := q.shape[0], q.shape[1], q.shape[2]
	totalK, kvHeads := k.shape[0], k.shape[1]
	if hd != 64 && hd != 128 && hd != 256 {
		return fmt.Errorf("ops: %s: q has head dim %d (shape %v); the kernel takes 64, 128 or 256", op, hd, q.Shape())
	}
	if k.shape[2] != hd {
		return fmt.Errorf("ops: %s: k has shape %v, q %v: k must be [totalK, kvHeads, d] with q's head dim %d", op, k.Shape(), q.Shape(), hd)
	}
	if err := sameShape(op, "v", v, "k", k); err != nil {
		return err
	}
	if err := sameShape(op, "out", out, "q", q); err != nil {
		return err
	}
	if heads%kvHeads != 0 {
		return fmt.Errorf("ops: %s: q has %d heads, k and v %d: heads must be a multiple of kvHeads (GQA shares each K/V head by heads/kvHeads query heads)", op, heads, kvHeads)
	}
	if cuQ.rank != 1 || cuQ.shape[0] < 2 {
		return fmt.Errorf("ops: %s: cuQ has shape %v; want [batch+1] (cu_seqlens_q, batch at least 1)", op, cuQ.Shape())
	}
	batch := cuQ.shape[0] - 1
	if cuK.rank != 1 || cuK.shape[0] != batch+1 {
		return fmt.Errorf("ops: %s: cuK has shape %v; want [%d] (cu_seqlens_k: cuQ's batch+1)", op, cuK.Shape(), batch+1)
	}
	for _, x := range []struct {
		name string
		t    Tensor[T]
	}{{"q", q}, {"k", k}, {"v", v}, {"out", out}} {
		if err := contiguous(op, x.name, "attention", x.t); err != nil {
			return err
		}
		if err := need16(op, x.name, "attention (16-byte TMA rows)", x.t); err != nil {
			return err
		}
	}
	for _, x := range []struct {
		name string
		t    Tensor[int32]
	}{{"cuQ", cuQ}, {"cuK", cuK}} {
		if err := contiguous(op, x.name, "attention", x.t); err != nil {
			return err
		}
	}
	var causal bool
	scale := float32(1 / math.Sqrt(float64(hd)))
	maxQ := totalQ
	lse := jit.AnyPtr{Elem: ptx.F32}
	if o != nil {
		causal = o.Causal
		if math.IsNaN(float64(o.Scale)) || math.IsInf(float64(o.Scale), 0) || o.Scale < 0 {
			return fmt.Errorf("ops: %s: AttentionVarLenOptions.Scale %v: want a positive finite scale (0: 1/sqrt(d))", op, o.Scale)
		}
		if o.Scale != 0 {
			scale = o.Scale
		}
		if o.MaxSeqQ < 0 {
			return fmt.Errorf("ops: %s: AttentionVarLenOptions.MaxSeqQ %d: want the longest query sequence (0: totalQ)", op, o.MaxSeqQ)
		}
		if o.MaxSeqQ > 0 {
			maxQ = min(o.MaxSeqQ, totalQ) // no sequence is longer than the tensor
		}
		if o.LSE.buf != nil {
			if err := sameDevice(op, "LSE", dev, o.LSE); err != nil {
				return err
			}
			if o.LSE.rank != 2 || o.LSE.shape[0] != heads || o.LSE.shape[1] != totalQ {
				return fmt.Errorf("ops: %s: LSE has shape %v; want [%d %d] ([heads, totalQ])", op, o.LSE.Shape(), heads, totalQ)
			}
			if err := contiguous(op, "LSE", "attention", o.LSE); err != nil {
				return err
			}
			lse = ptrOf(o.LSE)
		}
	}
	if err := streamOn(op, s, dev); err != nil {
		return err
	}
	var lseT Tensor[float32]
	if o != nil {
		lseT = o.LSE
	}
	if err := attentionApart(op, q, out, [2]named[T]{{"k", k}, {"v", v}}, [2]named[int32]{{"cuQ", cuQ}, {"cuK", cuK}}, lseT); err != nil {
		return err
	}
	st := stateOf(dev)
	key := planKey{op: "attention_varlen", in: dt, dims: [3]int{maxQ, totalQ, hd}, lds: [4]int{batch, heads, kvHeads, totalK}, target: st.target}
	if causal {
		key.flags = 1
	}
	p := st.lookup(key)
	if p == nil {
		if p, err = planAttentionVarLen(ctx, st, key); err != nil {
			if _, ok := err.(refusal); ok {
				return fmt.Errorf("ops: %s: %w", op, err)
			}
			return planFailed(op, dev, err)
		}
	}
	if lse.Addr == 0 {
		lse = jit.AnyPtr{Addr: p.lse.DevPtr(), Elem: ptx.F32}
	}
	lc := jit.LaunchConfig{Grid: jit.D1(p.grid), Block: jit.D1(p.block), SharedMem: p.shared, Stream: s, Context: ctx}
	ak := argKey{ptr: [8]jit.DevicePtr{q.Ptr(), k.Ptr(), v.Ptr(), out.Ptr(), lse.Addr, cuQ.Ptr(), cuK.Ptr()}, scalar: [2]uint64{uint64(math.Float32bits(scale))},
		mem: [3]*jit.Memory{q.buf.Memory(), k.buf.Memory(), v.buf.Memory()}}
	if enc := p.cached(&ak); enc != nil {
		return launch(op, dev, p.fn, lc, enc)
	}
	args := []any{ptrOf(q), ptrOf(k), ptrOf(v), ptrOf(out), lse,
		uint32(batch), uint32(heads), uint32(kvHeads), uint32(maxQ), uint32(0), scale}
	for _, x := range []struct {
		name string
		spec kernels.AttentionTMASpec
		t    Tensor[T]
	}{{"q", p.attn.Q, q}, {"k", p.attn.K, k}, {"v", p.attn.V, v}} {
		var opts []jit.TensorMapOption
		if x.t.off > 0 {
			opts = append(opts, jit.WithOffset(uint64(x.t.off)))
		}
		tm, err := jit.NewTensorMap(x.t.buf, x.spec.Dims[:], x.spec.Strides[:], x.spec.Box[:], jit.Swizzle(x.spec.Swizzle), opts...)
		if err != nil {
			return planFailed(op, dev, fmt.Errorf("%s's tensor map: %w", x.name, err))
		}
		args = append(args, tm)
	}
	args = append(args, ptrOf(cuQ), ptrOf(cuK), uint32(totalQ), uint32(totalK))
	return p.first(op, dev, lc, &ak, args)
}

// planAttentionVarLen builds and loads the VarLen sm_90a attention of key, with its scratch
// LSE (for calls that pass none).
func planAttentionVarLen(ctx context.Context, st *devState, key planKey) (*plan, error) {
	maxQ, totalQ, hd := key.dims[0], key.dims[1], key.dims[2]
	batch, heads, kvHeads, totalK := key.lds[0], key.lds[1], key.lds[2], key.lds[3]
	cfg, err := AttentionSM90ConfigFor(st.d.Info(), key.in, hd, maxQ, 0, key.flags&1 != 0) // keys per sequence vary: the default step
	if err == nil && st.gemm != ptx.SM90a {
		err = fmt.Errorf("attention_sm90 needs the sm_90a target; the device's kernels target %s", st.gemm)
	}
	if err != nil {
		return nil, refusal{fmt.Errorf("the varlen attention runs the sm_90a kernel only: %w", err)}
	}
	// Not persistent (not measured so): sequences of unequal length strided over the blocks
	// would balance like causal tiles, which ran a third slower so (docs/attention.md).
	cfg.VarLen, cfg.Persistent = true, false
	if cfg.Schedule == kernels.AttentionDynamic { // Persistent only: the grid in its longest-first order
		cfg.Schedule = kernels.AttentionLPT
	}
	l, err := cfg.LaunchVarLen(batch, heads, kvHeads, maxQ, totalQ, totalK)
	if err != nil {
		return nil, refusal{err}
	}
	fn, err := st.function(ctx, cfg.Name(), ptx.SM90a, func(kb *dsl.Kernel) { kernels.AttentionSM90(kb, cfg) })
	if err != nil {
		return nil, err
	}
	p := &plan{fn: fn, name: cfg.Name(), grid: l.Grid, block: l.Block, shared: l.SharedBytes, attn: l, kind: attnSM90}
	if q := st.lookup(key); q != nil { // a concurrent call planned it meanwhile
		return q, nil
	}
	lse, err := jit.Alloc[float32](st.d, heads*totalQ)
	if err != nil {
		return nil, err
	}
	p.lse = lse
	st.store(key, p)
	return p, nil
}
