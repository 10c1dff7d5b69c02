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

// AttentionOptions are Attention's less common settings. A nil *AttentionOptions means no
// mask, Scale 1/sqrt(head dim) and no LSE.
type AttentionOptions struct {
	// Causal masks key j from query i unless j <= i + seqK - seqQ (aligned bottom-right,
	// as FlashAttention does: with seqQ > seqK the first rows see no key, their O is 0 and
	// their LSE -Inf).
	Causal bool
	// Scale multiplies Q K^T; 0 means 1/sqrt(head dim). It must be positive and finite (the
	// kernels' running max is of the raw scores, and a negative scale turns the masked keys'
	// -Inf into +Inf: NaN).
	Scale float32
	// LSE, when set, receives each row's log-sum-exp: [batch, heads, seqQ] f32, contiguous,
	// the natural log of the softmax denominator including the scale. The zero Tensor is
	// unset (the kernel then writes a scratch buffer of the call's plan).
	LSE Tensor[float32]
	// Kernel picks the kernel: AttentionAuto (the zero value) the best the device runs,
	// AttentionFA2 or AttentionSM90 that one (a device or head dim it cannot take is an
	// error).
	Kernel AttentionKernel
	// Schedule picks how the sm_90a kernel's blocks take their work tiles, for timing the
	// schedules against each other: AttentionScheduleAuto (the zero value) is the
	// library's. Any other is an error where the call would run the FA2 kernel.
	Schedule AttentionSchedule
}

// AttentionSchedule names the sm_90a attention's launches: one block a work tile (a query
// tile of one batch and head), or one block an SM walking several (Persistent), and the
// order of the tiles (kernels.AttentionSchedule).
type AttentionSchedule int

const (
	// AttentionScheduleAuto is kernels.DefaultAttentionSM90Config's: Persistent with
	// kernels.AttentionStrided when not causal, one block a tile when causal.
	AttentionScheduleAuto AttentionSchedule = iota
	// AttentionScheduleGrid is one block a tile in kernels.AttentionStrided's order.
	AttentionScheduleGrid
	// AttentionScheduleGridLPT is one block a tile in kernels.AttentionLPT's order
	// (longest first across the heads).
	AttentionScheduleGridLPT
	// AttentionScheduleStrided is Persistent with kernels.AttentionStrided.
	AttentionScheduleStrided
	// AttentionScheduleLPT is Persistent with kernels.AttentionLPT (longest first, a snake
	// walk).
	AttentionScheduleLPT
	// AttentionScheduleDynamic is Persistent with kernels.AttentionDynamic: the tile
	// counter is the stream's (zeroed once; launches on one stream run in order and share
	// it, each stream has its own). A graph captured on a stream keeps that stream's
	// counter: replay it where no other launch with that counter runs at once.
	AttentionScheduleDynamic
)

// String returns "auto", "grid", "grid-lpt", "strided", "lpt" or "dynamic".
func (s AttentionSchedule) String() string {
	if s >= AttentionScheduleAuto && s <= AttentionScheduleDynamic {
		return [...]string{"auto", "grid", "grid-lpt", "strided", "lpt", "dynamic"}[s]
	}
	return fmt.Sprintf("AttentionSchedule(%d)", int(s))
}

// apply sets cfg's Persistent and Schedule to s's (Auto leaves them).
func (s AttentionSchedule) apply(cfg *kernels.AttentionSM90Config) {
	switch s {
	case AttentionScheduleGrid:
		cfg.Persistent, cfg.Schedule = false, kernels.AttentionStrided
	case AttentionScheduleGridLPT:
		cfg.Persistent, cfg.Schedule = false, kernels.AttentionLPT
	case AttentionScheduleStrided:
		cfg.Persistent, cfg.Schedule = true, kernels.AttentionStrided
	case AttentionScheduleLPT:
		cfg.Persistent, cfg.Schedule = true, kernels.AttentionLPT
	case AttentionScheduleDynamic:
		cfg.Persistent, cfg.Schedule = true, kernels.AttentionDynamic
	}
}

// AttentionKernel names Attention's kernels.
type AttentionKernel int

const (
	// AttentionAuto picks AttentionSM90 on compute capability 9.0 for the head dims and
	// types it takes, AttentionFA2 elsewhere.
	AttentionAuto AttentionKernel = iota
	// AttentionFA2 is kernels.Attention (FlashAttention-2 on mma.sync, sm_80+).
	AttentionFA2
	// AttentionSM90 is kernels.AttentionSM90 (FlashAttention-3 on wgmma and TMA, sm_90a).
	AttentionSM90
)

// String returns "auto", "fa2" or "sm90".
func (a AttentionKernel) String() string {
	switch a {
	case AttentionAuto:
		return "auto"
	case AttentionFA2:
		return "fa2"
	case AttentionSM90:
		return "sm90"
	}
	return fmt.Sprintf("AttentionKernel(%d)", int(a))
}

// Attention's plan kinds: which argument list the kernel takes.
const (
	attnFA2  = iota // AttentionArgs
	attnSM90        // AttentionArgs, then the maps of Q, K, V (kernels.AttentionSM90Maps)
)

// Attention computes the forward attention out = softmax(scale * q k^T [+ causal mask]) v
// per (batch, head) with f32 accumulation: on compute capability 9.0
// kernels.AttentionSM90 (FlashAttention-3 on wgmma, TMA and warp specialization), elsewhere
// kernels.Attention (FlashAttention-2 on mma.sync); AttentionOptions.Kernel forces one. q
// and out are [batch, seqQ, heads, d] and k, v [batch, seqK, kvHeads, d], all
// contiguous and 16-byte aligned, of fp.BF16 or fp.F16 (BSHD, FlashAttention's layout); d
// is 64, 128 or 256; heads is a multiple of kvHeads (GQA: query head h reads K/V head
// h / (heads/kvHeads); MQA with kvHeads 1). out may be q itself (each block reads its
// queries before it writes their outputs) but shares no memory with k, v or the LSE.
//
// The configuration comes from AttentionSM90ConfigFor or AttentionConfigFor (the device's
// shared memory, the head dim, short query sequences); the device needs compute capability
// 8.0 or newer.
func Attention[T jit.Elem](ctx context.Context, s *jit.Stream, out, q, k, v Tensor[T], o *AttentionOptions) error {
	const op = "Attention"
	dt := jit.ElemType[T]()
	// Shapes: q [B, SQ, H, D], k and v [B, SK, HK, D], out q's.
	dev, err := attentionOperands(ctx, op, q, out, [2]named[T]{{"k", k}, {"v", v}}, [2]named[int32]{}, 4,
		[4]string{"[batch, seqQ, heads, d]", "[batch, seqK, kvHeads, d]", "[batch, seqK, kvHeads, d]", "[batch, seqQ, heads, d] (q's)"})
	if err != nil {
		return err
	}
	batch, seqQ, heads, hd := q.shape[0], q.shape[1], q.shape[2], q.shape[3]
	seqK, kvHeads := k.shape[1], k.shape[2]
	if hd != 64 && hd != 128 && hd != 256 {
		return fmt.Errorf("ops: %s: q has head dim %d (shape %v); the kernel takes 64, 128 or 256", op, hd, q.Shape())
	}
	if k.shape[0] != batch || k.shape[3] != hd {
		return fmt.Errorf("ops: %s: k has shape %v, q %v: k must be [batch, seqK, kvHeads, d] with q's batch %d and head dim %d", op, k.Shape(), q.Shape(), batch, hd)
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
	for _, x := range []struct {
		name string
		t    Tensor[T]
	}{{"q", q}, {"k", k}, {"v", v}, {"out", out}} {
		if err := contiguous(op, x.name, "attention", x.t); err != nil {
			return err
		}
		if err := need16(op, x.name, "attention (16-byte cp.async rows)", x.t); err != nil {
			return err
		}
	}
	var causal bool
	var kernel AttentionKernel
	var sched AttentionSchedule
	scale := float32(1 / math.Sqrt(float64(hd)))
	lse := jit.AnyPtr{Elem: ptx.F32}
	if o != nil {
		causal, kernel, sched = o.Causal, o.Kernel, o.Schedule
		if kernel < AttentionAuto || kernel > AttentionSM90 {
			return fmt.Errorf("ops: %s: AttentionOptions.Kernel %v: want AttentionAuto, AttentionFA2 or AttentionSM90", op, kernel)
		}
		if sched < AttentionScheduleAuto || sched > AttentionScheduleDynamic {
			return fmt.Errorf("ops: %s: AttentionOptions.Schedule %v: want AttentionScheduleAuto, Grid, GridLPT, Strided, LPT or Dynamic", op, sched)
		}
		if sched != AttentionScheduleAuto && kernel == AttentionFA2 {
			return fmt.Errorf("ops: %s: AttentionOptions.Schedule %v is the sm_90a kernel's; AttentionOptions.Kernel is fa2 (one block a tile)", op, sched)
		}
		if math.IsNaN(float64(o.Scale)) || math.IsInf(float64(o.Scale), 0) || o.Scale < 0 {
			return fmt.Errorf("ops: %s: AttentionOptions.Scale %v: want a positive finite scale (0: 1/sqrt(d))", op, o.Scale)
		}
		if o.Scale != 0 {
			scale = o.Scale
		}
		if o.LSE.buf != nil {
			if err := sameDevice(op, "LSE", dev, o.LSE); err != nil {
				return err
			}
			if o.LSE.rank != 3 || o.LSE.shape[0] != batch || o.LSE.shape[1] != heads || o.LSE.shape[2] != seqQ {
				return fmt.Errorf("ops: %s: LSE has shape %v; want [%d %d %d] ([batch, heads, seqQ])", op, o.LSE.Shape(), batch, heads, seqQ)
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
	if err := attentionApart(op, q, out, [2]named[T]{{"k", k}, {"v", v}}, [2]named[int32]{}, lseT); err != nil {
		return err
	}
	st := stateOf(dev)
	key := planKey{op: "attention", in: dt, dims: [3]int{seqQ, seqK, hd}, lds: [4]int{batch, heads, kvHeads}, target: st.target}
	if causal {
		key.flags = 1
	}
	key.flags |= uint32(kernel)<<1 | uint32(sched)<<3
	p := st.lookup(key)
	if p == nil {
		if p, err = planAttention(ctx, st, key); err != nil {
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
	ak := argKey{ptr: [8]jit.DevicePtr{q.Ptr(), k.Ptr(), v.Ptr(), out.Ptr(), lse.Addr}, scalar: [2]uint64{uint64(math.Float32bits(scale))}}
	if p.kind == attnSM90 {
		ak.mem = [3]*jit.Memory{q.buf.Memory(), k.buf.Memory(), v.buf.Memory()}
	}
	if p.attn.SchedWords > 0 { // the stream's tile counter
		ak.s = s
	}
	if enc := p.cached(&ak); enc != nil {
		return launch(op, dev, p.fn, lc, enc)
	}
	args := []any{ptrOf(q), ptrOf(k), ptrOf(v), ptrOf(out), lse,
		uint32(batch), uint32(heads), uint32(kvHeads), uint32(seqQ), uint32(seqK), scale}
	if p.kind == attnSM90 {
		// The maps are encoded once per set of operands: the call's arguments are kept.
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
	}
	if p.attn.SchedWords > 0 {
		sc, err := st.scratchFor(s, p.attn.SchedWords)
		if err != nil {
			return planFailed(op, dev, err)
		}
		args = append(args, sc)
	}
	return p.first(op, dev, lc, &ak, args)
}

// attentionMinSM is the oldest compute capability the attention kernel runs on (mma.sync
// m16n8k16 of bf16, cp.async, ldmatrix).
const attentionMinSM = 80

// maxSharedPerBlock is the dynamic shared memory a block may opt in to on compute
// capability sm: 227 KiB on 9.0 and 10.x, 163 KiB on 8.0 and 8.7, 99 KiB elsewhere (8.6,
// 8.9, 12.x).
func maxSharedPerBlock(sm int) int {
	switch sm {
	case 90, 100, 101, 103:
		return 227 << 10
	case 80, 87:
		return 163 << 10
	}
	return 99 << 10
}

// AttentionConfigFor returns the attention kernel Attention runs on a device described by
// info for inputs of dt (ptx.BF16 or ptx.F16), head dim headDim and seqQ queries:
// kernels.DefaultAttentionConfig; 64 query rows on 4 warps when seqQ is at most 64 (fewer
// idle rows per block); 32 keys per step where the device's shared memory cannot hold the
// default's tiles (head dim 256 on compute capability 8.6, 8.9 and 12.x).
func AttentionConfigFor(info jit.Info, dt ptx.Type, headDim, seqQ int, causal bool) (kernels.AttentionConfig, error) {
	if info.SM < attentionMinSM {
		return kernels.AttentionConfig{}, fmt.Errorf("attention runs mma.sync m16n8k16, cp.async and ldmatrix: compute capability 8.0 or newer; %s is %d.%d", info.Name, info.SM/10, info.SM%10)
	}
	cfg := kernels.DefaultAttentionConfig(dsl.Type(dt), headDim, causal)
	if seqQ <= 64 && cfg.BM > 64 {
		cfg.BM, cfg.Warps = 64, 4
	}
	if cfg.SharedBytes() > maxSharedPerBlock(info.SM) {
		cfg.BN = 32
	}
	if err := cfg.Check(); err != nil {
		return cfg, err
	}
	if cfg.SharedBytes() > maxSharedPerBlock(info.SM) {
		return cfg, fmt.Errorf("attention %s needs %d bytes of shared memory; compute capability %d.%d gives a block %d", cfg.Name(), cfg.SharedBytes(), info.SM/10, info.SM%10, maxSharedPerBlock(info.SM))
	}
	return cfg, nil
}

// AttentionSM90ConfigFor returns the sm_90a attention Attention runs on a device described
// by info for inputs of dt, head dim headDim, seqQ queries and seqK keys (0: not known):
// kernels.AttentionSM90ConfigForShape (one consumer warpgroup when seqQ is at most 64,
// longer key steps for many keys without a mask). It is an error on a device other than
// compute capability 9.0 or for a configuration the kernel refuses.
func AttentionSM90ConfigFor(info jit.Info, dt ptx.Type, headDim, seqQ, seqK int, causal bool) (kernels.AttentionSM90Config, error) {
	cfg := kernels.AttentionSM90ConfigForShape(dsl.Type(dt), headDim, causal, seqQ, seqK)
	if info.SM != 90 {
		return cfg, fmt.Errorf("attention_sm90 runs wgmma and TMA of sm_90a: compute capability 9.0; %s is %d.%d", info.Name, info.SM/10, info.SM%10)
	}
	return cfg, cfg.Check()
}

// planAttention chooses, builds and loads the attention kernel of key, with its scratch LSE
// (for calls that pass none).
func planAttention(ctx context.Context, st *devState, key planKey) (*plan, error) {
	seqQ, seqK, hd := key.dims[0], key.dims[1], key.dims[2]
	batch, heads, kvHeads := key.lds[0], key.lds[1], key.lds[2]
	causal, kernel, sched := key.flags&1 != 0, AttentionKernel(key.flags>>1&3), AttentionSchedule(key.flags>>3)
	var p *plan
	if kernel != AttentionFA2 {
		cfg, err := AttentionSM90ConfigFor(st.d.Info(), key.in, hd, seqQ, seqK, causal)
		if err == nil && sched != AttentionScheduleAuto {
			sched.apply(&cfg)
			err = cfg.Check()
		}
		var l kernels.AttentionSM90Launch
		if err == nil && st.gemm != ptx.SM90a {
			err = fmt.Errorf("attention_sm90 needs the sm_90a target; the device's kernels target %s", st.gemm)
		}
		if err == nil {
			l, err = cfg.LaunchPersistent(batch, heads, kvHeads, seqQ, seqK, max(st.d.Info().Multiproc, 1)) // the grid of a Persistent config: one block an SM
		}
		switch {
		case err != nil && kernel == AttentionSM90:
			return nil, refusal{fmt.Errorf("AttentionOptions.Kernel sm90: %w", err)}
		case err != nil && sched != AttentionScheduleAuto: // not FA2: it has no schedule
			return nil, refusal{fmt.Errorf("AttentionOptions.Schedule %v: %w", sched, err)}
		case err == nil:
			fn, err := st.function(ctx, cfg.Name(), ptx.SM90a, func(kb *dsl.Kernel) { kernels.AttentionSM90(kb, cfg) })
			if err != nil {
				return nil, err
			}
			p = &plan{fn: fn, name: cfg.Name(), grid: l.Grid, block: l.Block, shared: l.SharedBytes, attn: l, kind: attnSM90}
		}
	}
	if p == nil {
		cfg, err := AttentionConfigFor(st.d.Info(), key.in, hd, seqQ, causal)
		if err != nil {
			return nil, refusal{err}
		}
		if err := cfg.CheckShape(batch, heads, kvHeads, seqQ, seqK); err != nil {
			return nil, refusal{err}
		}
		fn, err := st.function(ctx, cfg.Name(), key.target, func(kb *dsl.Kernel) { kernels.Attention(kb, cfg) })
		if err != nil {
			return nil, err
		}
		p = &plan{fn: fn, name: cfg.Name(), grid: cfg.Grid(batch, heads, seqQ), block: cfg.Threads(), shared: cfg.SharedBytes(), kind: attnFA2}
	}
	if q := st.lookup(key); q != nil { // a concurrent call planned it meanwhile
		return q, nil
	}
	// The kernel always stores the LSE; a call without one gives it this (written, never
	// read: calls on several streams may write it at once).
	lse, err := jit.Alloc[float32](st.d, batch*heads*seqQ)
	if err != nil {
		return nil, err
	}
	p.lse = lse
	st.store(key, p)
	return p, nil
}
