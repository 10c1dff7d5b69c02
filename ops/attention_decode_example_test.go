package ops_test

import (
	"context"
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ops"
)

// AttentionDecode of 2 query tokens (speculative decoding) of one sequence over a 40-key
// context held in three 16-key pages given out of order, 4 query heads sharing one kv head
// (GQA), head dim 64, split in two over the keys (so the combine kernel runs), checked
// against a float64 reference.
func ExampleAttentionDecode() {
	ctx := context.Background()
	dev, err := jit.OpenBackend(jit.Emulator, 0) // or jit.Open(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()
	const qLen, heads, d, page, ctxLen = 2, 4, 64, 16, 40
	pages := []int32{2, 0, 1} // the sequence's pages, in key order
	qh := make([]float64, qLen*heads*d)
	kh := make([]float64, 3*page*d) // [3 pages, 16 keys, 1 kv head, 64]
	vh := make([]float64, 3*page*d)
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
	ints := func(v []int32, shape ...int) ops.Tensor[int32] {
		buf, _ := jit.Alloc[int32](dev, len(v))
		_ = buf.CopyFromHost(v)
		t, _ := ops.New(buf, shape...)
		return t
	}
	q := upload(qh, 1, qLen, heads, d)
	kCache := upload(kh, 3, page, 1, d)
	vCache := upload(vh, 3, page, 1, d)
	out := upload(make([]float64, len(qh)), 1, qLen, heads, d)
	table := ints(pages, 1, 3)
	seqLens := ints([]int32{ctxLen}, 1)
	if err := ops.AttentionDecode(ctx, nil, out, q, kCache, vCache, table, seqLens, &ops.AttentionDecodeOptions{Splits: 2}); err != nil {
		fmt.Println(err)
		return
	}
	got := make([]fp.BF16, len(qh))
	_ = out.Buffer().CopyToHost(got)

	// The float64 reference: query i sees keys j < ctxLen - qLen + i + 1; key j is slot
	// j%16 of page pages[j/16].
	key := func(x []float64, j, c int) float64 { return x[(int(pages[j/page])*page+j%page)*d+c] }
	worst := 0.0
	for i := 0; i < qLen; i++ {
		for h := 0; h < heads; h++ {
			s := make([]float64, ctxLen-qLen+i+1)
			m := math.Inf(-1)
			for j := range s {
				for c := 0; c < d; c++ {
					s[j] += qh[(i*heads+h)*d+c] * key(kh, j, c) / 8 // 1/sqrt(64)
				}
				m = math.Max(m, s[j])
			}
			l := 0.0
			for j := range s {
				s[j] = math.Exp(s[j] - m)
				l += s[j]
			}
			for c := 0; c < d; c++ {
				o := 0.0
				for j := range s {
					o += s[j] * key(vh, j, c) / l
				}
				worst = math.Max(worst, math.Abs(float64(got[(i*heads+h)*d+c].Float32())-o))
			}
		}
	}
	fmt.Println(ops.Kernels(dev))
	fmt.Println("O within 2^-8 of float64:", worst < 1.0/256)
	// Output:
	// [attention_decode_bf16_d64_p16_16x64_4w3s attention_decode_combine_bf16_d64]
	// O within 2^-8 of float64: true
}
