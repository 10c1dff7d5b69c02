package ops_test

import (
	"context"
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ops"
)

// Attention of 3 query tokens over 5 keys, 2 query heads sharing one K/V head (GQA), head
// dim 64, causal (query i sees keys j <= i + 2), with the LSE, checked against a float64
// reference. The emulator is a compute capability 9.0 device: Attention runs the sm_90a
// kernel (kernels.AttentionSM90).
func ExampleAttention() {
	ctx := context.Background()
	dev, err := jit.OpenBackend(jit.Emulator, 0) // or jit.Open(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()
	const seqQ, seqK, heads, d = 3, 5, 2, 64
	qh := make([]float64, seqQ*heads*d)
	kh := make([]float64, seqK*d)
	vh := make([]float64, seqK*d)
	for i := range qh {
		qh[i] = float64(i%7-3) / 4
	}
	for i := range kh {
		kh[i], vh[i] = float64(i%5-2)/4, float64(i%9-4)/8
	}
	upload := func(v []float64, shape ...int) ops.Tensor[fp.BF16] {
		buf, _ := jit.Alloc[fp.BF16](dev, len(v))
		h := make([]fp.BF16, len(v))
		for i, x := range v {
			h[i] = fp.BF16Of(float32(x)) // exact: multiples of 1/8
		}
		_ = buf.CopyFromHost(h)
		t, _ := ops.New(buf, shape...)
		return t
	}
	q := upload(qh, 1, seqQ, heads, d)
	k := upload(kh, 1, seqK, 1, d)
	v := upload(vh, 1, seqK, 1, d)
	out := upload(make([]float64, len(qh)), 1, seqQ, heads, d)
	lseBuf, _ := jit.Alloc[float32](dev, heads*seqQ)
	lse, _ := ops.New(lseBuf, 1, heads, seqQ)
	if err := ops.Attention(ctx, nil, out, q, k, v, &ops.AttentionOptions{Causal: true, LSE: lse}); err != nil {
		fmt.Println(err)
		return
	}
	got := make([]fp.BF16, len(qh))
	_ = out.Buffer().CopyToHost(got)
	gotLSE := make([]float32, heads*seqQ)
	_ = lseBuf.CopyToHost(gotLSE)

	// The float64 reference: softmax(q k^T / sqrt(d)) v over the keys each query sees.
	worst, worstLSE := 0.0, 0.0
	for i := 0; i < seqQ; i++ {
		for h := 0; h < heads; h++ {
			n := i + seqK - seqQ + 1
			s := make([]float64, n)
			m := math.Inf(-1)
			for j := range s {
				for c := 0; c < d; c++ {
					s[j] += qh[(i*heads+h)*d+c] * kh[j*d+c] / 8 // 1/sqrt(64)
				}
				m = math.Max(m, s[j])
			}
			l := 0.0
			for j := range s {
				s[j] = math.Exp(s[j] - m)
				l += s[j]
			}
			worstLSE = math.Max(worstLSE, math.Abs(float64(gotLSE[h*seqQ+i])-(m+math.Log(l))))
			for c := 0; c < d; c++ {
				o := 0.0
				for j := range s {
					o += s[j] * vh[j*d+c] / l
				}
				worst = math.Max(worst, math.Abs(float64(got[(i*heads+h)*d+c].Float32())-o))
			}
		}
	}
	fmt.Println(ops.Kernels(dev))
	fmt.Println("O within 2^-8 of float64:", worst < 1.0/256, "LSE within 1e-5:", worstLSE < 1e-5)
	// Output:
	// [attention_sm90_bf16_d64_64x128_2s_causal_ov]
	// O within 2^-8 of float64: true LSE within 1e-5: true
}
