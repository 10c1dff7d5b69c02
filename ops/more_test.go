package ops

import (
	"context"
	"errors"
	"math"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
)

func testRowSum[T jit.Elem](t *testing.T, d *jit.Device, rows, cols, ld, col0 int) {
	t.Helper()
	rng := rand.New(rand.NewSource(int64(rows + cols*3)))
	x := randoms[T](rng, rows*ld)
	inB := upload[T](t, d, x)
	outB := upload[float32](t, d, make([]float64, rows))
	full, _ := Strided(inB, 0, []int{rows, ld}, []int{ld, 1})
	in, err := full.Narrow(1, col0, cols)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := New(outB, rows)
	if err := RowSum(context.Background(), nil, out, in); err != nil {
		t.Fatal(err)
	}
	got := download(t, outB)
	for r := 0; r < rows; r++ {
		sum, abs := 0.0, 0.0
		for j := 0; j < cols; j++ {
			sum += x[r*ld+col0+j]
			abs += math.Abs(x[r*ld+col0+j])
		}
		if math.Abs(got[r]-sum) > float64(cols+2)*0x1p-23*abs+1e-6 {
			t.Fatalf("%T %dx%d (ld %d from %d): out[%d] = %g; want %g", *new(T), rows, cols, ld, col0, r, got[r], sum)
		}
	}
}

// TestRowSumViews runs RowSum on dense and strided views against float64 sums.
func TestRowSumViews(t *testing.T) {
	d := emuDevice(t)
	for _, c := range []struct{ rows, cols, ld, col0 int }{
		{9, 16, 16, 0}, {5, 13, 13, 0}, {6, 21, 40, 5}, {3, 2000, 2048, 8}, {2, 1100, 1111, 1},
	} {
		testRowSum[float32](t, d, c.rows, c.cols, c.ld, c.col0)
		testRowSum[fp.F16](t, d, c.rows, c.cols, c.ld, c.col0)
		testRowSum[fp.BF16](t, d, c.rows, c.cols, c.ld, c.col0)
	}
}

// TestSplitRows runs few long rows, where ChooseRowKernel picks the split kernels (their
// scratch is the stream's, reused by the second call), against the references.
func TestSplitRows(t *testing.T) {
	d := emuDevice(t)
	testSoftmax[float32](t, d, 2, 20000, 20000, 0)
	testSoftmax[float32](t, d, 2, 20000, 20000, 0)
	testRowSum[float32](t, d, 2, 20000, 20000, 0)
	names := strings.Join(planNames(d), " ")
	if !strings.Contains(names, "softmax_split") || !strings.Contains(names, "row_sum_split") {
		t.Errorf("plans %s; want the split kernels", names)
	}
}

// TestTransposeAddAxpy runs the remaining ops at odd shapes against their references.
func TestTransposeAddAxpy(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	rng := rand.New(rand.NewSource(3))
	m, n := 37, 45
	x := randoms[fp.F16](rng, m*n)
	inB, outB := upload[fp.F16](t, d, x), upload[fp.F16](t, d, make([]float64, m*n))
	in, _ := New(inB, m, n)
	out, _ := New(outB, n, m)
	if err := Transpose(ctx, nil, out, in); err != nil {
		t.Fatal(err)
	}
	got := download(t, outB)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			if got[j*m+i] != x[i*n+j] {
				t.Fatalf("transpose: out[%d, %d] = %g; want %g", j, i, got[j*m+i], x[i*n+j])
			}
		}
	}
	const len = 1003
	a, b := randoms[float32](rng, len), randoms[float32](rng, len)
	aB, bB, cB := upload[float32](t, d, a), upload[float32](t, d, b), upload[float32](t, d, make([]float64, len))
	at, _ := New(aB, len)
	bt, _ := New(bB, len)
	ct, _ := New(cB, len)
	if err := Add(ctx, nil, ct, at, bt); err != nil {
		t.Fatal(err)
	}
	if err := Axpy(ctx, nil, bt, at, float32(-0.5)); err != nil {
		t.Fatal(err)
	}
	sum, axpy := download(t, cB), download(t, bB)
	for i := range a {
		if want := float64(float32(a[i]) + float32(b[i])); sum[i] != want {
			t.Fatalf("add: out[%d] = %g; want %g", i, sum[i], want)
		}
		if want := -0.5*a[i] + b[i]; math.Abs(axpy[i]-want) > 1e-6*math.Abs(want)+1e-7 {
			t.Fatalf("axpy: y[%d] = %g; want %g", i, axpy[i], want)
		}
	}
	// f16 axpy: alpha of the element type
	h := randoms[fp.F16](rng, 64)
	hB, yB := upload[fp.F16](t, d, h), upload[fp.F16](t, d, h)
	ht, _ := New(hB, 8, 8)
	yt, _ := New(yB, 8, 8)
	if err := Axpy(ctx, nil, yt, ht, fp.F16Of(2)); err != nil {
		t.Fatal(err)
	}
	for i, v := range download(t, yB) {
		if want := value(of[fp.F16](3 * h[i])); v != want {
			t.Fatalf("f16 axpy: y[%d] = %g; want %g", i, v, want)
		}
	}
}

// TestMisuse checks that bad operands are errors naming the operand and the rule.
func TestMisuse(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	f := upload[float32](t, d, make([]float64, 256))
	h := upload[fp.F16](t, d, make([]float64, 256))
	i8 := upload[fp.E4M3](t, d, make([]float64, 256))
	m8x8, _ := New(f, 8, 8)
	m8x4, _ := New(f, 8, 4)
	h8x8, _ := New(h, 8, 8)
	h8x16, _ := New(h, 8, 16)
	e8x16, _ := New(i8, 8, 16)
	e16x8, _ := New(i8, 16, 8)
	v8, _ := New(f, 8)
	unal, _ := Strided(f, 1, []int{8, 8}, []int{8, 1})
	hUnal, _ := Strided(h, 2, []int{8, 8}, []int{8, 1})
	colMajor, _ := ColMajor(f, 8, 8)
	hCol, _ := ColMajor(h, 8, 8)
	hGap, _ := Strided(h, 0, []int{8, 8}, []int{12, 1})
	hD, _ := New(upload[fp.F16](t, d, make([]float64, 64)), 8, 8) // D apart from A and B
	d2 := emuDevice(t)
	other := upload[float32](t, d2, make([]float64, 64))
	o8x8, _ := New(other, 8, 8)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"softmax shape", Softmax(ctx, nil, m8x4, m8x8), "out has shape [8 4], in [8 8]"},
		{"softmax rank", Softmax(ctx, nil, v8, v8), "in has rank 1"},
		{"softmax col-major", Softmax(ctx, nil, colMajor, colMajor), "in has strides [1 8]: each row must be contiguous"},
		{"softmax zero", Softmax(ctx, nil, Tensor[float32]{}, m8x8), "out is the zero Tensor"},
		{"softmax device", Softmax(ctx, nil, o8x8, m8x8), "every operand must be on one device"},
		{"softmax dtype", Softmax(ctx, nil, e8x16, e8x16), "in has element type e4m3"},
		{"rowsum out", RowSum(ctx, nil, m8x8, m8x8), "out has shape [8 8]; want [8]"},
		{"add unaligned", Add(ctx, nil, m8x8, unal, m8x8), "a starts 4 bytes past a 16-byte boundary"},
		{"add strided", Add(ctx, nil, m8x8, colMajor, m8x8), "a (shape [8 8], strides [1 8]) is not contiguous"},
		{"transpose shape", Transpose(ctx, nil, m8x4, m8x8), "out has shape [8 4]; want [8 8]"},
		{"matmul dtype", Matmul(ctx, nil, m8x8, m8x8, m8x8, nil), "A has element type f32"},
		{"matmul K", Matmul(ctx, nil, h8x8, h8x16, h8x8, nil), "B's rows must match A's columns (K)"},
		{"matmul D", Matmul(ctx, nil, h8x16, h8x8, h8x8, nil), "D is [8 16]; want [8 8]"},
		{"matmul align", Matmul(ctx, nil, h8x8, hUnal, h8x8, nil), "A starts 4 bytes past a 16-byte boundary"},
		{"matmul fp8 B", Matmul(ctx, nil, h8x8, e8x16, e16x8, nil), "must be column-major for e4m3"},
		{"matmul fp8 elsewhere", Matmul(ctx, nil, h8x8, e8x16, e16x8, &MatmulOptions[fp.F16]{Alpha: 1, Target: "sm_80"}), "e4m3 inputs run only on gemm_sm90"},
		{"matmul gap", Matmul(ctx, nil, hD, hGap, h8x8, &MatmulOptions[fp.F16]{Alpha: 1, Target: "sm_80"}), "the mma.sync gemm takes a dense row-major"},
		{"matmul in place", Matmul(ctx, nil, h8x8, h8x8, h8x8, nil), "A (bytes 0-128 of its buffer) overlaps D (bytes 0-128)"},
		{"matmul C", Matmul(ctx, nil, h8x8, h8x8, hCol, &MatmulOptions[fp.F16]{Alpha: 1, Beta: 1}), "C (Beta is not 0) is the zero Tensor"},
		{"matmul target", Matmul(ctx, nil, h8x8, h8x8, h8x8, &MatmulOptions[fp.F16]{Alpha: 1, Target: "sm_99"}), `Target "sm_99"`},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v; want an error containing %q", c.name, c.err, c.want)
		}
	}
	// Views out of bounds.
	if _, err := New(f, 17, 16); err == nil || !strings.Contains(err.Error(), "the buffer holds 256") {
		t.Errorf("New past the buffer: %v", err)
	}
	if _, err := Strided(f, 0, []int{2, 1 << 62}, []int{1 << 62, 4}); err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("Strided overflowing: %v", err)
	}
	if _, err := m8x8.Slice(1, 4, 9); err == nil || !strings.Contains(err.Error(), "extent 8") {
		t.Errorf("Slice past the extent: %v", err)
	}
	if _, err := colMajor.View(64); err == nil || !strings.Contains(err.Error(), "not contiguous") {
		t.Errorf("View of a strided tensor: %v", err)
	}
	// A cancelled context.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := Softmax(cctx, nil, m8x8, m8x8); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v; want context.Canceled", err)
	}
	// A stream of another device.
	s2, _ := d2.NewStream()
	defer s2.Close()
	if err := Softmax(ctx, s2, m8x8, m8x8); err == nil || !strings.Contains(err.Error(), "the stream belongs to") {
		t.Errorf("foreign stream: %v; want an error naming the stream", err)
	}
	if err := Matmul(ctx, s2, h8x8, h8x8, h8x8, nil); err == nil || !strings.Contains(err.Error(), "the stream belongs to") {
		t.Errorf("foreign stream (Matmul): %v; want an error naming the stream", err)
	}
	// A closed stream.
	s, _ := d.NewStream()
	s.Close()
	if err := Softmax(ctx, s, m8x8, m8x8); !errors.Is(err, jit.ErrClosed) {
		t.Errorf("closed stream: %v; want jit.ErrClosed", err)
	}
}

// TestClosedDevice checks that a call on a closed device reports jit.ErrClosed and drops the
// device's cache, before and after its first plan.
func TestClosedDevice(t *testing.T) {
	for _, warm := range []bool{false, true} {
		d, err := jit.OpenBackend(jit.Emulator, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := jit.Alloc[float32](d, 64)
		x, _ := New(b, 8, 8)
		if warm {
			if err := Softmax(context.Background(), nil, x, x); err != nil {
				t.Fatal(err)
			}
		}
		d.Close()
		if err := Softmax(context.Background(), nil, x, x); !errors.Is(err, jit.ErrClosed) {
			t.Errorf("warm %v: %v; want jit.ErrClosed", warm, err)
		}
		if _, ok := devices.Load(d); ok {
			t.Errorf("warm %v: the closed device's cache was kept", warm)
		}
	}
}

// TestConcurrentCalls runs the same ops from several goroutines on their own streams: the
// kernel is built once, every result is right.
func TestConcurrentCalls(t *testing.T) {
	d := emuDevice(t)
	const g = 6
	rows, cols := 5, 37
	var wg sync.WaitGroup
	errs := make([]error, g)
	outs := make([]*jit.Buffer[float32], g)
	rng := rand.New(rand.NewSource(1))
	x := randoms[float32](rng, rows*cols)
	in, _ := New(upload[float32](t, d, x), rows, cols)
	for i := 0; i < g; i++ {
		outs[i] = upload[float32](t, d, make([]float64, rows*cols))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s, err := d.NewStream()
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			out, _ := New(outs[i], rows, cols)
			if errs[i] = Softmax(context.Background(), s, out, in); errs[i] == nil {
				errs[i] = s.Synchronize()
			}
		}(i)
	}
	wg.Wait()
	for i := 0; i < g; i++ {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		got := download(t, outs[i])
		for r := 0; r < rows; r++ {
			want := softmaxRef(x, 0, cols, r, cols)
			for j := range want {
				if math.Abs(got[r*cols+j]-want[j]) > 1e-6 {
					t.Fatalf("goroutine %d: out[%d, %d] = %g; want %g", i, r, j, got[r*cols+j], want[j])
				}
			}
		}
	}
	st, _ := devices.Load(d)
	if n := len(st.(*devState).fns); n != 1 {
		t.Errorf("%d kernels loaded; want 1", n)
	}
}

// TestGraphCapture captures op calls (after a first call made their plans) into a graph
// on the emulator and replays it: the replay computes what the calls compute.
func TestGraphCapture(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	rng := rand.New(rand.NewSource(2))
	rows, cols := 4, 24
	x := randoms[fp.BF16](rng, rows*cols)
	w := randoms[fp.BF16](rng, cols*16)
	xt, _ := New(upload[fp.BF16](t, d, x), rows, cols)
	wt, _ := New(upload[fp.BF16](t, d, w), cols, 16)
	hB := upload[fp.BF16](t, d, make([]float64, rows*16))
	ht, _ := New(hB, rows, 16)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	step := func() error {
		if err := Matmul(ctx, s, ht, xt, wt, nil); err != nil {
			return err
		}
		return Softmax(ctx, s, ht, ht)
	}
	if err := step(); err != nil { // makes the plans
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	want := download(t, hB)
	if err := hB.CopyFromHost(make([]fp.BF16, rows*16)); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := step(); err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n := len(g.Kernels()); n != 2 {
		t.Fatalf("captured %d kernels; want 2", n)
	}
	x2, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer x2.Close()
	if err := x2.Launch(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := download(t, hB)
	for i := range want {
		if got[i] != want[i] || want[i] == 0 {
			t.Fatalf("replay: h[%d] = %g; the direct calls gave %g", i, got[i], want[i])
		}
	}
}

// TestMatmulNewBuffers runs Matmul on an A freed and allocated again between calls (maybe
// at the same address: a GPU's allocator reuses them, the emulator's does not): the tensor
// map of the freed one must not be reused.
func TestMatmulNewBuffers(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	bB := upload[fp.BF16](t, d, make([]float64, 16*16))
	dB := upload[fp.BF16](t, d, make([]float64, 16*16))
	b, _ := New(bB, 16, 16)
	dd, _ := New(dB, 16, 16)
	var addrs []jit.DevicePtr
	for i := 0; i < 3; i++ {
		aB, err := jit.Alloc[fp.BF16](d, 16*16)
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, aB.DevPtr())
		a, _ := New(aB, 16, 16)
		if err := Matmul(ctx, nil, dd, a, b, nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if err := d.Synchronize(); err != nil {
			t.Fatal(err)
		}
		aB.Free()
	}
	t.Logf("A's addresses: %v", addrs)
}
