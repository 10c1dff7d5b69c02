package kernels

import (
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
)

// FamilySwiGLU is the gated activation of an MoE expert's (or a dense MLP's) feed-forward
// block: swiglu.
const FamilySwiGLU Family = "swiglu"

func init() {
	register(&Spec{Name: string(FamilySwiGLU), Family: FamilySwiGLU,
		Doc:    "out[r, c] = silu(gateUp[r, c]) * gateUp[r, F+c] (f32 math, one rounding) for r below min(rows, the device row count); 16-byte vectors, grid-stride loop",
		DTypes: []dsl.Type{dsl.BF16, dsl.F16}, New: SwiGLU})
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
	case int64(rows)*int64(2*f) >= math.MaxInt32:
		return fmt.Errorf("swiglu: %d rows x 2F %d: want fewer than 2^31 elements (32-bit indices)", rows, 2*f)
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
	vec := 16 / dt.Bytes()
	n := k.Var(dsl.U32, a.Rows)
	k.If(a.HasCount.Ne(uint32(0)), func() {
		k.Set(n, k.Load(a.Count.At(0)).Max(int32(0)).To(dsl.U32).Min(a.Rows))
	})
	fv := a.F.Div(uint32(vec)) // vectors per row
	gridLoop(k, n.Mul(fv), func(q dsl.Value) {
		row, col := q.Div(fv), q.Rem(fv).Mul(uint32(vec))
		gi := row.Mul(a.F).Mul(uint32(2)).Add(col)
		g := loadN(k, a.GateUp, gi, vec)
		u := loadN(k, a.GateUp, gi.Add(a.F), vec)
		res := k.Fragment(dt, g)
		for e := 0; e < vec; e++ {
			x := g.Get(e).To(dsl.F32)
			sig := x.Mul(float32(-math.Log2E)).Exp2().Add(float32(1)).RcpApprox()
			res.Set(e, x.Mul(sig).Mul(u.Get(e).To(dsl.F32)).To(dt))
		}
		storeN(k, a.Out, row.Mul(a.F).Add(col), res)
	})
}
