package ops

import (
	"context"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// actRef is the float64 activation.
func actRef(a kernels.Activation, v float64) float64 {
	switch a {
	case kernels.ReLU:
		return math.Max(v, 0)
	case kernels.SiLU:
		return v / (1 + math.Exp(-v))
	case kernels.GELU:
		return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
	}
	return v
}

// testEpilogue runs D = act(alpha*A*B [*scales] + beta*C + bias) + residual through
// Matmul's options (residual: D itself when resInD) against float64.
func testEpilogue[TI, TO jit.Elem](t *testing.T, d *jit.Device, m, n, k int, bias, scales, res, resInD bool, act kernels.Activation, target string) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewSource(int64(m*7 + n*13 + k)))
	fp8 := scales
	av, bv := randoms[TI](rng, m*k), randoms[TI](rng, k*n)
	rv, biasv := randoms[TO](rng, m*n), randoms[float32](rng, n)
	sa, sb := randoms[float32](rng, m), randoms[float32](rng, n)
	aB, bB := upload[TI](t, d, av), upload[TI](t, d, bv)
	dB := upload[TO](t, d, make([]float64, m*n))
	if resInD {
		dB = upload[TO](t, d, rv)
	}
	a, _ := New(aB, m, k)
	b, _ := New(bB, k, n)
	bt := func(l, j int) float64 { return bv[l*n+j] }
	if fp8 {
		nk, _ := New(bB, n, k)
		b, _ = nk.Transpose()
		bt = func(l, j int) float64 { return bv[j*k+l] }
	}
	dd, _ := New(dB, m, n)
	o := &MatmulOptions[TO]{Alpha: 0.75, Act: act, Target: ptxTarget(target)}
	if bias {
		o.Bias, _ = New(upload[float32](t, d, biasv), n)
	}
	if scales {
		o.ScaleA, _ = New(upload[float32](t, d, sa), m)
		o.ScaleB, _ = New(upload[float32](t, d, sb), n)
	}
	switch {
	case resInD:
		o.Residual = dd
	case res:
		o.Residual, _ = New(upload[TO](t, d, rv), m, n)
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
				x := av[i*k+l] * bt(l, j)
				sum, abs = sum+x, abs+math.Abs(x)
			}
			v, vabs := 0.75*sum, 0.75*abs
			if scales {
				v, vabs = v*sa[i]*sb[j], vabs*math.Abs(sa[i]*sb[j])
			}
			if bias {
				v, vabs = v+biasv[j], vabs+math.Abs(biasv[j])
			}
			// the activations' tanh.approx: within 2^-12 |v| (their documented bound)
			ref, bound := actRef(act, v), gemmTol(k, vabs, v, 0)+0x1p-11*math.Abs(v)
			if res || resInD {
				ref += rv[i*n+j]
				bound += 1e-6
			}
			bound += eps * math.Abs(ref)
			if g := got[i*n+j]; math.Abs(g-ref) > bound || math.IsNaN(g) {
				t.Fatalf("%T->%T %dx%dx%d bias %v scales %v res %v (in D %v) %v %q: D[%d, %d] = %g; want %g (within %g)",
					*new(TI), *new(TO), m, n, k, bias, scales, res, resInD, act, target, i, j, g, ref, bound)
			}
		}
	}
}

// TestMatmulEpilogue runs the epilogue options on both gemm paths at odd shapes against
// float64: bias + SiLU, GELU with a residual, ReLU with the residual in D, f32 output,
// e4m3 with row-wise scales.
func TestMatmulEpilogue(t *testing.T) {
	d := emuDevice(t)
	for _, target := range []string{"", "sm_80"} {
		testEpilogue[fp.BF16, fp.BF16](t, d, 37, 24, 40, true, false, false, false, kernels.SiLU, target)
		testEpilogue[fp.F16, fp.F16](t, d, 19, 16, 32, true, false, true, false, kernels.GELU, target)
		testEpilogue[fp.BF16, fp.BF16](t, d, 9, 40, 24, false, false, false, true, kernels.ReLU, target)
		testEpilogue[fp.F16, float32](t, d, 17, 24, 16, true, false, true, false, kernels.ActNone, target)
	}
	testEpilogue[fp.E4M3, fp.BF16](t, d, 21, 24, 48, true, true, false, false, kernels.SiLU, "")
	names := strings.Join(planNames(d), " ")
	for _, want := range []string{"_ep_bias_silu", "_ep_bias_gelu_residual", "_ep_relu_residual", "_ep_scales_bias_silu"} {
		if !strings.Contains(names, want) {
			t.Errorf("no kernel with %s among %s", want, names)
		}
	}
}

// TestMatmulEpilogueMisuse: each wrong epilogue operand is an error naming it and the rule.
func TestMatmulEpilogueMisuse(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	a, _ := New(upload[fp.BF16](t, d, make([]float64, 16*32)), 16, 32)
	b, _ := New(upload[fp.BF16](t, d, make([]float64, 32*24)), 32, 24)
	dd, _ := New(upload[fp.BF16](t, d, make([]float64, 16*24)), 16, 24)
	vec := func(n int) Tensor[float32] { v, _ := New(upload[float32](t, d, make([]float64, n)), n); return v }
	wide, _ := New(upload[float32](t, d, make([]float64, 48)), 2, 24)
	odd, _ := vec(25).Narrow(0, 1, 24)
	res, _ := New(upload[fp.BF16](t, d, make([]float64, 16*16)), 16, 16)
	for _, c := range []struct {
		o    MatmulOptions[fp.BF16]
		want string
	}{
		{MatmulOptions[fp.BF16]{Alpha: 1, Bias: vec(16)}, "Bias has shape [16]; want [24]"},
		{MatmulOptions[fp.BF16]{Alpha: 1, Bias: wide}, "Bias has shape [2 24]; want [24]"},
		{MatmulOptions[fp.BF16]{Alpha: 1, Bias: odd}, "Bias starts 4 bytes past a 16-byte boundary"},
		{MatmulOptions[fp.BF16]{Alpha: 1, ScaleA: vec(16)}, "set both ScaleA"},
		{MatmulOptions[fp.BF16]{Alpha: 1, ScaleA: vec(16), ScaleB: vec(24)}, "row-wise scales of fp8 (e4m3) inputs"},
		{MatmulOptions[fp.BF16]{Alpha: 1, Residual: res}, "Residual has shape [16 16]; want [16 24]"},
		{MatmulOptions[fp.BF16]{Alpha: 1, Act: kernels.Activation(9)}, "MatmulOptions.Act 9"},
	} {
		o := c.o
		err := Matmul(ctx, nil, dd, a, b, &o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v; want an error with %q", err, c.want)
		}
	}
}

// TestMatmulEpilogueCapture: a Matmul with epilogue operands replays from a CUDA graph
// (captured after a first call made its plan) with the operands' new contents.
func TestMatmulEpilogueCapture(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ones := func(n int, v float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = v
		}
		return x
	}
	a, _ := New(upload[fp.BF16](t, d, ones(8*16, 1)), 8, 16)
	b, _ := New(upload[fp.BF16](t, d, ones(16*8, 1)), 16, 8)
	biasB := upload[float32](t, d, ones(8, 1))
	bias, _ := New(biasB, 8)
	dB := upload[fp.BF16](t, d, make([]float64, 64))
	dd, _ := New(dB, 8, 8)
	o := &MatmulOptions[fp.BF16]{Alpha: 1, Bias: bias, Act: kernels.ReLU}
	if err := Matmul(ctx, s, dd, a, b, o); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := Matmul(ctx, s, dd, a, b, o); err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	x, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	if err := biasB.CopyFromHost([]float32{-20, -20, -20, -20, 4, 4, 4, 4}); err != nil {
		t.Fatal(err)
	}
	if err := x.Launch(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := download(t, dB)
	for j, want := range []float64{0, 0, 0, 0, 20, 20, 20, 20} {
		if got[j] != want || got[56+j] != want {
			t.Fatalf("after the replay D[0, %d] = %g, D[7, %d] = %g; want %g (relu(16 + bias))", j, got[j], j, got[56+j], want)
		}
	}
}

// TestMatmulOverlap: an operand sharing D's bytes is refused (a race on a GPU), except C or
// Residual that is D itself; operands in other buffers, or apart in D's, are fine.
func TestMatmulOverlap(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	const m, n, k = 16, 64, 32
	a, _ := New(upload[fp.BF16](t, d, make([]float64, m*k)), m, k)
	b, _ := New(upload[fp.BF16](t, d, make([]float64, k*n)), k, n)
	big := upload[fp.BF16](t, d, make([]float64, (m+1)*n+m*k))
	dd, _ := Strided(big, 0, []int{m, n}, []int{n, 1})
	shifted, _ := Strided(big, n, []int{m, n}, []int{n, 1})      // D one row down
	aInD, _ := Strided(big, m*n-k, []int{m, k}, []int{k, 1})     // A's first row is D's last k
	aAfter, _ := Strided(big, (m+1)*n, []int{m, k}, []int{k, 1}) // A after D: apart
	fD := upload[float32](t, d, make([]float64, m*n))
	fd, _ := New(fD, m, n)
	biasInD, _ := New(fD, n) // D's row 0
	for _, c := range []struct {
		name string
		call func() error
		want string // "" for no error
	}{
		{"residual shifted", func() error {
			return Matmul(ctx, nil, dd, a, b, &MatmulOptions[fp.BF16]{Alpha: 1, Residual: shifted})
		}, "Residual (bytes 128-2176 of its buffer) overlaps D (bytes 0-2048)"},
		{"residual is D", func() error { return Matmul(ctx, nil, dd, a, b, &MatmulOptions[fp.BF16]{Alpha: 1, Residual: dd}) }, ""},
		{"C is D", func() error { return Matmul(ctx, nil, dd, a, b, &MatmulOptions[fp.BF16]{Alpha: 1, Beta: 1, C: dd}) }, ""},
		{"C shifted", func() error {
			return Matmul(ctx, nil, dd, a, b, &MatmulOptions[fp.BF16]{Alpha: 1, Beta: 1, C: shifted})
		}, "C (bytes"},
		{"A in D", func() error { return Matmul(ctx, nil, dd, aInD, b, nil) }, "A (bytes"},
		{"A after D", func() error { return Matmul(ctx, nil, dd, aAfter, b, nil) }, ""},
		{"bias in D", func() error {
			return Matmul(ctx, nil, fd, a, b, &MatmulOptions[float32]{Alpha: 1, Bias: biasInD})
		}, "Bias (bytes 0-256 of its buffer) overlaps D"},
	} {
		err := c.call()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
}

// TestOverlapOtherOps: every op refuses an input that shares part of its output's memory
// (a race on a GPU), and takes the exact in-place forms its docs allow.
func TestOverlapOtherOps(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	buf := upload[float32](t, d, make([]float64, 64*64+8))
	sq, _ := New(buf, 64, 64)
	v0, _ := Strided(buf, 0, []int{1024}, []int{1})
	v4, _ := Strided(buf, 4, []int{1024}, []int{1})
	r0, _ := Strided(buf, 0, []int{4, 8}, []int{16, 1})
	r4, _ := Strided(buf, 4, []int{4, 8}, []int{16, 1})
	sums, _ := Strided(buf, 8, []int{4}, []int{1})
	for _, c := range []struct {
		name string
		err  error
		want string // "" for no error
	}{
		{"transpose in place", Transpose(ctx, nil, sq, sq), "in (bytes 0-16384 of its buffer) overlaps out"},
		{"add shifted", Add(ctx, nil, v4, v0, v0), "a (bytes 0-4096 of its buffer) overlaps out (bytes 16-4112)"},
		{"add in place", Add(ctx, nil, v0, v0, v0), ""},
		{"axpy shifted", Axpy(ctx, nil, v4, v0, float32(2)), "x (bytes 0-4096 of its buffer) overlaps y"},
		{"axpy in place", Axpy(ctx, nil, v0, v0, float32(2)), ""},
		{"softmax shifted", Softmax(ctx, nil, r4, r0), "in (bytes 0-224 of its buffer) overlaps out"},
		{"softmax in place", Softmax(ctx, nil, r0, r0), ""},
		{"rowsum into its rows", RowSum(ctx, nil, sums, r0), "in (bytes 0-224 of its buffer) overlaps out"},
	} {
		if c.want == "" && c.err != nil || c.want != "" && (c.err == nil || !strings.Contains(c.err.Error(), c.want)) {
			t.Errorf("%s: %v; want %q", c.name, c.err, c.want)
		}
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
}
