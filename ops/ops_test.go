package ops

import (
	"context"
	"math"
	"math/rand"
	"testing"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
)

// emuDevice opens an emulated GPU, closed when the test ends.
func emuDevice(t *testing.T) *jit.Device {
	t.Helper()
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// upload allocates n elements of T on d holding the values of f (rounded to T).
func upload[T jit.Elem](t *testing.T, d *jit.Device, vals []float64) *jit.Buffer[T] {
	t.Helper()
	b, err := jit.Alloc[T](d, len(vals))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free() })
	h := make([]T, len(vals))
	for i, v := range vals {
		h[i] = of[T](v)
	}
	if err := b.CopyFromHost(h); err != nil {
		t.Fatal(err)
	}
	return b
}

// zerosBF16 is a bf16 tensor of the given shape on d, every element 0.
func zerosBF16(t *testing.T, d *jit.Device, shape ...int) Tensor[fp.BF16] {
	t.Helper()
	n := 1
	for _, s := range shape {
		n *= s
	}
	x, err := New(upload[fp.BF16](t, d, make([]float64, n)), shape...)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// of converts v to T (the fp types round to nearest).
func of[T jit.Elem](v float64) T {
	var z T
	switch any(z).(type) {
	case fp.F16:
		return any(fp.F16Of(float32(v))).(T)
	case fp.BF16:
		return any(fp.BF16Of(float32(v))).(T)
	case fp.E4M3:
		return any(fp.E4M3Of(float32(v))).(T)
	case float32:
		return any(float32(v)).(T)
	}
	panic("of: no conversion")
}

// value converts x back to float64.
func value[T jit.Elem](x T) float64 {
	switch v := any(x).(type) {
	case fp.F16:
		return float64(v.Float32())
	case fp.BF16:
		return float64(v.Float32())
	case fp.E4M3:
		return float64(v.Float32())
	case float32:
		return float64(v)
	}
	panic("value: no conversion")
}

// download reads the whole buffer as float64.
func download[T jit.Elem](t *testing.T, b *jit.Buffer[T]) []float64 {
	t.Helper()
	h := make([]T, b.Len())
	if err := b.CopyToHost(h); err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(h))
	for i, x := range h {
		out[i] = value(x)
	}
	return out
}

// randoms returns n values in [-2, 2) rounded to T.
func randoms[T jit.Elem](rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = value(of[T](4*rng.Float64() - 2))
	}
	return v
}

// softmaxRef is the float64 softmax of row r of the rows x cols matrix at off with row stride ld.
func softmaxRef(x []float64, off, ld, r, cols int) []float64 {
	row := x[off+r*ld : off+r*ld+cols]
	m := math.Inf(-1)
	for _, v := range row {
		m = math.Max(m, v)
	}
	s := 0.0
	out := make([]float64, cols)
	for j, v := range row {
		out[j] = math.Exp(v - m)
		s += out[j]
	}
	for j := range out {
		out[j] /= s
	}
	return out
}

// tol is the tolerance of a result of T computed in f32.
func tol[T jit.Elem]() float64 {
	var z T
	switch any(z).(type) {
	case fp.F16:
		return 1e-3
	case fp.BF16:
		return 8e-3
	}
	return 1e-5
}

func testSoftmax[T jit.Elem](t *testing.T, d *jit.Device, rows, cols, ld, col0 int) {
	ctx := context.Background()
	rng := rand.New(rand.NewSource(int64(rows*1000 + cols)))
	n := rows*ld + 8
	x := randoms[T](rng, n)
	inB := upload[T](t, d, x)
	outB := upload[T](t, d, make([]float64, n))
	full, err := Strided(inB, 0, []int{rows, ld}, []int{ld, 1})
	if err != nil {
		t.Fatal(err)
	}
	in, err := full.Narrow(1, col0, cols)
	if err != nil {
		t.Fatal(err)
	}
	outFull, _ := Strided(outB, 0, []int{rows, ld}, []int{ld, 1})
	out, _ := outFull.Narrow(1, col0, cols)
	if err := Softmax(ctx, nil, out, in); err != nil {
		t.Fatal(err)
	}
	got := download(t, outB)
	for r := 0; r < rows; r++ {
		want := softmaxRef(x, col0, ld, r, cols)
		for j := 0; j < cols; j++ {
			if g := got[col0+r*ld+j]; math.Abs(g-want[j]) > tol[T]()*math.Max(1, want[j]*float64(cols)) {
				t.Fatalf("%T %dx%d (ld %d, col %d): out[%d, %d] = %g; want %g", *new(T), rows, cols, ld, col0, r, j, g, want[j])
			}
		}
		// Columns outside the view stay untouched.
		for j := 0; j < ld; j++ {
			if (j < col0 || j >= col0+cols) && got[r*ld+j] != 0 {
				t.Fatalf("%dx%d view: out[%d, %d] outside the view was written (%g)", rows, cols, r, j, got[r*ld+j])
			}
		}
	}
}

// TestSoftmaxViews runs Softmax on dense and strided views (odd shapes, unaligned starts,
// warp-per-row and block-per-row rows) against the float64 reference.
func TestSoftmaxViews(t *testing.T) {
	d := emuDevice(t)
	for _, c := range []struct{ rows, cols, ld, col0 int }{
		{3, 8, 8, 0},       // dense, aligned: the library's softmax
		{5, 13, 13, 0},     // dense, odd columns
		{7, 13, 32, 3},     // strided, unaligned start
		{4, 64, 80, 16},    // strided, aligned: vectors
		{3, 1500, 1600, 1}, // block per row, unaligned
	} {
		testSoftmax[float32](t, d, c.rows, c.cols, c.ld, c.col0)
		testSoftmax[fp.F16](t, d, c.rows, c.cols, c.ld, c.col0)
		testSoftmax[fp.BF16](t, d, c.rows, c.cols, c.ld, c.col0)
	}
}

// gemmTol is the bound on |D - ref| for a K-long f32 sum of products with absolute sum abs,
// rounded to the output type out (relative precision eps).
func gemmTol(k int, abs, ref, eps float64) float64 {
	return float64(k+4)*0x1p-23*abs + eps*math.Abs(ref) + 1e-6
}

// testMatmul runs D = alpha*A*B + beta*C for A m x k at row stride lda (from column a0 of a
// wider matrix), B k x n (column-major when bCol: an n x k row-major matrix transposed),
// against the float64 reference.
func testMatmul[TI, TO jit.Elem](t *testing.T, d *jit.Device, m, n, k, lda, a0 int, bCol bool, alpha, beta float32, target string) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewSource(int64(m*7 + n*13 + k)))
	av := randoms[TI](rng, m*lda)
	bv := randoms[TI](rng, k*n)
	cv := randoms[TO](rng, m*n)
	aB, bB := upload[TI](t, d, av), upload[TI](t, d, bv)
	cB, dB := upload[TO](t, d, cv), upload[TO](t, d, make([]float64, m*n))
	aFull, err := Strided(aB, 0, []int{m, lda}, []int{lda, 1})
	if err != nil {
		t.Fatal(err)
	}
	a, err := aFull.Narrow(1, a0, k)
	if err != nil {
		t.Fatal(err)
	}
	var b Tensor[TI]
	bt := func(l, j int) float64 { return bv[l*n+j] }
	if bCol {
		nk, _ := New(bB, n, k)
		b, _ = nk.Transpose()
		bt = func(l, j int) float64 { return bv[j*k+l] }
	} else {
		b, _ = New(bB, k, n)
	}
	c, _ := New(cB, m, n)
	dd, _ := New(dB, m, n)
	o := &MatmulOptions[TO]{Alpha: alpha, Beta: beta, C: c}
	if target != "" {
		o.Target = ptxTarget(target)
	}
	if err := Matmul(ctx, nil, dd, a, b, o); err != nil {
		t.Fatal(err)
	}
	got := download(t, dB)
	eps := tol[TO]()
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			sum, abs := 0.0, 0.0
			for l := 0; l < k; l++ {
				x := av[i*lda+a0+l] * bt(l, j)
				sum += x
				abs += math.Abs(x)
			}
			ref := float64(alpha)*sum + float64(beta)*cv[i*n+j]
			bound := gemmTol(k, math.Abs(float64(alpha))*abs+math.Abs(float64(beta)*cv[i*n+j]), ref, eps)
			if g := got[i*n+j]; math.Abs(g-ref) > bound || math.IsNaN(g) {
				t.Fatalf("%T->%T %dx%dx%d (lda %d from %d, B col-major %v, %q): D[%d, %d] = %g; want %g (within %g)",
					*new(TI), *new(TO), m, n, k, lda, a0, bCol, target, i, j, g, ref, bound)
			}
		}
	}
}

// TestMatmul runs both gemm paths: gemm_sm90 (the emulator's default: it reports compute
// capability 9.0) with strided A and fp8's column-major B, and the mma.sync gemm (Target
// sm_80, and 16-bit layouts gemm_sm90 cannot read) at odd shapes.
func TestMatmul(t *testing.T) {
	d := emuDevice(t)
	// gemm_sm90
	testMatmul[fp.BF16, fp.BF16](t, d, 37, 24, 40, 40, 0, false, 1.5, -0.5, "")
	testMatmul[fp.F16, fp.F16](t, d, 19, 16, 32, 48, 8, false, 1, 0, "")
	testMatmul[fp.F16, float32](t, d, 9, 40, 24, 24, 0, false, 1, 1, "")
	testMatmul[fp.E4M3, fp.BF16](t, d, 21, 24, 48, 64, 16, true, 0.5, 0, "")
	// mma.sync: any shape; row- or column-major B
	testMatmul[fp.BF16, fp.BF16](t, d, 13, 10, 7, 7, 0, false, 1, 0, "sm_80")
	testMatmul[fp.F16, fp.F16](t, d, 33, 17, 24, 24, 0, true, 2, 0.25, "")
	testMatmul[fp.F16, float32](t, d, 16, 24, 40, 40, 0, true, 1, 0, "sm_80")
	t.Log(planNames(d))
}
