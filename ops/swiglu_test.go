package ops

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// swigluRef is silu(g)*u in float64.
func swigluRef(g, u float64) float64 { return g / (1 + math.Exp(-g)) * u }

// swigluTol is SwiGLU's error bound at want: the rounding to the output type (unit
// roundoff u: 2^-8 bf16, 2^-11 f16) plus the f32 evaluation (the exponent's argument
// rounded, |g|*2^-24 relative, ex2.approx and rcp.approx a few 2^-23: under 2^-16 for |g|
// <= 100), and an absolute floor for results that underflow (f32 flushes below 2^-126; f16
// rounds to its 2^-24 spacing).
func swigluTol(u, want, floor float64) float64 {
	return (u+0x1p-16)*math.Abs(want) + floor
}

// testSwiGLU runs SwiGLU on rows x 2F random values of T (with a few large ones) and
// checks every output against float64, then the device row count.
func testSwiGLU[T jit.Elem](t *testing.T, d *jit.Device, rows, f int, u, floor float64) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewSource(int64(rows*1000 + f)))
	gu := make([]float64, rows*2*f)
	for i := range gu {
		gu[i] = value(of[T](8*rng.Float64() - 4))
	}
	for _, x := range []float64{-100, -30, -12, 0, 12, 30, 60} { // saturating gates
		gu[rng.Intn(rows)*2*f+rng.Intn(f)] = value(of[T](x))
	}
	const sentinel = 7
	init := make([]float64, rows*f)
	for i := range init {
		init[i] = sentinel
	}
	gb, ob := upload[T](t, d, gu), upload[T](t, d, init)
	in, _ := New(gb, rows, 2*f)
	out, _ := New(ob, rows, f)
	check := func(what string, n int) {
		t.Helper()
		got := download(t, ob)
		for r := 0; r < rows; r++ {
			for c := 0; c < f; c++ {
				v := got[r*f+c]
				if r >= n {
					if v != sentinel {
						t.Fatalf("%s: row %d (past the count %d) col %d: %v, want the sentinel", what, r, n, c, v)
					}
					continue
				}
				want := swigluRef(gu[r*2*f+c], gu[r*2*f+f+c])
				if !(math.Abs(v-want) <= swigluTol(u, want, floor)) {
					t.Fatalf("%s: row %d col %d: silu(%v)*%v = %v, want %v", what, r, c, gu[r*2*f+c], gu[r*2*f+f+c], v, want)
				}
			}
		}
	}
	// The device row count first (rows past it keep the sentinel), then all rows.
	ib, err := jit.Alloc[int32](d, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ib.Free() })
	counts, _ := New(ib, 3)
	for _, n := range []int{-3, rows / 2, rows + 5} {
		if err := ib.CopyFromHost([]int32{99, int32(n), 99}); err != nil {
			t.Fatal(err)
		}
		one, err := counts.Narrow(0, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := SwiGLU(ctx, nil, out, in, &SwiGLUOptions{Rows: one}); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("count %d", n), max(0, min(n, rows)))
	}
	if err := ob.CopyFromHost(make([]T, rows*f)); err != nil {
		t.Fatal(err)
	}
	if err := SwiGLU(ctx, nil, out, in, nil); err != nil {
		t.Fatal(err)
	}
	check("all rows", rows)
}

// TestSwiGLU checks SwiGLU in bf16 and f16 against float64 at odd shapes (one row, rows
// not a multiple of anything, F 8 to 136), with gates that saturate silu both ways, and
// the device row count: negative (no row), inside, past the rows (all).
func TestSwiGLU(t *testing.T) {
	d := emuDevice(t)
	for _, s := range [][2]int{{1, 8}, {37, 24}, {5, 136}, {64, 16}} {
		testSwiGLU[fp.BF16](t, d, s[0], s[1], 0x1p-8, 0x1p-119)
		testSwiGLU[fp.F16](t, d, s[0], s[1], 0x1p-11, 0x1p-25)
	}
}

// TestSwiGLUErrors checks that bad operands fail naming the operand and the rule.
func TestSwiGLUErrors(t *testing.T) {
	ctx := context.Background()
	d := emuDevice(t)
	mk := func(shape ...int) Tensor[fp.BF16] {
		n := 1
		for _, s := range shape {
			n *= s
		}
		b := upload[fp.BF16](t, d, make([]float64, n))
		x, err := New(b, shape...)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	gu, out := mk(4, 32), mk(4, 16)
	strided, _ := mk(4, 32).Narrow(1, 0, 16)
	big := mk(4, 32)
	first, _ := big.Narrow(0, 0, 2)
	overlapping, _ := first.View(4, 16) // big's first two rows
	ib, _ := jit.Alloc[int32](d, 2)
	two, _ := New(ib, 2)
	f32b := upload[float32](t, d, make([]float64, 4*32))
	f32in, _ := New(f32b, 4, 32)
	f32out, _ := New(upload[float32](t, d, make([]float64, 4*16)), 4, 16)
	var nilCtx context.Context // a nil context is the misuse tested
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"nil ctx", SwiGLU(nilCtx, nil, out, gu, nil), "nil context"},
		{"odd columns", SwiGLU(ctx, nil, mk(4, 8), mk(4, 17), nil), "want 2F"},
		{"F not a multiple of 8", SwiGLU(ctx, nil, mk(4, 6), mk(4, 12), nil), "multiple of 8"},
		{"out shape", SwiGLU(ctx, nil, mk(4, 32), gu, nil), "out has shape [4 32]; want [4 16]"},
		{"out rows", SwiGLU(ctx, nil, mk(3, 16), gu, nil), "want [4 16]"},
		{"rank", SwiGLU(ctx, nil, out, mk(4, 2, 16), nil), "2-D"},
		{"f32", SwiGLU(ctx, nil, f32out, f32in, nil), "element type f32"},
		{"strided out", SwiGLU(ctx, nil, strided, gu, nil), "not contiguous"},
		{"overlap", SwiGLU(ctx, nil, overlapping, big, nil), "overlaps"},
		{"rows shape", SwiGLU(ctx, nil, out, gu, &SwiGLUOptions{Rows: two}), "Rows has shape [2]; want [1]"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v; want an error containing %q", c.name, c.err, c.want)
		}
	}
}

// testSwiGLUMasked runs SwiGLU on the masked layout (Options.Counts, Stride: len(counts)
// groups at stride rows, then tail rows of no group; counts as the device holds them,
// clamped by the kernel to [0, stride]) and checks the counted rows bit for bit against
// SwiGLU over every row, every other row keeping the sentinel.
func testSwiGLUMasked[T jit.Elem](t *testing.T, d *jit.Device, counts []int32, stride, tail, f int) {
	t.Helper()
	ctx := context.Background()
	g := len(counts)
	rows := g*stride + tail
	rng := rand.New(rand.NewSource(int64(rows*100 + f)))
	gu := make([]float64, rows*2*f)
	for i := range gu {
		gu[i] = value(of[T](8*rng.Float64() - 4))
	}
	const sentinel = 7
	init := make([]float64, rows*f)
	for i := range init {
		init[i] = sentinel
	}
	in, _ := New(upload[T](t, d, gu), rows, 2*f)
	mb, ab := upload[T](t, d, init), upload[T](t, d, init)
	masked, _ := New(mb, rows, f)
	all, _ := New(ab, rows, f)
	cnt, _ := New(uploadInts(t, d, counts), g)
	if err := SwiGLU(ctx, nil, masked, in, &SwiGLUOptions{Counts: cnt, Stride: stride}); err != nil {
		t.Fatal(err)
	}
	if err := SwiGLU(ctx, nil, all, in, nil); err != nil {
		t.Fatal(err)
	}
	m, a := make([]T, rows*f), make([]T, rows*f)
	if err := mb.CopyToHost(m); err != nil {
		t.Fatal(err)
	}
	if err := ab.CopyToHost(a); err != nil {
		t.Fatal(err)
	}
	computed := 0
	for r := 0; r < rows; r++ {
		e := r / stride
		counted := e < g && r-e*stride < int(min(max(counts[e], 0), int32(stride)))
		for c := 0; c < f; c++ {
			i := r*f + c
			switch {
			case counted && m[i] != a[i]:
				t.Fatalf("counts %v stride %d: row %d col %d: %v masked, %v over every row: not the same bits", counts, stride, r, c, value(m[i]), value(a[i]))
			case !counted && value(m[i]) != sentinel:
				t.Fatalf("counts %v stride %d: row %d col %d (not counted): %v, want the sentinel", counts, stride, r, c, value(m[i]))
			case counted:
				computed++
			}
		}
	}
	if computed == 0 && len(counts) > 1 {
		t.Fatalf("counts %v: nothing computed: the test checks nothing", counts)
	}
}

// TestSwiGLUMasked checks SwiGLU's masked layout in bf16 and f16: counts 0, 1, the stride,
// stride-1, negative and past the stride (clamped), 1 to 33 groups, rows after the last
// group's slots, F 8 to 136.
func TestSwiGLUMasked(t *testing.T) {
	d := emuDevice(t)
	c33 := make([]int32, 33)
	for i := range c33 {
		c33[i] = int32(i%13 - 2)
	}
	for _, tc := range []struct {
		counts          []int32
		stride, tail, f int
	}{
		{[]int32{1}, 1, 0, 8},
		{[]int32{5}, 9, 3, 24},
		{[]int32{0, 1, 40, 39, 17, -3, 45}, 40, 2, 16},
		{c33, 9, 1, 136},
	} {
		testSwiGLUMasked[fp.BF16](t, d, tc.counts, tc.stride, tc.tail, tc.f)
		testSwiGLUMasked[fp.F16](t, d, tc.counts, tc.stride, tc.tail, tc.f)
	}
}

// TestSwiGLUMaskedErrors: each bad masked operand is an error naming it and the rule.
func TestSwiGLUMaskedErrors(t *testing.T) {
	ctx := context.Background()
	d := emuDevice(t)
	gu, _ := New(upload[fp.BF16](t, d, make([]float64, 8*32)), 8, 32)
	out, _ := New(upload[fp.BF16](t, d, make([]float64, 8*16)), 8, 16)
	ints := func(shape ...int) Tensor[int32] {
		n := 1
		for _, s := range shape {
			n *= s
		}
		x, _ := New(uploadInts(t, d, make([]int32, n)), shape...)
		return x
	}
	one, _ := ints(2).Narrow(0, 0, 1)
	for _, c := range []struct {
		name string
		o    *SwiGLUOptions
		want string
	}{
		{"rows too", &SwiGLUOptions{Rows: one, Counts: ints(2), Stride: 4}, "SwiGLUOptions.Rows and Counts are both set"},
		{"stride alone", &SwiGLUOptions{Stride: 4}, "SwiGLUOptions.Stride 4 without Counts"},
		{"counts rank", &SwiGLUOptions{Counts: ints(2, 2), Stride: 4}, "Counts has shape [2 2]; want [groups]"},
		{"stride 0", &SwiGLUOptions{Counts: ints(2), Stride: 0}, "stride 0: want a positive row stride"},
		{"slots past rows", &SwiGLUOptions{Counts: ints(3), Stride: 3}, "stride 3 x 3 groups = 9 rows: the groups' slots must lie inside the 8 rows"},
		{"too many groups", &SwiGLUOptions{Counts: ints(kernels.SwiGLUMaxGroups + 1), Stride: 1}, "257 groups: want 1..256"},
	} {
		err := SwiGLU(ctx, nil, out, gu, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error containing %q", c.name, err, c.want)
		}
	}
}
