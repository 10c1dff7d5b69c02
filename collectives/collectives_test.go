package collectives

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
)

// setup is one emulated machine and a Comm over it.
type setup struct {
	t   *testing.T
	c   *Comm
	log *bytes.Buffer
	rng *rand.Rand
}

// small thresholds so that small test sizes reach every algorithm.
var testOpts = Options{OneShotMaxBytes: 1 << 10, LamportMaxBytes: 256, MaxBlocks: 3}

func newSetup(t *testing.T, gpus int, mc, weak bool, seed int64, o Options) *setup {
	t.Helper()
	sys, err := emu.New(gpus)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := New(context.Background(), &Emu{Sys: sys, NoMulticast: !mc, Options: emu.Options{Weak: weak, Seed: seed}}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return &setup{t: t, c: c, log: &logs, rng: rand.New(rand.NewSource(seed + 7))}
}

// fill writes random values to every GPU's copy and returns them: multiples of 1/8 in
// [-8, 8] (exact sums in f32 over 8 GPUs), integers for s32.
func (s *setup) fill(b *Buffer) [][]float64 {
	s.t.Helper()
	out := make([][]float64, s.c.NumGPUs())
	for g := range out {
		v := make([]float32, b.Len())
		out[g] = make([]float64, b.Len())
		for i := range v {
			x := float32(s.rng.Intn(129)-64) / 8
			if b.DType() == dsl.I32 {
				x = float32(s.rng.Intn(1<<20) - 1<<19)
			}
			v[i], out[g][i] = x, float64(x)
		}
		if err := b.WriteF32(g, v); err != nil {
			s.t.Fatal(err)
		}
	}
	return out
}

func round(dt dsl.Type, x float64) float64 {
	switch dt {
	case dsl.F16:
		return float64(fp.F16ToF32(fp.F32ToF16(float32(x))))
	case dsl.BF16:
		return float64(fp.BF16ToF32(fp.F32ToBF16(float32(x))))
	}
	return float64(float32(x))
}

func reduce(op Op, dt dsl.Type, in [][]float64, i int) float64 {
	return round(dt, fold(op, in, i, func(a, b float64) float64 { return a + b }))
}

// fold reduces element i of every GPU's input in GPU order with op, summing with add.
func fold(op Op, in [][]float64, i int, add func(a, b float64) float64) float64 {
	acc := in[0][i]
	for g := 1; g < len(in); g++ {
		switch op {
		case Min:
			acc = math.Min(acc, in[g][i])
		case Max:
			acc = math.Max(acc, in[g][i])
		default:
			acc = add(acc, in[g][i])
		}
	}
	return acc
}

// expect checks every GPU's copy of b against want(i).
func (s *setup) expect(what string, b *Buffer, want func(g, i int) float64) {
	s.t.Helper()
	for g := 0; g < s.c.NumGPUs(); g++ {
		got, err := b.ReadF32(g)
		if err != nil {
			s.t.Fatal(err)
		}
		for i, x := range got {
			if w := want(g, i); float64(x) != w {
				s.t.Fatalf("%s (%s): GPU %d element %d = %v, want %v", what, s.c.LastAlgorithm(), g, i, x, w)
			}
		}
	}
}

// TestAllReduce runs AllReduce over 1..8 emulated GPUs, with and without multicast, in
// the strict and the weak memory model, in place and out of place, at sizes that reach
// every algorithm (Lamport, one-shot, two-shot; multimem one-shot and two-shot), three
// calls in a row on one Comm for each.
func TestAllReduce(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		gpus int
		mc   bool
		weak bool
		seed int64
	}{{1, true, false, 0}, {2, false, false, 0}, {3, true, true, 1}, {4, false, true, 2}, {5, true, false, 3}, {8, false, true, 4}, {8, true, true, 5}}
	for _, tc := range cases {
		for _, dt := range DTypes() {
			t.Run(fmt.Sprintf("g%d/mc=%v/weak=%v/%s", tc.gpus, tc.mc, tc.weak, dt), func(t *testing.T) {
				t.Parallel()
				s := newSetup(t, tc.gpus, tc.mc, tc.weak, tc.seed, testOpts)
				seen := map[string]bool{}
				for _, n := range []int{7, 61, 300, 1001} {
					a, err := s.c.Alloc(dt, n)
					if err != nil {
						t.Fatal(err)
					}
					b, err := s.c.Alloc(dt, n)
					if err != nil {
						t.Fatal(err)
					}
					for call, op := range []Op{Sum, Max, Min} {
						in := s.fill(a)
						dst := b
						if call%2 == 1 {
							dst = a // in place
						}
						if err := s.c.AllReduceTo(ctx, dst, a, op); err != nil {
							t.Fatal(err)
						}
						seen[s.c.LastAlgorithm()] = true
						s.expect(fmt.Sprintf("n=%d call %d", n, call), dst, func(_, i int) float64 { return reduce(op, dt, in, i) })
					}
				}
				t.Log(len(seen), "algorithms:", seen)
			})
		}
	}
}

// TestAlgorithmChoice checks which kernel each size, dtype and machine gets.
func TestAlgorithmChoice(t *testing.T) {
	mc := newSetup(t, 4, true, false, 0, Options{})
	p2p := newSetup(t, 4, false, false, 0, Options{})
	for _, c := range []struct {
		s    *setup
		dt   dsl.Type
		op   Op
		n    int
		want string
	}{
		{mc, dsl.F32, Sum, 1024, "mm_allreduce_1shot_sum"},
		{mc, dsl.BF16, Sum, 16 << 20, "mm_allreduce_2shot_sum"},
		{mc, dsl.F32, Max, 1024, "mm_allreduce_push_max"}, // no multimem ld_reduce max.f32
		{mc, dsl.F32, Min, 1 << 20, "p2p_allreduce_2shot_min"},
		{mc, dsl.F16, Max, 1024, "mm_allreduce_1shot_max"},
		{p2p, dsl.F32, Sum, 1024, "p2p_allreduce_lamport_sum"},
		{p2p, dsl.I32, Sum, 1024, "p2p_allreduce_1shot_sum"},
		{p2p, dsl.F32, Sum, 3 << 10, "p2p_allreduce_1shot_sum"}, // 12 KiB: past Lamport
		{p2p, dsl.F32, Sum, 32 << 10, "p2p_allreduce_2shot_sum"},
		{p2p, dsl.F32, Sum, 1 << 20, "p2p_allreduce_2shot_sum"},
	} {
		if got := c.s.c.AllReduceAlgorithm(c.dt, c.op, c.n); got != c.want {
			t.Errorf("%v %s n=%d: %s, want %s", c.op, c.dt, c.n, got, c.want)
		}
	}
}

// TestFallbackMessage: without multicast the Comm says why and that it uses peer-to-peer
// kernels; each collective logs its choice at debug level.
func TestFallbackMessage(t *testing.T) {
	s := newSetup(t, 2, false, false, 0, testOpts)
	if ok, why := s.c.Multicast(); ok || why == nil {
		t.Fatalf("Multicast() = %v, %v; want false and a reason", ok, why)
	}
	b, err := s.c.Alloc(dsl.F32, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.AllReduce(context.Background(), b, Sum); err != nil {
		t.Fatal(err)
	}
	logs := s.log.String()
	for _, want := range []string{"multicast unavailable", "falling back to peer-to-peer", "Emu.NoMulticast", "algorithm=p2p_allreduce_lamport_sum"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	s2 := newSetup(t, 2, true, false, 0, testOpts)
	if ok, _ := s2.c.Multicast(); !ok {
		t.Fatal("multicast not used on a machine that has it")
	}
	if strings.Contains(s2.log.String(), "unavailable") {
		t.Errorf("fallback logged with multicast available:\n%s", s2.log.String())
	}
}

// TestMixedSequence runs every collective, several times, interleaved on one Comm (the
// barriers' epochs are shared), with and without multicast, in weak mode.
func TestMixedSequence(t *testing.T) {
	ctx := context.Background()
	for _, mc := range []bool{false, true} {
		for _, g := range []int{3, 4} {
			t.Run(fmt.Sprintf("mc=%v/g%d", mc, g), func(t *testing.T) {
				t.Parallel()
				s := newSetup(t, g, mc, true, int64(g), testOpts)
				for round := 0; round < 3; round++ {
					for _, dt := range []dsl.Type{dsl.F32, dsl.F16, dsl.I32} {
						m := 37 + round*100 + 1 // odd part sizes
						part, err := s.c.Alloc(dt, m)
						if err != nil {
							t.Fatal(err)
						}
						whole, err := s.c.Alloc(dt, m*g)
						if err != nil {
							t.Fatal(err)
						}
						in := s.fill(whole)
						if err := s.c.ReduceScatter(ctx, part, whole, Sum); err != nil {
							t.Fatal(err)
						}
						s.expect("reduce-scatter", part, func(gpu, i int) float64 { return reduce(Sum, dt, in, gpu*m+i) })

						parts := s.fill(part)
						if err := s.c.AllGather(ctx, whole, part); err != nil {
							t.Fatal(err)
						}
						s.expect("all-gather", whole, func(_, i int) float64 { return parts[i/m][i%m] })

						if err := s.c.Barrier(ctx); err != nil {
							t.Fatal(err)
						}
						root := round % g
						src := s.fill(part)
						if err := s.c.Broadcast(ctx, whole, whole, root); err != nil {
							t.Fatal(err)
						}
						if err := s.c.Broadcast(ctx, part, part, root); err != nil {
							t.Fatal(err)
						}
						s.expect("broadcast", part, func(_, i int) float64 { return src[root][i] })

						in = s.fill(whole)
						if err := s.c.AllReduce(ctx, whole, Max); err != nil {
							t.Fatal(err)
						}
						s.expect("all-reduce", whole, func(_, i int) float64 { return reduce(Max, dt, in, i) })
					}
				}
			})
		}
	}
}

// TestErrors: misuse is an error, never a panic.
func TestErrors(t *testing.T) {
	ctx := context.Background()
	s := newSetup(t, 2, true, false, 0, testOpts)
	a, _ := s.c.Alloc(dsl.F32, 8)
	b, _ := s.c.Alloc(dsl.F16, 8)
	other := newSetup(t, 2, true, false, 0, testOpts)
	o, _ := other.c.Alloc(dsl.F32, 8)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for name, err := range map[string]error{
		"dtype mismatch":   s.c.AllReduceTo(ctx, a, b, Sum),
		"other comm":       s.c.AllReduce(ctx, o, Sum),
		"nil buffer":       s.c.AllReduce(ctx, nil, Sum),
		"bad op":           s.c.AllReduce(ctx, a, dsl.BitXor),
		"bad root":         s.c.Broadcast(ctx, a, a, 5),
		"gather sizes":     s.c.AllGather(ctx, a, a),
		"scatter sizes":    s.c.ReduceScatter(ctx, a, a, Sum),
		"cancelled":        s.c.AllReduce(cancelled, a, Sum),
		"unsupported type": func() error { _, err := s.c.Alloc(dsl.U8, 4); return err }(),
		"empty":            func() error { _, err := s.c.Alloc(dsl.F32, 0); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := New(ctx, nil, Options{}); err == nil {
		t.Error("nil backend accepted")
	}
	sys, _ := emu.New(2)
	if _, err := New(ctx, &Emu{Sys: sys}, Options{MaxBlocks: 1000}); err == nil {
		t.Error("MaxBlocks over the limit accepted")
	}
	if err := s.c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.c.AllReduce(ctx, a, Sum); err == nil {
		t.Error("closed Comm accepted a call")
	}
}

// TestSM80 runs without multimem (an sm_80 target) and says so.
func TestSM80(t *testing.T) {
	s := newSetup(t, 3, true, false, 0, Options{Target: "sm_80", MaxBlocks: 2})
	if ok, why := s.c.Multicast(); ok || !strings.Contains(why.Error(), "sm_80") {
		t.Fatalf("Multicast() = %v, %v", ok, why)
	}
	b, _ := s.c.Alloc(dsl.BF16, 77)
	in := s.fill(b)
	if err := s.c.AllReduce(context.Background(), b, Sum); err != nil {
		t.Fatal(err)
	}
	s.expect("sm_80 all-reduce", b, func(_, i int) float64 { return reduce(Sum, dsl.BF16, in, i) })
}

// TestPushAllReduce runs the push all-reduce (reduce-scatter then all-gather by peer stores)
// in place and out of place, strict and weak, several times in a row.
func TestPushAllReduce(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		gpus int
		weak bool
		seed int64
	}{{2, false, 0}, {4, true, 3}, {8, true, 6}} {
		for _, dt := range DTypes() {
			t.Run(fmt.Sprintf("g%d/weak=%v/%s", tc.gpus, tc.weak, dt), func(t *testing.T) {
				t.Parallel()
				o := testOpts
				o.PushMinBytes, o.OneShotMaxBytes, o.DisableLamport = 1, 1, true
				s := newSetup(t, tc.gpus, false, tc.weak, tc.seed, o)
				n := tc.gpus * (16 / dt.Bytes()) * 5
				a, _ := s.c.Alloc(dt, n)
				b, _ := s.c.Alloc(dt, n)
				for call, op := range []Op{Sum, Max, Min, Sum} {
					in := s.fill(a)
					dst := b
					if call%2 == 1 {
						dst = a
					}
					if err := s.c.AllReduceTo(ctx, dst, a, op); err != nil {
						t.Fatal(err)
					}
					if got := s.c.LastAlgorithm(); !strings.HasSuffix(got, "+p2p_allgather") {
						t.Fatalf("ran %s, want the push all-reduce", got)
					}
					s.expect(fmt.Sprintf("call %d", call), dst, func(_, i int) float64 { return reduce(op, dt, in, i) })
				}
				// A size that does not split into whole vectors per GPU takes the two-shot kernel.
				c, _ := s.c.Alloc(dt, n+1)
				in := s.fill(c)
				if err := s.c.AllReduce(ctx, c, Sum); err != nil {
					t.Fatal(err)
				}
				if got := s.c.LastAlgorithm(); !strings.HasPrefix(got, "p2p_allreduce_2shot") {
					t.Fatalf("odd size ran %s", got)
				}
				s.expect("odd size", c, func(_, i int) float64 { return reduce(Sum, dt, in, i) })
			})
		}
	}
}

// TestFP8 runs AllReduce (one-shot and two-shot, in place and out of place) and
// ReduceScatter of e4m3 and e5m2 with multicast on sm_100a against a Go reference that sums
// in f16 in GPU order and rounds to the fp8 type, and checks the errors without multicast or
// on sm_90.
func TestFP8(t *testing.T) {
	ctx := context.Background()
	o := testOpts
	o.Target = "sm_100a"
	for _, dt := range FP8DTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, 4, true, true, 3, o)
			fill := func(b *Buffer) [][]float64 {
				out := make([][]float64, s.c.NumGPUs())
				for g := range out {
					v := make([]float32, b.Len())
					out[g] = make([]float64, b.Len())
					for i := range v {
						x := fp8Value(s.rng, dt, s.c.NumGPUs())
						v[i], out[g][i] = float32(x), x
					}
					if err := b.WriteF32(g, v); err != nil {
						t.Fatal(err)
					}
				}
				return out
			}
			for _, n := range []int{300, 2001} {
				a, _ := s.c.Alloc(dt, n)
				b, _ := s.c.Alloc(dt, n)
				for call, op := range []Op{Sum, Max, Sum} {
					in := fill(a)
					dst := b
					if call%2 == 1 {
						dst = a
					}
					if err := s.c.AllReduceTo(ctx, dst, a, op); err != nil {
						t.Fatal(err)
					}
					want := "mm_allreduce_1shot_fp8_"
					if n > o.OneShotMaxBytes {
						want = "mm_allreduce_2shot_fp8_"
					}
					if alg := s.c.LastAlgorithm(); !strings.HasPrefix(alg, want) {
						t.Fatalf("n=%d: algorithm %s, want %s*", n, alg, want)
					}
					s.expect(fmt.Sprintf("n=%d call %d", n, call), dst, func(_, i int) float64 { return fp8Reduce(op, dt, in, i) })
				}
			}
			part, _ := s.c.Alloc(dt, 37)
			whole, _ := s.c.Alloc(dt, 37*s.c.NumGPUs())
			in := fill(whole)
			if err := s.c.ReduceScatter(ctx, part, whole, Sum); err != nil {
				t.Fatal(err)
			}
			s.expect("reduce-scatter", part, func(g, i int) float64 { return fp8Reduce(Sum, dt, in, 37*g+i) })
		})
	}
	for name, o := range map[string]Options{"sm_90": {Target: "sm_90"}, "no multicast": {Target: "sm_100a"}} {
		s := newSetup(t, 2, name == "sm_90", false, 0, o)
		b, err := s.c.Alloc(dsl.E4M3, 16)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"sm_90": "sm_100a", "no multicast": "multicast"}[name]
		if err := s.c.AllReduce(ctx, b, Sum); err == nil || !strings.Contains(err.Error(), "e4m3") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: AllReduce of e4m3: %v", name, err)
		}
	}
}

// fp8Value returns a random finite value of dt up to its largest finite value / gpus.
func fp8Value(rng *rand.Rand, dt dsl.Type, gpus int) float64 {
	dec, top := fp.E4M3ToF64, 448.0
	if dt == dsl.E5M2 {
		dec, top = fp.E5M2ToF64, 57344.0
	}
	for {
		x := dec(uint8(rng.Intn(256)))
		if !math.IsNaN(x) && !math.IsInf(x, 0) && math.Abs(x) <= top/float64(gpus) {
			return x
		}
	}
}

// fp8Reduce is multimem's fp8 reduction: sums in f16 (rounding at each step, GPU order)
// rounded to dt; min and max exact.
func fp8Reduce(op Op, dt dsl.Type, in [][]float64, i int) float64 {
	acc := fold(op, in, i, func(a, b float64) float64 { return float64(fp.F16ToF32(f16RNE(a + b))) })
	if dt == dsl.E5M2 {
		b, _ := fp.F64ToE5M2(acc)
		return fp.E5M2ToF64(b)
	}
	b, _ := fp.F64ToE4M3(acc)
	return fp.E4M3ToF64(b)
}

// f16RNE rounds x (a sum of two f16 values, exact in float64) to f16, ties to even.
func f16RNE(x float64) uint16 {
	e := max(math.Ilogb(x), -14)
	q := math.Ldexp(1, e-10)
	return fp.F32ToF16(float32(math.RoundToEven(x/q) * q))
}
