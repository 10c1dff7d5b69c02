package main

import (
	"fmt"
	"math"
	"sync"

	"github.com/kgen-dev/kgen/fp"
)

// iv is an interval [lo, hi] that holds the device's value of a reference quantity
// (ops/dist's TestMoELayer checks the layer the same way on the emulator).
type iv struct{ lo, hi float64 }

// bf16 rounds both ends to bf16 (rounding is monotonic).
func (a iv) bf16() iv {
	r := func(v float64) float64 { return float64(fp.BF16Of(float32(v)).Float32()) }
	return iv{r(a.lo), r(a.hi)}
}

func (a iv) widen(e float64) iv { return iv{a.lo - e, a.hi + e} }

func (a iv) mag() float64 { return max(math.Abs(a.lo), math.Abs(a.hi)) }

func (a iv) scale(w float64) iv {
	if w < 0 {
		return iv{a.hi * w, a.lo * w}
	}
	return iv{a.lo * w, a.hi * w}
}

// The f32 error terms: a sum of n products of magnitudes adding to s is within acc32(n, s)
// of the exact sum (kernels/ref.GemmTolerance's, which covers wgmma's order); SwiGLU's
// evaluation is within swiEval of its value, relatively; silu's minimum is at siluMinX.
const (
	swiEval  = 0x1p-16
	siluMinX = -1.2784645427610738
)

func acc32(n int, s float64) float64 { return float64(n+4) * 0x1p-23 * s }

func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

// dot is the interval of the device's f32 sum over l < n of xs[l]*w(l), rounded to bf16.
func dot(xs []iv, w func(l int) float64) iv {
	var sum iv
	var abs float64
	for l, x := range xs {
		p := x.scale(w(l))
		sum.lo += p.lo
		sum.hi += p.hi
		abs += p.mag()
	}
	return sum.widen(acc32(len(xs), abs) + 0x1p-50*abs).bf16()
}

// expert is the interval of each of expert e's outputs for rank r's token t: bf16(h x
// W2[e]) with h = bf16(silu(a)*b), [a | b] = bf16(x x W13[e]).
func expert(in inputs, e, r, t int) []iv {
	h, f := in.cfg.Hidden, in.cfg.FFN
	xs := make([]iv, h)
	for l := range xs {
		v := float64(in.x(r, t, l))
		xs[l] = iv{v, v}
	}
	hs := make([]iv, f)
	for c := range hs {
		g := dot(xs, func(l int) float64 { return float64(in.w13(e, l, c)) })
		u := dot(xs, func(l int) float64 { return float64(in.w13(e, l, f+c)) })
		s := iv{min(silu(g.lo), silu(g.hi)), max(silu(g.lo), silu(g.hi))}
		if g.lo <= siluMinX && siluMinX <= g.hi {
			s.lo = silu(siluMinX)
		}
		p := []float64{s.lo * u.lo, s.lo * u.hi, s.hi * u.lo, s.hi * u.hi}
		pr := iv{min(p[0], p[1], p[2], p[3]), max(p[0], p[1], p[2], p[3])}
		hs[c] = pr.widen(swiEval * pr.mag()).bf16()
	}
	y := make([]iv, h)
	for c := range y {
		y[c] = dot(hs, func(l int) float64 { return float64(in.w2(e, l, c)) })
	}
	return y
}

// verify checks n tokens of rank r (spread over its tokens), every column, against the
// layer's intervals: the experts, then the combine (per GPU the f32 sum over k of w*y of
// the token's pairs there, rounded to bf16; then the f32 sum over GPUs, rounded).
func verify(in inputs, r, g, n int, ids []int32, w []float32, got []fp.BF16) error {
	cfg := in.cfg
	el, h, k := cfg.Experts/g, cfg.Hidden, cfg.TopK
	for i := 0; i < n && i < cfg.Tokens; i++ {
		t := (2*i + 1) * cfg.Tokens / (2 * n)
		ys := make([][]iv, k)
		var wg sync.WaitGroup
		for kk := 0; kk < k; kk++ {
			if e := int(ids[t*k+kk]); e >= 0 {
				wg.Add(1)
				go func() { defer wg.Done(); ys[kk] = expert(in, e, r, t) }()
			}
		}
		wg.Wait()
		for c := 0; c < h; c++ {
			var parts []iv
			for d := 0; d < g; d++ {
				var col []iv
				var ws []float64
				for kk := 0; kk < k; kk++ {
					if e := int(ids[t*k+kk]); e >= 0 && e/el == d {
						col = append(col, ys[kk][c])
						ws = append(ws, float64(w[t*k+kk]))
					}
				}
				if len(col) > 0 {
					parts = append(parts, dot(col, func(i int) float64 { return ws[i] }))
				}
			}
			var want iv
			if len(parts) > 0 {
				want = dot(parts, func(int) float64 { return 1 })
			}
			if v := float64(got[t*h+c].Float32()); !(want.lo <= v && v <= want.hi) {
				return fmt.Errorf("token %d col %d: %v, want [%v, %v]", t, c, v, want.lo, want.hi)
			}
		}
	}
	return nil
}
