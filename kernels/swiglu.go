package kernels

import (
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
)

// FamilySwiGLU is the gated activation of an MoE expert's (or a dense MLP's) feed-forward
// block: swiglu. FamilySwiGLUMasked is the same over the masked layout of an MoE
// low-latency dispatch: swiglu_masked.
const (
	FamilySwiGLU       Family = "swiglu"
	FamilySwiGLUMasked Family = "swiglu_masked"
)

// SwiGLUMaxGroups is the most groups swiglu_masked takes: each block scans their row counts
// in static shared memory (as the grouped gemm does, GemmSM90MaxGroups).
const SwiGLUMaxGroups = 256

func init() {
	register(&Spec{Name: string(FamilySwiGLU), Family: FamilySwiGLU,
		Doc:    "out[r, c] = silu(gateUp[r, c]) * gateUp[r, F+c] (f32 math, one rounding) for r below min(rows, the device row count); 16-byte vectors, grid-stride loop",
		DTypes: []dsl.Type{dsl.BF16, dsl.F16}, New: SwiGLU})
	register(&Spec{Name: string(FamilySwiGLUMasked), Family: FamilySwiGLUMasked,
		Doc:    "swiglu over the masked layout (MoE low-latency): group g's rows g*stride + [0, Counts[g]) with the counts read on the device, the other rows not written; a grid-stride loop over the groups' vectors only",
		DTypes: []dsl.Type{dsl.BF16, dsl.F16}, New: SwiGLUMasked})
}

// SwiGLUArgs are swiglu's parameters (launch.SwiGLU on the host): GateUp is [Rows, 2F],
// each row its F gate values then its F up values (the product of x and the stacked
// [W1 | W3] weights); Out is [Rows, F]. When HasCount is not 0, only the first
// min(Rows, max(Count[0], 0)) rows are computed: Count is a row count on the device (an MoE
// dispatch's Offsets[experts], the rows received); the rest of Out is not written.
type SwiGLUArgs struct {
	GateUp, Out       dsl.Ptr   // of dt
	Count             dsl.Ptr   `kgen:"s32"`
	Rows, F, HasCount dsl.Value `kgen:"u32"`
}

// SwiGLUCheckShape checks swiglu's shape: F a positive multiple of 8 (16-byte vectors of
// 16-bit elements) and Rows*2F below 2^31 (32-bit indices).
func SwiGLUCheckShape(rows, f int) error {
	switch {
	case f < 8 || f%8 != 0:
		return fmt.Errorf("swiglu: F %d: want a positive multiple of 8 (16-byte vectors)", f)
	case rows < 0:
		return fmt.Errorf("swiglu: %d rows: want at least 0", rows)
	case satMul(rows, 2, f) >= math.MaxInt32: // saturating: a huge F must not wrap below the bound
		return fmt.Errorf("swiglu: %d rows x 2F (F %d): want fewer than 2^31 elements (32-bit indices)", rows, f)
	}
	return nil
}

// SwiGLUMaskedArgs are swiglu_masked's parameters (launch.SwiGLUMasked on the host): GateUp
// [Rows, 2F] and Out [Rows, F] as SwiGLUArgs'; Counts, Groups int32 row counts on the device
// (an MoE low-latency dispatch's Counts); Stride, the rows between two groups' first rows.
// Group g's rows are g*Stride + [0, min(max(Counts[g], 0), Stride)), clamped to Rows; the
// others of Out are not written.
type SwiGLUMaskedArgs struct {
	GateUp, Out             dsl.Ptr   // of dt
	Counts                  dsl.Ptr   `kgen:"s32"`
	Rows, F, Groups, Stride dsl.Value `kgen:"u32"`
}

// SwiGLUMaskedCheckShape checks swiglu_masked's shape: SwiGLUCheckShape's rules, 1 to
// SwiGLUMaxGroups groups, a positive stride and the groups' slots (stride*groups rows)
// inside the rows.
func SwiGLUMaskedCheckShape(rows, f, groups, stride int) error {
	if err := SwiGLUCheckShape(rows, f); err != nil {
		return err
	}
	switch {
	case groups < 1 || groups > SwiGLUMaxGroups:
		return fmt.Errorf("swiglu_masked: %d groups: want 1..%d", groups, SwiGLUMaxGroups)
	case stride < 1:
		return fmt.Errorf("swiglu_masked: stride %d: want a positive row stride (each group's slots)", stride)
	case satMul(stride, groups) > int64(rows):
		return fmt.Errorf("swiglu_masked: stride %d x %d groups = %s rows: the groups' slots must lie inside the %d rows", stride, groups, satString(stride, groups), rows)
	}
	return nil
}

// SwiGLUShape is swiglu's launch over rows x F: blocks of 256 threads, a thread per 16-byte
// vector of Out, at most 8 blocks per multiprocessor (2048 threads: one resident wave; the
// grid-stride loop covers the rest, and stops at a device row count, so the rows past it
// cost nothing).
func SwiGLUShape(rows, f, sms int) Shape {
	return Shape{Grid: max(1, min(ceilDiv(rows*(f/8), streamThreads), 8*max(sms, 1))), Block: streamThreads}
}

// SwiGLU writes out[r, c] = silu(g) * u with g = gateUp[r, c], u = gateUp[r, F+c], in f32:
// silu(g) = g * 1/(1 + 2^(-g*log2(e))) (ex2.approx and rcp.approx: within 2^-21 of the
// exact value relative to it, far below dt's rounding), the product rounded to dt once.
// Each thread moves a 16-byte vector of gate, of up and of out per step of a grid-stride
// loop over the rows' vectors.
func SwiGLU(k *dsl.Kernel, dt dsl.Type) {
	a := dsl.Params[SwiGLUArgs](k, dt)
	vec := 16 / max(dt.Bytes(), 1)
	n := k.Var(dsl.U32, a.Rows)
	k.If(a.HasCount.Ne(uint32(0)), func() {
		k.Set(n, k.Load(a.Count.At(0)).Max(int32(0)).To(dsl.U32).Min(a.Rows))
	})
	fv := a.F.Div(uint32(vec)) // vectors per row
	gridLoop(k, n.Mul(fv), func(q dsl.Value) {
		swigluVec(k, dt, a.GateUp, a.Out, a.F, q.Div(fv), q.Rem(fv).Mul(uint32(vec)))
	})
}

// swigluVec writes out's vector of 16 bytes at (row, col) from gateUp's gate and up vectors
// (SwiGLU's arithmetic).
func swigluVec(k *dsl.Kernel, dt dsl.Type, gateUp, out dsl.Ptr, f, row, col dsl.Value) {
	vec := 16 / max(dt.Bytes(), 1)
	gi := row.Mul(f).Mul(uint32(2)).Add(col)
	g := loadN(k, gateUp, gi, vec)
	u := loadN(k, gateUp, gi.Add(f), vec)
	res := k.Fragment(dt, g)
	for e := 0; e < vec; e++ {
		x := g.Get(e).To(dsl.F32)
		sig := x.Mul(float32(-math.Log2E)).Exp2().Add(float32(1)).RcpApprox()
		res.Set(e, x.Mul(sig).Mul(u.Get(e).To(dsl.F32)).To(dt))
	}
	storeN(k, out, row.Mul(f).Add(col), res)
}

// SwiGLUMasked writes swiglu_masked: SwiGLU's values on the rows of the masked layout's
// groups only (SwiGLUMaskedArgs). Each block first turns the counts into an inclusive prefix
// of the groups' 16-byte vectors in shared memory (a scan of SwiGLUMaxGroups entries, any
// block size), then its threads take the vectors of all groups together in a grid-stride
// loop, each vector's group found by a binary search of the prefix: the work is the rows
// counted, not Groups*Stride.
func SwiGLUMasked(k *dsl.Kernel, dt dsl.Type) {
	const maxG = SwiGLUMaxGroups
	a := dsl.Params[SwiGLUMaskedArgs](k, dt)
	vec := 16 / max(dt.Bytes(), 1)
	fv := a.F.Div(uint32(vec)) // vectors per row
	tid, nt := k.ThreadIdx(dsl.X), k.BlockDim(dsl.X)
	groups := a.Groups.Min(uint32(maxG))
	buf := [2]dsl.Ptr{k.SharedArray(dsl.U32, maxG), k.SharedArray(dsl.U32, maxG)}
	// Group g's vectors: from row g*Stride (in 64 bits: no wrap; at most Rows),
	// min(max(Counts[g], 0), Stride) rows, at most up to Rows. 0 past the last group.
	k.For(tid, uint32(maxG), nt, func(g dsl.Value) {
		n := k.Var(dsl.U32, 0)
		k.If(g.Lt(groups), func() {
			lo := g.MulWide(a.Stride).Min(a.Rows.To(dsl.U64)).To(dsl.U32)
			k.Set(n, k.Load(a.Counts.At(g)).Max(int32(0)).To(dsl.U32).Min(a.Stride).Min(a.Rows.Sub(lo)).Mul(fv))
		})
		k.Store(buf[0].At(g), n)
	})
	// Inclusive scan (Hillis-Steele between two buffers: every entry of a step reads the
	// previous step's).
	src := 0
	for d := 1; d < maxG; d *= 2 {
		k.SyncThreads()
		from, to := buf[src], buf[1-src]
		k.For(tid, uint32(maxG), nt, func(i dsl.Value) {
			v := k.Var(dsl.U32, k.Load(from.At(i)))
			k.If(i.Ge(uint32(d)), func() { k.Set(v, v.Add(k.Load(from.At(i.Sub(uint32(d)))))) })
			k.Store(to.At(i), v)
		})
		src = 1 - src
	}
	k.SyncThreads()
	ends := buf[src]
	gridLoop(k, k.Load(ends.At(maxG-1)), func(q dsl.Value) {
		// ends is non-decreasing: g is the first group whose prefix passes q.
		g := k.Var(dsl.U32, 0)
		for step := maxG / 2; step >= 1; step /= 2 {
			k.If(k.Load(ends.At(g.Add(uint32(step-1)))).Le(q), func() { k.Set(g, g.Add(uint32(step))) })
		}
		first := k.Var(dsl.U32, 0)
		k.If(g.Gt(uint32(0)), func() { k.Set(first, k.Load(ends.At(g.Sub(uint32(1))))) })
		i := q.Sub(first)
		swigluVec(k, dt, a.GateUp, a.Out, a.F, g.Mul(a.Stride).Add(i.Div(fv)), i.Rem(fv).Mul(uint32(vec)))
	})
}
