package main

import (
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ops"
	"github.com/kgen-dev/kgen/ptx"
)

// attentionCase is ops.Attention of bf16 q [batch, seqQ, heads, d] over k, v [batch, seqK,
// kvHeads, d] (with the LSE), against the kernel ops.AttentionConfigFor picks, built and
// launched here.
func (b *opsBench) attentionCase(name string, batch, heads, kvHeads, seqQ, seqK, d int, causal bool) (opCase, error) {
	q, err := opsAlloc(b, batch*seqQ*heads*d, fp.BF16Of)
	if err != nil {
		return opCase{}, err
	}
	k, err := opsAlloc(b, batch*seqK*kvHeads*d, fp.BF16Of)
	if err != nil {
		return opCase{}, err
	}
	v, err := opsAlloc(b, batch*seqK*kvHeads*d, fp.BF16Of)
	if err != nil {
		return opCase{}, err
	}
	o, err := opsAlloc(b, batch*seqQ*heads*d, fp.BF16Of)
	if err != nil {
		return opCase{}, err
	}
	lse, err := opsAlloc(b, batch*heads*seqQ, f32)
	if err != nil {
		return opCase{}, err
	}
	tq, _ := ops.New(q, batch, seqQ, heads, d)
	tk, _ := ops.New(k, batch, seqK, kvHeads, d)
	tv, _ := ops.New(v, batch, seqK, kvHeads, d)
	to, _ := ops.New(o, batch, seqQ, heads, d)
	tl, _ := ops.New(lse, batch, heads, seqQ)
	opt := &ops.AttentionOptions{Causal: causal, LSE: tl, Kernel: ops.AttentionFA2} // the kernel launched directly below
	c := opCase{name: name, call: func() error { return ops.Attention(b.ctx, b.s, to, tq, tk, tv, opt) }}
	cfg, err := ops.AttentionConfigFor(b.d.Info(), ptx.BF16, d, seqQ, causal)
	if err != nil {
		return c, err
	}
	if err := cfg.CheckShape(batch, heads, kvHeads, seqQ, seqK); err != nil {
		return c, err
	}
	c.kernel = cfg.Name()
	fn, err := b.load(cfg.Name(), b.target(), func(kb *dsl.Kernel) { kernels.Attention(kb, cfg) })
	if err != nil {
		return c, err
	}
	lc := jit.LaunchConfig{Grid: jit.D1(cfg.Grid(batch, heads, seqQ)), Block: jit.D1(cfg.Threads()), SharedMem: cfg.SharedBytes(), Stream: b.s}
	scale := float32(1 / math.Sqrt(float64(d)))
	pq, pk, pv, po, pl := jit.AnyOf[fp.BF16](q), jit.AnyOf[fp.BF16](k), jit.AnyOf[fp.BF16](v), jit.AnyOf[fp.BF16](o), jit.AnyOf[float32](lse)
	c.direct = func() error {
		return fn.Launch(lc, pq, pk, pv, po, pl, uint32(batch), uint32(heads), uint32(kvHeads), uint32(seqQ), uint32(seqK), scale)
	}
	return c, nil
}
