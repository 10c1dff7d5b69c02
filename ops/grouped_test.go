package ops

import (
	"context"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/ptx"
)

// groupedCase runs GroupedMatmul on the emulator for the group row counts (after lead rows
// of no group) and checks D against ref.GroupedMatmulRef: the rows of no group keep D's
// sentinel.
func groupedCase[TI, TO jit.Elem](t *testing.T, d *jit.Device, counts []int, lead, tail, n, k int, beta float32, scales bool, seed int64) {
	t.Helper()
	groupedCaseWith[TI, TO](t, d, kernels.GemmSM90GroupedConfig{}, counts, lead, tail, n, k, beta, scales, seed)
}

// groupedCaseWith is groupedCase with GroupedMatmulOptions.Config cfg (zero: the pick).
func groupedCaseWith[TI, TO jit.Elem](t *testing.T, d *jit.Device, cfg kernels.GemmSM90GroupedConfig, counts []int, lead, tail, n, k int, beta float32, scales bool, seed int64) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	g := len(counts)
	offs := make([]int32, g+1)
	offs[0] = int32(lead)
	for i, c := range counts {
		offs[i+1] = offs[i] + int32(c)
	}
	rows := int(offs[g]) + tail
	ah, bh, ch := randoms[TI](rng, rows*k), randoms[TI](rng, g*k*n), randoms[TO](rng, rows*n)
	const sentinel = 7
	dh := make([]float64, rows*n)
	for i := range dh {
		dh[i] = sentinel
	}
	must := func(e error) {
		t.Helper()
		if e != nil {
			t.Fatal(e)
		}
	}
	a, err := New(upload[TI](t, d, ah), rows, k)
	must(err)
	var b Tensor[TI]
	if jit.ElemType[TI]() == ptx.E4M3 {
		// Each group's N x K row-major matrix, seen as [g, K, N] with strides [N*K, 1, K].
		bt := make([]float64, len(bh))
		for e := 0; e < g; e++ {
			for l := 0; l < k; l++ {
				for j := 0; j < n; j++ {
					bt[(e*n+j)*k+l] = bh[(e*k+l)*n+j]
				}
			}
		}
		b, err = Strided(upload[TI](t, d, bt), 0, []int{g, k, n}, []int{n * k, 1, k})
	} else {
		b, err = New(upload[TI](t, d, bh), g, k, n)
	}
	must(err)
	c, err := New(upload[TO](t, d, ch), rows, n)
	must(err)
	var sa, sb []float64
	opt := &GroupedMatmulOptions[TO]{Alpha: 0.5, Beta: beta, C: c, Config: cfg}
	if scales {
		sa, sb = make([]float64, rows), make([]float64, g*n)
		for _, v := range [][]float64{sa, sb} {
			for i := range v {
				v[i] = value(of[float32](0.5 + 1.5*rng.Float64()))
			}
		}
		opt.ScaleA, err = New(upload[float32](t, d, sa), rows)
		must(err)
		opt.ScaleB, err = New(upload[float32](t, d, sb), g, n)
		must(err)
	}
	db := upload[TO](t, d, dh)
	dt, err := New(db, rows, n)
	must(err)
	off, err := New(uploadInts(t, d, offs), g+1)
	must(err)
	const alpha = 0.5
	must(GroupedMatmul(context.Background(), nil, dt, a, b, off, opt))
	got := download(t, db)
	want, scale := ref.GroupedMatmulRef(ah, bh, ch, offs, rows, n, k, alpha, float64(beta), sa, sb)
	var outT TO
	for i := range want {
		w := want[i]
		if math.IsNaN(w) {
			w = sentinel
		}
		tol := ref.GemmTolerance(jit.ElemType[TO](), k, scale[i], w)
		if !(math.Abs(got[i]-w) <= tol) {
			t.Fatalf("%T: D[%d,%d] = %v, want %v (tolerance %.3g)", outT, i/n, i%n, got[i], w, tol)
		}
	}
}

// TestGroupedMatmul checks GroupedMatmul against the float64 reference on the emulator:
// bf16 -> bf16, f16 -> f32 and e4m3 -> bf16/f32 (B K-major), with and without the row and
// group-column scales, empty groups, all rows in one group, rows of no group, 1 to 32
// groups, K and N multiples of 8 and of 64.
func TestGroupedMatmul(t *testing.T) {
	d := emuDevice(t)
	groupedCase[fp.BF16, fp.BF16](t, d, []int{5, 0, 70, 13}, 2, 3, 64, 64, 0, false, 1)
	groupedCase[fp.BF16, fp.BF16](t, d, []int{0, 40, 0}, 0, 0, 24, 40, -0.5, false, 2)
	groupedCase[fp.F16, float32](t, d, []int{9, 1, 0, 17, 3, 0, 2, 11}, 0, 1, 16, 24, 0.25, false, 3)
	groupedCase[fp.E4M3, fp.BF16](t, d, []int{9, 0, 70, 3}, 1, 2, 40, 48, 0, true, 6)
	groupedCase[fp.E4M3, float32](t, d, []int{17, 5}, 0, 0, 16, 32, 0.5, false, 7)
	groupedCase[fp.BF16, fp.BF16](t, d, []int{3, 12}, 0, 1, 8, 16, 0, true, 8)
	counts := make([]int, 32)
	for i := range counts {
		counts[i] = i % 5
	}
	groupedCase[fp.BF16, fp.BF16](t, d, counts, 0, 0, 8, 16, 0, false, 4)
	groupedCase[fp.BF16, fp.BF16](t, d, []int{1}, 0, 0, 8, 8, 0, false, 5)
}

// TestGroupedMatmulConfig runs GroupedMatmul with forced configurations (the bench's
// variants) against the float64 reference on the emulator: the TMA-store epilogue with
// crossing tiles and rows of no group after the last group, banded and row-tile orders,
// bf16 -> bf16 and e4m3 with scales; a configuration of other types, or one the shape
// cannot run, is an error naming GroupedMatmulOptions.Config.
func TestGroupedMatmulConfig(t *testing.T) {
	d := emuDevice(t)
	small := kernels.GemmSM90GroupedConfig{GemmSM90Config: kernels.GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 64, Consumers: 1, Stages: 2, TMAStore: true}}
	groupedCaseWith[fp.BF16, fp.BF16](t, d, small, []int{5, 0, 70, 13}, 2, 9, 64, 64, 0, false, 1)
	small.BandM = 2
	groupedCaseWith[fp.BF16, fp.BF16](t, d, small, []int{64, 130, 0, 1}, 0, 70, 136, 40, -0.5, false, 2)
	big := kernels.DefaultGemmSM90GroupedConfig(dsl.BF16)
	big.TMAStore, big.BandM = true, 8
	groupedCaseWith[fp.BF16, fp.BF16](t, d, big, []int{200, 0, 60}, 1, 5, 264, 64, 0, false, 3)
	f8 := kernels.DefaultGemmSM90GroupedConfig(dsl.E4M3)
	f8.TMAStore, f8.BandM, f8.BN, f8.Stages = true, 4, 64, 4
	groupedCaseWith[fp.E4M3, fp.BF16](t, d, f8, []int{9, 0, 70, 3}, 1, 2, 40, 48, 0.25, true, 6)

	ctx := context.Background()
	buf := func(n int) *jit.Buffer[fp.BF16] { return upload[fp.BF16](t, d, make([]float64, n)) }
	a, _ := New(buf(16*8), 16, 8)
	b, _ := New(buf(2*8*8), 2, 8, 8)
	out, _ := New(buf(16*8), 16, 8)
	off, _ := New(uploadInts(t, d, []int32{0, 8, 16}), 3)
	for _, tc := range []struct {
		cfg  kernels.GemmSM90GroupedConfig
		want string
	}{
		{kernels.DefaultGemmSM90GroupedConfig(dsl.F16), "Config is f16 -> f16"},
		{kernels.GemmSM90GroupedConfig{GemmSM90Config: small.GemmSM90Config, BandM: 99}, "BandM 99"},
	} {
		err := GroupedMatmul(ctx, nil, out, a, b, off, &GroupedMatmulOptions[fp.BF16]{Alpha: 1, Config: tc.cfg})
		if err == nil || !strings.Contains(err.Error(), "GroupedMatmulOptions.Config") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Config %s: %v; want an error naming GroupedMatmulOptions.Config and %q", tc.cfg.Name(), err, tc.want)
		}
	}
}

// TestGroupedMatmulRefuses: each bad operand is an error naming it and the rule.
func TestGroupedMatmulRefuses(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	mk := func(shape ...int) Tensor[fp.BF16] { return zerosBF16(t, d, shape...) }
	offs := func(n int) Tensor[int32] {
		x, err := New(uploadInts(t, d, make([]int32, n)), n)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	a, b, out := mk(16, 32), mk(2, 32, 16), mk(16, 16)
	a8, err := New(upload[fp.E4M3](t, d, make([]float64, 16*32)), 16, 32)
	if err != nil {
		t.Fatal(err)
	}
	b8row, err := New(upload[fp.E4M3](t, d, make([]float64, 2*32*16)), 2, 32, 16)
	if err != nil {
		t.Fatal(err)
	}
	f32 := func(shape ...int) Tensor[float32] {
		x, err := New(upload[float32](t, d, make([]float64, 16)), shape...)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	wide := mk(16, 64)
	view, _ := wide.Narrow(1, 0, 32)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"B rank 2", GroupedMatmul(ctx, nil, out, a, mk(32, 16), offs(3), nil), "B has rank 2"},
		{"K mismatch", GroupedMatmul(ctx, nil, out, a, mk(2, 24, 16), offs(3), nil), "must match A's columns"},
		{"D shape", GroupedMatmul(ctx, nil, mk(16, 8), a, b, offs(3), nil), "D is [16 8]"},
		{"offsets count", GroupedMatmul(ctx, nil, out, a, b, offs(2), nil), "offsets has shape [2]"},
		{"A view", GroupedMatmul(ctx, nil, out, view, b, offs(3), nil), "A (shape [16 32]"},
		{"N not 8", GroupedMatmul(ctx, nil, mk(16, 12), a, mk(2, 32, 12), offs(3), nil), "multiples of 8"},
		{"C missing", GroupedMatmul(ctx, nil, out, a, b, offs(3), &GroupedMatmulOptions[fp.BF16]{Alpha: 1, Beta: 1}), "C (Beta is not 0)"},
		{"A is D", GroupedMatmul(ctx, nil, out, out, mk(2, 16, 16), offs(3), nil), "A"},
		{"canceled", GroupedMatmul(canceled, nil, out, a, b, offs(3), nil), "context canceled"},
		{"e4m3 B row-major", GroupedMatmul(ctx, nil, out, a8, b8row, offs(3), nil), "e4m3 B has strides [512 16 1]; want [512 1 32]"},
		{"ScaleA alone", GroupedMatmul(ctx, nil, out, a, b, offs(3), &GroupedMatmulOptions[fp.BF16]{Alpha: 1, ScaleA: f32(16)}), "set both ScaleA"},
		{"ScaleB shape", GroupedMatmul(ctx, nil, out, a, b, offs(3), &GroupedMatmulOptions[fp.BF16]{Alpha: 1, ScaleA: f32(16), ScaleB: f32(16)}), "ScaleB has shape [16]; want [2 16]"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, tc.err, tc.want)
		} else if testing.Verbose() {
			t.Log(tc.err)
		}
	}
}
