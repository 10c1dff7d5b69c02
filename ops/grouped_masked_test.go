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

// maskedCase runs GroupedMatmul on the masked layout (Options.Counts, Stride) on the
// emulator: len(counts) groups at stride rows, then tail rows of no group; counts are the
// device values (the kernel clamps them to [0, stride]). A's rows outside every group hold
// NaN and D starts as a sentinel: the groups' rows must match ref.MaskedGroupedMatmulRef
// and every other row keep the sentinel. The same call on the offsets g*stride (every slot
// computed, as the low-latency layer ran before the masked mode) must give the counted rows
// bit for bit.
func maskedCase[TI, TO jit.Elem](t *testing.T, d *jit.Device, cfg kernels.GemmSM90GroupedConfig, counts []int32, stride, tail, n, k int, beta float32, scales bool, seed int64) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewSource(seed))
	g := len(counts)
	rows := g*stride + tail
	counted := make([]bool, rows)
	for e, c := range counts {
		for r := 0; r < min(max(int(c), 0), stride); r++ {
			counted[e*stride+r] = true
		}
	}
	ah, bh, ch := randoms[TI](rng, rows*k), randoms[TI](rng, g*k*n), randoms[TO](rng, rows*n)
	for r, ok := range counted {
		for l := 0; !ok && l < k; l++ {
			ah[r*k+l] = math.NaN()
		}
	}
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
		bt := make([]float64, len(bh)) // each group's N x K row-major, seen as [g, K, N]
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
	cnt, err := New(uploadInts(t, d, counts), g)
	must(err)
	const alpha = 0.5
	opt := &GroupedMatmulOptions[TO]{Alpha: alpha, Beta: beta, C: c, Config: cfg, Counts: cnt, Stride: stride}
	var sa, sb []float64
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
	must(GroupedMatmul(ctx, nil, dt, a, b, Tensor[int32]{}, opt))
	got := download(t, db)
	want, scale := ref.MaskedGroupedMatmulRef(ah, bh, ch, counts, stride, rows, n, k, alpha, float64(beta), sa, sb)
	var outT TO
	for i := range want {
		w := want[i]
		if math.IsNaN(w) {
			if got[i] != sentinel {
				t.Fatalf("%T: D[%d,%d] (no group's: past a count, or after the slots) = %v, want the sentinel %v", outT, i/n, i%n, got[i], float64(sentinel))
			}
			continue
		}
		if tol := ref.GemmTolerance(jit.ElemType[TO](), k, scale[i], w); !(math.Abs(got[i]-w) <= tol) {
			t.Fatalf("%T: D[%d,%d] = %v, want %v (tolerance %.3g)", outT, i/n, i%n, got[i], w, tol)
		}
	}

	// Every slot on offsets: the counted rows bit for bit.
	offs := make([]int32, g+1)
	for e := range offs {
		offs[e] = int32(e * stride)
	}
	off, err := New(uploadInts(t, d, offs), g+1)
	must(err)
	eb := upload[TO](t, d, dh)
	et, err := New(eb, rows, n)
	must(err)
	all := *opt
	all.Counts, all.Stride = Tensor[int32]{}, 0
	must(GroupedMatmul(ctx, nil, et, a, b, off, &all))
	m, e := make([]TO, rows*n), make([]TO, rows*n)
	must(db.CopyToHost(m))
	must(eb.CopyToHost(e))
	for i := range m {
		if counted[i/n] && m[i] != e[i] {
			t.Fatalf("%T: D[%d,%d] = %v masked, %v on every slot: not the same bits", outT, i/n, i%n, value(m[i]), value(e[i]))
		}
	}
}

// TestGroupedMatmulMasked checks GroupedMatmul's masked layout against the float64
// reference and, bit for bit, against the offsets form over every slot: counts 0, 1, the
// stride, stride-1, not multiples of the tile, negative and past the stride (clamped), 1 to
// 33 groups, the pick and forced configurations (register and TMA stores, BandM 0 and 8),
// bf16 -> bf16, f16 -> f32 with beta, e4m3 -> bf16 with scales and e4m3 -> f32.
func TestGroupedMatmulMasked(t *testing.T) {
	d := emuDevice(t)
	pick := kernels.GemmSM90GroupedConfig{}
	small := func(store bool, band int) kernels.GemmSM90GroupedConfig {
		return kernels.GemmSM90GroupedConfig{GemmSM90Config: kernels.GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 64, Consumers: 1, Stages: 2, TMAStore: store}, BandM: band}
	}
	odd := []int32{0, 1, 70, 69, 37, -3, 75}
	maskedCase[fp.BF16, fp.BF16](t, d, pick, odd, 70, 3, 64, 64, 0, false, 1)
	maskedCase[fp.BF16, fp.BF16](t, d, small(false, 0), odd, 70, 0, 72, 40, -0.5, false, 2)
	maskedCase[fp.BF16, fp.BF16](t, d, small(true, 8), odd, 70, 5, 136, 40, 0, false, 3)
	maskedCase[fp.BF16, fp.BF16](t, d, small(true, 0), []int32{130}, 130, 0, 64, 16, 0, false, 4)
	maskedCase[fp.BF16, fp.BF16](t, d, small(false, 8), []int32{1}, 64, 1, 8, 8, 0, false, 5)
	c33 := make([]int32, 33)
	rng := rand.New(rand.NewSource(9))
	for i := range c33 {
		c33[i] = int32(rng.Intn(13) - 2) // -2..10 at stride 9: clamped both ways
	}
	maskedCase[fp.BF16, fp.BF16](t, d, small(true, 8), c33, 9, 2, 8, 16, 0, false, 6)
	maskedCase[fp.BF16, fp.BF16](t, d, pick, c33, 9, 0, 24, 24, 0, false, 7)
	maskedCase[fp.F16, float32](t, d, pick, []int32{9, 1, 0, 17, 3, 0, 2, 11}, 17, 1, 16, 24, 0.25, false, 8)
	maskedCase[fp.E4M3, fp.BF16](t, d, pick, []int32{9, 0, 66, 3, 65}, 66, 2, 40, 48, 0, true, 9)
	f8 := kernels.DefaultGemmSM90GroupedConfig(dsl.E4M3)
	f8.TMAStore, f8.BandM, f8.BN, f8.Stages = true, 8, 64, 4
	maskedCase[fp.E4M3, fp.BF16](t, d, f8, []int32{64, 0, 130, 65}, 130, 0, 40, 48, 0.25, true, 10)
	maskedCase[fp.E4M3, float32](t, d, pick, []int32{17, 5}, 20, 0, 16, 32, 0.5, false, 11)
}

// TestGroupedMatmulMaskedRefuses: each bad masked operand is an error naming it and the rule.
func TestGroupedMatmulMaskedRefuses(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	mk := func(shape ...int) Tensor[fp.BF16] { return zerosBF16(t, d, shape...) }
	ints := func(shape ...int) Tensor[int32] {
		n := 1
		for _, s := range shape {
			n *= s
		}
		x, err := New(uploadInts(t, d, make([]int32, n)), shape...)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	a, b, out := mk(16, 32), mk(2, 32, 16), mk(16, 16)
	opt := func(counts Tensor[int32], stride int) *GroupedMatmulOptions[fp.BF16] {
		return &GroupedMatmulOptions[fp.BF16]{Alpha: 1, Counts: counts, Stride: stride}
	}
	forced := opt(ints(2), 8)
	forced.Config = kernels.DefaultGemmSM90GroupedConfig(dsl.F16)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"counts length", GroupedMatmul(ctx, nil, out, a, b, Tensor[int32]{}, opt(ints(3), 8)), "Counts has shape [3]; want [2] (one row count per group of B)"},
		{"counts rank", GroupedMatmul(ctx, nil, out, a, b, Tensor[int32]{}, opt(ints(2, 1), 8)), "Counts has shape [2 1]; want [2]"},
		{"stride 0", GroupedMatmul(ctx, nil, out, a, b, Tensor[int32]{}, opt(ints(2), 0)), "Stride 0: want a positive row stride"},
		{"stride past rows", GroupedMatmul(ctx, nil, out, a, b, Tensor[int32]{}, opt(ints(2), 9)), "Stride 9 x 2 groups = 18 rows: the groups' slots must lie inside A's and D's 16 rows"},
		{"offsets too", GroupedMatmul(ctx, nil, out, a, b, ints(3), opt(ints(2), 8)), "offsets and GroupedMatmulOptions.Counts are both set"},
		{"stride alone", GroupedMatmul(ctx, nil, out, a, b, ints(3), opt(Tensor[int32]{}, 8)), "GroupedMatmulOptions.Stride 8 without Counts"},
		{"forced config", GroupedMatmul(ctx, nil, out, a, b, Tensor[int32]{}, forced), "GroupedMatmulOptions.Config is f16 -> f16"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, tc.err, tc.want)
		} else if testing.Verbose() {
			t.Log(tc.err)
		}
	}
}
