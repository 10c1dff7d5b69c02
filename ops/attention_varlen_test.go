package ops

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels/ref"
)

// varlenCase is one packed problem: the sequences' query and key lengths.
type varlenCase struct {
	lq, lk      []int
	h, hk, d    int
	causal, lse bool
	maxQ        int // AttentionVarLenOptions.MaxSeqQ
}

// TestAttentionVarLen checks AttentionVarLen on the emulator against the float64 reference
// of each sequence: lengths {1, 70, 0, 130} over {90, 1, 5, 200}, causal and not, GQA 4,
// head dims 64 and 128, with and without an LSE, MaxSeqQ given and defaulted; out = q.
func TestAttentionVarLen(t *testing.T) {
	d := emuDevice(t)
	lq, lk := []int{1, 70, 0, 130}, []int{90, 1, 5, 200}
	for _, c := range []varlenCase{
		{lq: lq, lk: lk, h: 4, hk: 1, d: 64, lse: true, maxQ: 130},
		{lq: lq, lk: lk, h: 4, hk: 1, d: 64, causal: true, lse: true},
		{lq: lq, lk: lk, h: 4, hk: 1, d: 128, causal: true, maxQ: 130},
		{lq: []int{40, 3}, lk: []int{7, 64}, h: 2, hk: 2, d: 128, lse: true, maxQ: 40}, // one consumer warpgroup
	} {
		t.Run(fmt.Sprintf("%v/%v/d%d/causal%v", c.lq, c.lk, c.d, c.causal), func(t *testing.T) { runVarLen[fp.BF16](t, d, c, false) })
	}
	c := varlenCase{lq: []int{33, 70}, lk: []int{90, 20}, h: 2, hk: 1, d: 64, causal: true, lse: true}
	t.Run("out=q", func(t *testing.T) { runVarLen[fp.F16](t, d, c, true) })
}

func runVarLen[T jit.Elem](t *testing.T, d *jit.Device, c varlenCase, inPlace bool) {
	cuQ, cuK := []int32{0}, []int32{0}
	for i := range c.lq {
		cuQ = append(cuQ, cuQ[i]+int32(c.lq[i]))
		cuK = append(cuK, cuK[i]+int32(c.lk[i]))
	}
	tq, tk := int(cuQ[len(c.lq)]), int(cuK[len(c.lk)])
	rng := rand.New(rand.NewSource(3))
	rnd := func(n int) []float64 {
		v := randoms[T](rng, n)
		for i := range v {
			v[i] = value(of[T](v[i] / 2))
		}
		return v
	}
	qh, kh, vh := rnd(tq*c.h*c.d), rnd(tk*c.hk*c.d), rnd(tk*c.hk*c.d)
	must := func(x Tensor[T], e error) Tensor[T] {
		if e != nil {
			t.Fatal(e)
		}
		return x
	}
	q := must(New(upload[T](t, d, qh), tq, c.h, c.d))
	k := must(New(upload[T](t, d, kh), tk, c.hk, c.d))
	v := must(New(upload[T](t, d, vh), tk, c.hk, c.d))
	outB := upload[T](t, d, make([]float64, tq*c.h*c.d))
	out := must(New(outB, tq, c.h, c.d))
	if inPlace {
		out, outB = q, q.buf
	}
	cq, err := New(uploadInts(t, d, cuQ), len(cuQ))
	if err != nil {
		t.Fatal(err)
	}
	ck, err := New(uploadInts(t, d, cuK), len(cuK))
	if err != nil {
		t.Fatal(err)
	}
	o := &AttentionVarLenOptions{Causal: c.causal, MaxSeqQ: c.maxQ}
	var lseB *jit.Buffer[float32]
	if c.lse {
		lseB = upload[float32](t, d, make([]float64, c.h*tq))
		if o.LSE, err = New(lseB, c.h, tq); err != nil {
			t.Fatal(err)
		}
	}
	if err := AttentionVarLen(context.Background(), nil, out, q, k, v, cq, ck, o); err != nil {
		t.Fatal(err)
	}
	want := ref.AttentionVarLenRef(qh, kh, vh, cuQ, cuK, c.h, c.hk, c.d, 1/math.Sqrt(float64(c.d)), c.causal)
	dt := dsl.Type(jit.ElemType[T]())
	got := download(t, outB)
	for i, w := range want.O {
		if tl := ref.AttentionTolerance(dt, want.Abs[i/c.d], w); !(math.Abs(got[i]-w) <= tl) {
			t.Fatalf("out[row %d, h %d, d %d] = %v; want %v (tolerance %.3g)", i/(c.h*c.d), i/c.d%c.h, i%c.d, got[i], w, tl)
		}
	}
	if !c.lse {
		return
	}
	gotL := download(t, lseB)
	for i, w := range want.LSE {
		if math.IsInf(w, -1) != math.IsInf(gotL[i], -1) || (!math.IsInf(w, -1) && !(math.Abs(gotL[i]-w) <= 1e-5*(1+math.Abs(w)))) {
			t.Fatalf("LSE[h %d, row %d] = %v; want %v", i/tq, i%tq, gotL[i], w)
		}
	}
}

// TestAttentionVarLenRefuses: bad operands are errors naming the operand and the rule.
func TestAttentionVarLenRefuses(t *testing.T) {
	d := emuDevice(t)
	bf := func(shape ...int) Tensor[fp.BF16] { return zerosBF16(t, d, shape...) }
	ints := func(v ...int32) Tensor[int32] {
		x, err := New(uploadInts(t, d, v), len(v))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	q, k, out := bf(10, 4, 64), bf(12, 1, 64), bf(10, 4, 64)
	cu := ints(0, 4, 10)
	lse, err := New(upload[float32](t, d, make([]float64, 40)), 40)
	if err != nil {
		t.Fatal(err)
	}
	// An LSE over q's memory and one over cuQ's (reinterpreted views of the same bytes).
	lseOverQ, err := jit.BufferOf[float32](q.buf.Memory(), 40)
	if err != nil {
		t.Fatal(err)
	}
	lseQ, _ := New(lseOverQ, 4, 10)
	cuL := ints(0, 4, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	cuShort, _ := cuL.Slice(0, 0, 3)
	lseOverCu, err := jit.BufferOf[float32](cuL.buf.Memory(), 40)
	if err != nil {
		t.Fatal(err)
	}
	lseCu, _ := New(lseOverCu, 4, 10)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"lse over q", AttentionVarLen(ctx, nil, out, q, k, k, cu, cu, &AttentionVarLenOptions{LSE: lseQ}), "q (bytes 0-"},
		{"lse over cuQ", AttentionVarLen(ctx, nil, out, q, k, k, cuShort, cu, &AttentionVarLenOptions{LSE: lseCu}), "cuQ (bytes 0-12 of its buffer) overlaps LSE"},
		{"rank", AttentionVarLen(ctx, nil, out, bf(1, 10, 4, 64), k, k, cu, cu, nil), "q has rank 4"},
		{"head dim", AttentionVarLen(ctx, nil, bf(10, 4, 96), bf(10, 4, 96), bf(12, 1, 96), bf(12, 1, 96), cu, cu, nil), "head dim 96"},
		{"k's d", AttentionVarLen(ctx, nil, out, q, bf(12, 1, 128), bf(12, 1, 128), cu, cu, nil), "k must be [totalK, kvHeads, d]"},
		{"v", AttentionVarLen(ctx, nil, out, q, k, bf(11, 1, 64), cu, cu, nil), "v"},
		{"gqa", AttentionVarLen(ctx, nil, out, q, bf(12, 3, 64), bf(12, 3, 64), cu, cu, nil), "multiple of kvHeads"},
		{"cuQ", AttentionVarLen(ctx, nil, out, q, k, k, ints(0), cu, nil), "cuQ has shape [1]"},
		{"cuK", AttentionVarLen(ctx, nil, out, q, k, k, cu, ints(0, 12), nil), "cuK has shape [2]; want [3]"},
		{"scale", AttentionVarLen(ctx, nil, out, q, k, k, cu, cu, &AttentionVarLenOptions{Scale: -1}), "AttentionVarLenOptions.Scale"},
		{"maxQ", AttentionVarLen(ctx, nil, out, q, k, k, cu, cu, &AttentionVarLenOptions{MaxSeqQ: -1}), "AttentionVarLenOptions.MaxSeqQ"},
		{"lse", AttentionVarLen(ctx, nil, out, q, k, k, cu, cu, &AttentionVarLenOptions{LSE: lse}), "LSE has shape [40]; want [4 10]"},
		{"out=k", AttentionVarLen(ctx, nil, k, bf(12, 1, 64), k, bf(12, 1, 64), cu, cu, nil), "k"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v; want an error naming %q", c.name, c.err, c.want)
		}
	}
}
