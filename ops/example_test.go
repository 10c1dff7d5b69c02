package ops_test

import (
	"context"
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ops"
)

// Softmax over a strided view: the first 3 columns of each row of a 2 x 4 matrix, checked
// against a float64 softmax. jit.Open(0) is a GPU when the binary has one, else the emulator.
func ExampleSoftmax() {
	ctx := context.Background()
	dev, err := jit.OpenBackend(jit.Emulator, 0) // or jit.Open(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()
	buf, _ := jit.Alloc[float32](dev, 8)
	_ = buf.CopyFromHost([]float32{1, 2, 3, 100, 0, 0, 0, 100})
	x, _ := ops.New(buf, 2, 4)
	view, _ := x.Narrow(1, 0, 3) // 2 x 3, rows 4 apart
	if err := ops.Softmax(ctx, nil, view, view); err != nil {
		fmt.Println(err)
		return
	}
	got := make([]float32, 8)
	_ = buf.CopyToHost(got)
	fmt.Printf("%.4f\n", got)
	// The Go reference: exp(x - max) / sum over the row's 3 columns.
	worst := 0.0
	for r, row := range [][]float64{{1, 2, 3}, {0, 0, 0}} {
		sum := 0.0
		for _, v := range row {
			sum += math.Exp(v - row[2])
		}
		for j, v := range row {
			worst = math.Max(worst, math.Abs(float64(got[4*r+j])-math.Exp(v-row[2])/sum))
		}
	}
	fmt.Println("within 1e-6 of float64:", worst < 1e-6)
	// Output:
	// [0.0900 0.2447 0.6652 100.0000 0.3333 0.3333 0.3333 100.0000]
	// within 1e-6 of float64: true
}

// D = A*B for a 2 x 16 bf16 A and a 16 x 8 B of ones: each element of D sums a row of A.
func ExampleMatmul() {
	ctx := context.Background()
	dev, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()
	ha := make([]float32, 2*16)
	for i := range ha {
		ha[i] = float32(i % 16)
	}
	hb := make([]float32, 16*8)
	for i := range hb {
		hb[i] = 1
	}
	ab, _ := jit.Alloc[fp.BF16](dev, len(ha))
	bb, _ := jit.Alloc[fp.BF16](dev, len(hb))
	db, _ := jit.Alloc[float32](dev, 2*8)
	_ = ab.CopyFromHost(fp.From[fp.BF16](ha))
	_ = bb.CopyFromHost(fp.From[fp.BF16](hb))
	a, _ := ops.New(ab, 2, 16)
	b, _ := ops.New(bb, 16, 8)
	d, _ := ops.New(db, 2, 8)
	if err := ops.Matmul(ctx, nil, d, a, b, &ops.MatmulOptions[float32]{Alpha: 0.5}); err != nil {
		fmt.Println(err)
		return
	}
	got := make([]float32, 2*8)
	_ = db.CopyToHost(got)
	fmt.Println(got[:8])
	// Output: [60 60 60 60 60 60 60 60]
}

// Row sums of the lower 2 rows of a 3 x 4 matrix.
func ExampleRowSum() {
	dev, _ := jit.OpenBackend(jit.Emulator, 0)
	defer dev.Close()
	in, _ := jit.Alloc[float32](dev, 12)
	_ = in.CopyFromHost([]float32{1, 1, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8})
	out, _ := jit.Alloc[float32](dev, 2)
	x, _ := ops.New(in, 3, 4)
	lower, _ := x.Slice(0, 1, 3)
	sums, _ := ops.New(out, 2)
	if err := ops.RowSum(context.Background(), nil, sums, lower); err != nil {
		fmt.Println(err)
		return
	}
	got := make([]float32, 2)
	_ = out.CopyToHost(got)
	fmt.Println(got)
	// Output: [10 26]
}

// A 2 x 3 matrix transposed into a 3 x 2 one.
func ExampleTranspose() {
	dev, _ := jit.OpenBackend(jit.Emulator, 0)
	defer dev.Close()
	in, _ := jit.Alloc[float32](dev, 6)
	_ = in.CopyFromHost([]float32{1, 2, 3, 4, 5, 6})
	out, _ := jit.Alloc[float32](dev, 6)
	x, _ := ops.New(in, 2, 3)
	y, _ := ops.New(out, 3, 2)
	if err := ops.Transpose(context.Background(), nil, y, x); err != nil {
		fmt.Println(err)
		return
	}
	got := make([]float32, 6)
	_ = out.CopyToHost(got)
	fmt.Println(got)
	// Output: [1 4 2 5 3 6]
}

// c = a + b, then b = 2*a + b.
func ExampleAdd() {
	ctx := context.Background()
	dev, _ := jit.OpenBackend(jit.Emulator, 0)
	defer dev.Close()
	bufs := make([]*jit.Buffer[float32], 3)
	for i := range bufs {
		bufs[i], _ = jit.Alloc[float32](dev, 4)
	}
	_ = bufs[0].CopyFromHost([]float32{1, 2, 3, 4})
	_ = bufs[1].CopyFromHost([]float32{10, 20, 30, 40})
	a, _ := ops.New(bufs[0], 4)
	b, _ := ops.New(bufs[1], 4)
	c, _ := ops.New(bufs[2], 4)
	if err := ops.Add(ctx, nil, c, a, b); err != nil {
		fmt.Println(err)
		return
	}
	if err := ops.Axpy(ctx, nil, b, a, 2); err != nil {
		fmt.Println(err)
		return
	}
	sum, axpy := make([]float32, 4), make([]float32, 4)
	_ = bufs[2].CopyToHost(sum)
	_ = bufs[1].CopyToHost(axpy)
	fmt.Println(sum, axpy)
	// Output: [11 22 33 44] [12 24 36 48]
}

// An MLP block in bf16: H = SiLU(X*W1 + b1), then Y = H*W2 + X, with the bias, the
// activation and the residual fused into the two GEMMs, checked against float64.
func ExampleMatmul_mlp() {
	ctx := context.Background()
	dev, _ := jit.OpenBackend(jit.Emulator, 0) // or jit.Open(0): a GPU when there is one
	defer dev.Close()
	const m, hid, ff = 4, 16, 32
	vals := func(n int, f func(i int) float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = fp.BF16Of(f(i)).Float32()
		}
		return v
	}
	hx := vals(m*hid, func(i int) float32 { return float32(i%7-3) / 4 })
	hw1 := vals(hid*ff, func(i int) float32 { return float32(i%5-2) / 8 })
	hw2 := vals(ff*hid, func(i int) float32 { return float32(i%3-1) / 8 })
	hb1 := vals(ff, func(i int) float32 { return float32(i%4) / 4 })
	tensor := func(h []float32, shape ...int) ops.Tensor[fp.BF16] {
		b, _ := jit.Alloc[fp.BF16](dev, len(h))
		_ = b.CopyFromHost(fp.From[fp.BF16](h))
		t, _ := ops.New(b, shape...)
		return t
	}
	x, w1, w2 := tensor(hx, m, hid), tensor(hw1, hid, ff), tensor(hw2, ff, hid)
	h, y := tensor(make([]float32, m*ff), m, ff), tensor(make([]float32, m*hid), m, hid)
	bb, _ := jit.Alloc[float32](dev, ff)
	_ = bb.CopyFromHost(hb1)
	b1, _ := ops.New(bb, ff)
	err := ops.Matmul(ctx, nil, h, x, w1, &ops.MatmulOptions[fp.BF16]{Alpha: 1, Bias: b1, Act: kernels.SiLU})
	if err == nil {
		err = ops.Matmul(ctx, nil, y, h, w2, &ops.MatmulOptions[fp.BF16]{Alpha: 1, Residual: x})
	}
	got := make([]fp.BF16, m*hid)
	_ = y.Buffer().CopyToHost(got)
	// The Go reference in float64 (H rounded to bf16 as the device stores it).
	worst := 0.0
	for r := 0; r < m; r++ {
		hr := make([]float64, ff)
		for j := range hr {
			v := float64(hb1[j])
			for l := 0; l < hid; l++ {
				v += float64(hx[r*hid+l] * hw1[l*ff+j])
			}
			hr[j] = float64(fp.BF16Of(float32(v / (1 + math.Exp(-v)))).Float32())
		}
		for j := 0; j < hid; j++ {
			want := float64(hx[r*hid+j])
			for l := 0; l < ff; l++ {
				want += hr[l] * float64(hw2[l*hid+j])
			}
			worst = math.Max(worst, math.Abs(float64(got[r*hid+j].Float32())-want))
		}
	}
	fmt.Println(err, "Y within 0.02 of float64:", worst < 0.02)
	// Output: <nil> Y within 0.02 of float64: true
}
