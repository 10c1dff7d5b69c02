package ref

import "fmt"

// AttentionVarLenRef computes varlen attention in float64 (FlashAttention's packed layout,
// kernels.AttentionSM90Config.VarLen): q [totalQ, heads, d], k and v [totalK, kvHeads, d],
// sequence b's queries rows cuQ[b]..cuQ[b+1] and keys cuK[b]..cuK[b+1], clamped as the
// kernel clamps them (start to [0, total], end to [start, total]); causal bottom-right per
// sequence. O is [totalQ, heads, d] and LSE [heads, totalQ]; rows of no sequence stay 0
// (LSE 0). Each sequence is AttentionRef with batch 1.
//
// Inputs that do not match the shapes (an extent below 1, heads not a multiple of kvHeads,
// v shorter than k) give an AttentionOut whose Err says why.
func AttentionVarLenRef(q, k, v []float64, cuQ, cuK []int32, heads, kvHeads, d int, scale float64, causal bool) AttentionOut {
	switch {
	case heads < 1 || kvHeads < 1 || d < 1 || refProduct(heads, d) < 0 || refProduct(kvHeads, d) < 0:
		return AttentionOut{Err: fmt.Errorf("ref: AttentionVarLenRef: heads %d, kvHeads %d, d %d: want extents of at least 1", heads, kvHeads, d)}
	case heads%kvHeads != 0:
		return AttentionOut{Err: fmt.Errorf("ref: AttentionVarLenRef: %d heads are not a multiple of %d kvHeads", heads, kvHeads)}
	case len(v) < len(k):
		return AttentionOut{Err: fmt.Errorf("ref: AttentionVarLenRef: v has %d values, k %d: want as many", len(v), len(k))}
	}
	totalQ, totalK := len(q)/(heads*d), len(k)/(kvHeads*d)
	out := AttentionOut{O: make([]float64, totalQ*heads*d), LSE: make([]float64, heads*totalQ), Abs: make([]float64, totalQ*heads)}
	span := func(cu []int32, b, total int) (int, int) {
		s := min(max(int(cu[b]), 0), total)
		return s, min(max(int(cu[b+1]), s), total)
	}
	for b := 0; b+1 < len(cuQ) && b+1 < len(cuK); b++ {
		q0, q1 := span(cuQ, b, totalQ)
		k0, k1 := span(cuK, b, totalK)
		if q1 == q0 {
			continue
		}
		r := AttentionRef(q[q0*heads*d:q1*heads*d], k[k0*kvHeads*d:k1*kvHeads*d], v[k0*kvHeads*d:k1*kvHeads*d],
			1, heads, kvHeads, q1-q0, k1-k0, d, scale, causal)
		if r.Err != nil {
			return AttentionOut{Err: fmt.Errorf("ref: AttentionVarLenRef: sequence %d: %w", b, r.Err)}
		}
		copy(out.O[q0*heads*d:], r.O)
		copy(out.Abs[q0*heads:], r.Abs)
		for h := 0; h < heads; h++ {
			copy(out.LSE[h*totalQ+q0:], r.LSE[h*(q1-q0):(h+1)*(q1-q0)])
		}
	}
	return out
}
