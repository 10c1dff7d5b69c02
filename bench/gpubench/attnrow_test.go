package main

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestAttnRowCheck: the sampled-row check of gpubench attention and decode passes the exact
// float64 row, and names a wrong output value or a wrong LSE.
func TestAttnRowCheck(t *testing.T) {
	const d, keys = 16, 37
	rng := rand.New(rand.NewSource(1))
	q := make([]float64, d)
	k, v := make([]float64, keys*d), make([]float64, keys*d)
	for i := range q {
		q[i] = rng.Float64() - 0.5
	}
	for i := range k {
		k[i], v[i] = rng.Float64()-0.5, rng.Float64()-0.5
	}
	scale := 1 / math.Sqrt(d)
	// The row by hand: softmax over the scores, then P V, and the LSE.
	p, m := make([]float64, keys), math.Inf(-1)
	for j := range keys {
		for c := range d {
			p[j] += q[c] * k[j*d+c] * scale
		}
		m = math.Max(m, p[j])
	}
	l := 0.0
	for j := range p {
		p[j] = math.Exp(p[j] - m)
		l += p[j]
	}
	o := make([]float64, d)
	for c := range d {
		for j := range keys {
			o[c] += p[j] * v[j*d+c] / l
		}
	}
	lse := m + math.Log(l)
	check := func(o []float64, lse float64, keys int) (float64, error) {
		return attnRowCheck(dsl.BF16, d, keys, scale, func(c int) float64 { return q[c] },
			func(j, c int) float64 { return k[j*d+c] }, func(j, c int) float64 { return v[j*d+c] },
			func(c int) float64 { return o[c] }, lse, make([]float64, keys))
	}
	if w, err := check(o, lse, keys); err != nil || w > 1e-6 {
		t.Errorf("the exact row: worst %g, %v", w, err)
	}
	bad := append([]float64(nil), o...)
	bad[5] += 0.1
	if _, err := check(bad, lse, keys); err == nil || !strings.Contains(err.Error(), "output at d 5") {
		t.Errorf("a wrong output value: %v", err)
	}
	if _, err := check(o, lse+0.01, keys); err == nil || !strings.Contains(err.Error(), "LSE") {
		t.Errorf("a wrong LSE: %v", err)
	}
	if w, err := check(o, math.NaN(), 0); err != nil || w != 0 {
		t.Errorf("a row with no key: worst %g, %v", w, err)
	}
}
