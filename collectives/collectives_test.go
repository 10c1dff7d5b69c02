package collectives

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// rankEnv is one rank of a test: its Comm, its log, and the generator every rank shares
// (seeded alike, so each rank knows every rank's inputs for the reference).
type rankEnv struct {
	r   *jit.Rank
	c   *Comm
	log *bytes.Buffer
	rng *rand.Rand
}

// small thresholds so that small test sizes reach every algorithm.
var testOpts = Options{OneShotMaxBytes: 1 << 10, LamportMaxBytes: 256, MaxBlocks: 3}

// runRanks runs f on every rank of an emulated machine of gpus GPUs, each rank with its
// own Comm (multicast off when mc is false; the weak memory model when weak).
func runRanks(t *testing.T, gpus int, mc, weak bool, seed int64, o Options, f func(e *rankEnv) error) {
	t.Helper()
	if err := runRanksErr(gpus, mc, weak, seed, o, f); err != nil {
		t.Fatal(err)
	}
}

func runRanksErr(gpus int, mc, weak bool, seed int64, o Options, f func(e *rankEnv) error) error {
	return runNodesErr(gpus, 1, mc, weak, seed, o, f)
}

// runNodesErr is runRanksErr on an emulator whose gpus ranks form nodes nodes
// (jit.RanksOptions.Nodes).
func runNodesErr(gpus, nodes int, mc, weak bool, seed int64, o Options, f func(e *rankEnv) error) error {
	ro := jit.RanksOptions{Backend: jit.Emulator, World: gpus, Nodes: nodes, NVSHMEM: true,
		Open: []jit.Option{jit.WithEmuOptions(emu.Options{Weak: weak, Seed: seed})}}
	return jit.RunRanks(ro, func(r *jit.Rank) error {
		var logs bytes.Buffer
		o := o
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		o.DisableMulticast = o.DisableMulticast || !mc
		c, err := New(context.Background(), r, o)
		if err != nil {
			return err
		}
		ferr := f(&rankEnv{r: r, c: c, log: &logs, rng: rand.New(rand.NewSource(seed + 7))})
		if err := c.Close(); ferr == nil {
			ferr = err
		}
		return ferr
	})
}

// fill writes this rank's random values to b and returns every rank's: multiples of 1/8 in
// [-8, 8] (exact sums in f32 over 8 GPUs), integers for s32.
func (e *rankEnv) fill(b *Buffer) ([][]float64, error) {
	out := make([][]float64, e.c.NumGPUs())
	var mine []float32
	for g := range out {
		v := make([]float32, b.Len())
		out[g] = make([]float64, b.Len())
		for i := range v {
			x := float32(e.rng.Intn(129)-64) / 8
			if b.DType() == dsl.I32 {
				x = float32(e.rng.Intn(1<<20) - 1<<19)
			}
			v[i], out[g][i] = x, float64(x)
		}
		if g == e.c.Rank() {
			mine = v
		}
	}
	return out, b.WriteF32(mine)
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

// expect checks this rank's copy of b against want(rank, i).
func (e *rankEnv) expect(what string, b *Buffer, want func(g, i int) float64) error {
	got, err := b.ReadF32()
	if err != nil {
		return err
	}
	for i, x := range got {
		if w := want(e.c.Rank(), i); float64(x) != w {
			return fmt.Errorf("%s (%s): GPU %d element %d = %v, want %v", what, e.c.LastAlgorithm(), e.c.Rank(), i, x, w)
		}
	}
	return nil
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
				runRanks(t, tc.gpus, tc.mc, tc.weak, tc.seed, testOpts, func(e *rankEnv) error {
					seen := map[string]bool{}
					for _, n := range []int{7, 61, 300, 1001} {
						a, err := e.c.Alloc(dt, n)
						if err != nil {
							return err
						}
						b, err := e.c.Alloc(dt, n)
						if err != nil {
							return err
						}
						for call, op := range []Op{Sum, Max, Min} {
							in, err := e.fill(a)
							if err != nil {
								return err
							}
							dst := b
							if call%2 == 1 {
								dst = a // in place
							}
							if err := e.c.AllReduceTo(ctx, dst, a, op); err != nil {
								return err
							}
							seen[e.c.LastAlgorithm()] = true
							if err := e.expect(fmt.Sprintf("n=%d call %d", n, call), dst, func(_, i int) float64 { return reduce(op, dt, in, i) }); err != nil {
								return err
							}
						}
					}
					if e.c.Rank() == 0 {
						t.Log(len(seen), "algorithms:", seen)
					}
					return nil
				})
			})
		}
	}
}

// TestAlgorithmChoice checks which kernel each size, dtype and machine gets.
func TestAlgorithmChoice(t *testing.T) {
	for _, mc := range []bool{true, false} {
		runRanks(t, 4, mc, false, 0, Options{}, func(e *rankEnv) error {
			for _, c := range []struct {
				mc   bool
				dt   dsl.Type
				op   Op
				n    int
				want string
			}{
				{true, dsl.F32, Sum, 1024, "mm_allreduce_1shot_sum"},
				{true, dsl.BF16, Sum, 16 << 20, "mm_allreduce_2shot_sum"},
				{true, dsl.F32, Max, 1024, "mm_allreduce_push_max"}, // no multimem ld_reduce max.f32
				{true, dsl.F32, Min, 1 << 20, "p2p_allreduce_2shot_min"},
				{true, dsl.F16, Max, 1024, "mm_allreduce_1shot_max"},
				// Without multicast: the measured table for 4 GPUs (tuning.go).
				{false, dsl.F32, Sum, 1024, "p2p_allreduce_lamport_sum"},
				{false, dsl.I32, Sum, 1024, "p2p_allreduce_2shot_sum"}, // no Lamport for integers; one-shot never won
				{false, dsl.F32, Sum, 3 << 10, "p2p_allreduce_lamport_sum"},
				{false, dsl.BF16, Max, 128 << 10, "p2p_allreduce_lamport_max"}, // 256 KiB: Lamport's last size
				{false, dsl.F32, Sum, 64<<10 + 4, "p2p_allreduce_2shot_sum"},
				{false, dsl.F32, Sum, 1 << 20, "p2p_allreduce_2shot_sum"},
			} {
				if c.mc != mc {
					continue
				}
				if got := e.c.AllReduceAlgorithm(c.dt, c.op, c.n); got != c.want {
					return fmt.Errorf("mc=%v %v %s n=%d: %s, want %s", mc, c.op, c.dt, c.n, got, c.want)
				}
			}
			return nil
		})
	}
}

// TestFallbackMessage: without multicast (NVSHMEM_DISABLE_NVLS=1) the Comm says why and that
// it uses peer-to-peer kernels; each collective logs its choice at debug level.
func TestFallbackMessage(t *testing.T) {
	t.Setenv("NVSHMEM_DISABLE_NVLS", "1")
	runRanks(t, 2, true, false, 0, testOpts, func(e *rankEnv) error {
		if ok, why := e.c.Multicast(); ok || why == nil {
			return fmt.Errorf("Multicast() = %v, %v; want false and a reason", ok, why)
		}
		b, err := e.c.Alloc(dsl.F32, 10)
		if err != nil {
			return err
		}
		if err := e.c.AllReduce(context.Background(), b, Sum); err != nil {
			return err
		}
		logs := e.log.String()
		for _, want := range []string{"multicast unavailable", "falling back to peer-to-peer", "NVSHMEM_DISABLE_NVLS=1", "algorithm=p2p_allreduce_lamport_sum"} {
			if !strings.Contains(logs, want) {
				return fmt.Errorf("log lacks %q:\n%s", want, logs)
			}
		}
		return nil
	})
	t.Setenv("NVSHMEM_DISABLE_NVLS", "0")
	runRanks(t, 2, true, false, 0, testOpts, func(e *rankEnv) error {
		if ok, _ := e.c.Multicast(); !ok {
			return fmt.Errorf("multicast not used on a machine that has it")
		}
		if strings.Contains(e.log.String(), "unavailable") {
			return fmt.Errorf("fallback logged with multicast available:\n%s", e.log.String())
		}
		return nil
	})
}

// TestMixedSequence runs every collective, several times, interleaved on one Comm (the
// barriers' epochs are shared), with and without multicast, in weak mode.
func TestMixedSequence(t *testing.T) {
	ctx := context.Background()
	for _, mc := range []bool{false, true} {
		for _, g := range []int{3, 4} {
			t.Run(fmt.Sprintf("mc=%v/g%d", mc, g), func(t *testing.T) {
				t.Parallel()
				runRanks(t, g, mc, true, int64(g), testOpts, func(e *rankEnv) error {
					for round := 0; round < 3; round++ {
						for _, dt := range []dsl.Type{dsl.F32, dsl.F16, dsl.I32} {
							if err := mixedRound(ctx, e, g, round, dt); err != nil {
								return err
							}
						}
					}
					return nil
				})
			})
		}
	}
}

func mixedRound(ctx context.Context, e *rankEnv, g, round int, dt dsl.Type) error {
	m := 37 + round*100 + 1 // odd part sizes
	part, err := e.c.Alloc(dt, m)
	if err != nil {
		return err
	}
	whole, err := e.c.Alloc(dt, m*g)
	if err != nil {
		return err
	}
	in, err := e.fill(whole)
	if err != nil {
		return err
	}
	if err := e.c.ReduceScatter(ctx, part, whole, Sum); err != nil {
		return err
	}
	if err := e.expect("reduce-scatter", part, func(gpu, i int) float64 { return reduce(Sum, dt, in, gpu*m+i) }); err != nil {
		return err
	}
	parts, err := e.fill(part)
	if err != nil {
		return err
	}
	if err := e.c.AllGather(ctx, whole, part); err != nil {
		return err
	}
	if err := e.expect("all-gather", whole, func(_, i int) float64 { return parts[i/m][i%m] }); err != nil {
		return err
	}
	if err := e.c.Barrier(ctx); err != nil {
		return err
	}
	root := round % g
	src, err := e.fill(part)
	if err != nil {
		return err
	}
	if err := e.c.Broadcast(ctx, whole, whole, root); err != nil {
		return err
	}
	if err := e.c.Broadcast(ctx, part, part, root); err != nil {
		return err
	}
	if err := e.expect("broadcast", part, func(_, i int) float64 { return src[root][i] }); err != nil {
		return err
	}
	if in, err = e.fill(whole); err != nil {
		return err
	}
	if err := e.c.AllReduce(ctx, whole, Max); err != nil {
		return err
	}
	return e.expect("all-reduce", whole, func(_, i int) float64 { return reduce(Max, dt, in, i) })
}

// TestErrors: misuse is an error, never a panic.
func TestErrors(t *testing.T) {
	ctx := context.Background()
	runRanks(t, 2, true, false, 0, testOpts, func(e *rankEnv) error {
		a, err := e.c.Alloc(dsl.F32, 8)
		if err != nil {
			return err
		}
		b, err := e.c.Alloc(dsl.F16, 8)
		if err != nil {
			return err
		}
		other, err := New(ctx, e.r, testOpts)
		if err != nil {
			return err
		}
		defer other.Close()
		o, err := other.Alloc(dsl.F32, 8)
		if err != nil {
			return err
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		var nilCtx context.Context
		for name, err := range map[string]error{
			"dtype mismatch":   e.c.AllReduceTo(ctx, a, b, Sum),
			"other comm":       e.c.AllReduce(ctx, o, Sum),
			"nil buffer":       e.c.AllReduce(ctx, nil, Sum),
			"bad op":           e.c.AllReduce(ctx, a, dsl.BitXor),
			"bad root":         e.c.Broadcast(ctx, a, a, 5),
			"gather sizes":     e.c.AllGather(ctx, a, a),
			"scatter sizes":    e.c.ReduceScatter(ctx, a, a, Sum),
			"cancelled":        e.c.AllReduce(cancelled, a, Sum),
			"nil context":      e.c.AllReduce(nilCtx, a, Sum),
			"unsupported type": func() error { _, err := e.c.Alloc(dsl.U8, 4); return err }(),
			"empty":            func() error { _, err := e.c.Alloc(dsl.F32, 0); return err }(),
		} {
			if err == nil {
				return fmt.Errorf("%s: no error", name)
			}
		}
		// A nil buffer (in place: in and out) is one error, said once.
		if err := e.c.AllReduce(ctx, nil, Sum); err == nil || strings.Count(err.Error(), "nil buffer") != 1 {
			return fmt.Errorf("AllReduce(nil): %v, want \"nil buffer\" once", err)
		}
		if _, err := New(ctx, nil, Options{}); err == nil {
			return fmt.Errorf("nil rank accepted")
		}
		if _, err := New(nilCtx, e.r, Options{}); err == nil {
			return fmt.Errorf("nil context accepted")
		}
		if _, err := New(ctx, e.r, Options{MaxBlocks: 1000}); err == nil {
			return fmt.Errorf("MaxBlocks over the limit accepted")
		}
		if _, err := New(ctx, e.r, Options{OverlapRounds: -1}); err == nil || !strings.Contains(err.Error(), "OverlapRounds -1") {
			return fmt.Errorf("OverlapRounds -1: %v", err)
		}
		if _, err := New(ctx, e.r, Options{OverlapSignals: true, DisableOverlapSignals: true}); err == nil || !strings.Contains(err.Error(), "both set") {
			return fmt.Errorf("OverlapSignals and DisableOverlapSignals: %v", err)
		}
		if _, err := New(ctx, &jit.Rank{Device: e.r.Device, World: 2}, Options{}); err == nil || !strings.Contains(err.Error(), "NVSHMEM") {
			return fmt.Errorf("a rank without NVSHMEM: %v", err)
		}
		if err := e.c.Close(); err != nil {
			return err
		}
		if err := e.c.AllReduce(ctx, a, Sum); err == nil {
			return fmt.Errorf("closed Comm accepted a call")
		}
		if _, err := e.c.Alloc(dsl.F32, 4); err == nil {
			return fmt.Errorf("closed Comm allocated")
		}
		return nil
	})
}

// TestSM80 runs without multimem (an sm_80 target) and says so.
func TestSM80(t *testing.T) {
	runRanks(t, 3, true, false, 0, Options{Target: "sm_80", MaxBlocks: 2}, func(e *rankEnv) error {
		if ok, why := e.c.Multicast(); ok || !strings.Contains(why.Error(), "sm_80") {
			return fmt.Errorf("Multicast() = %v, %v", ok, why)
		}
		b, err := e.c.Alloc(dsl.BF16, 77)
		if err != nil {
			return err
		}
		in, err := e.fill(b)
		if err != nil {
			return err
		}
		if err := e.c.AllReduce(context.Background(), b, Sum); err != nil {
			return err
		}
		return e.expect("sm_80 all-reduce", b, func(_, i int) float64 { return reduce(Sum, dsl.BF16, in, i) })
	})
}

// TestPushAllReduce runs the push all-reduce (p2p_allreduce_push: peer stores into the
// scratch, local sums stored into every GPU's output; p2p_allreduce_push4, the same built
// for at most 4 GPUs, on 2 to 4 GPUs, and the general kernel there too with
// Options.DisablePush4) in place and out of place, strict and weak, several times in a row
// at sizes that split into whole vectors per GPU and sizes that do not, with a push
// reduce-scatter (which reads its scratch after its last barrier) between calls.
func TestPushAllReduce(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		gpus    int
		weak    bool
		seed    int64
		general bool // Options.DisablePush4
	}{{2, false, 0, false}, {3, true, 1, false}, {4, true, 3, false}, {4, true, 3, true}, {8, true, 6, false}} {
		for _, dt := range DTypes() {
			t.Run(fmt.Sprintf("g%d/weak=%v/general=%v/%s", tc.gpus, tc.weak, tc.general, dt), func(t *testing.T) {
				t.Parallel()
				o := testOpts
				o.PushMinBytes, o.OneShotMaxBytes, o.DisableLamport, o.ReduceScatterPullMinBytes = 1, 1, true, -1
				o.DisablePush4, o.Push4MinBytes = tc.general, -1
				fam := kernels.FamilyP2PAllReducePush
				if tc.gpus <= kernels.Push4MaxGPUs && !tc.general {
					fam = kernels.FamilyP2PAllReducePush4
				}
				runRanks(t, tc.gpus, false, tc.weak, tc.seed, o, func(e *rankEnv) error {
					vec := 16 / dt.Bytes()
					for _, n := range []int{tc.gpus * vec * 5, tc.gpus*vec*5 + 1, 3*vec + 5, 1, tc.gpus*vec*(2*kernels.CollThreads+3) + 7} {
						a, err := e.c.Alloc(dt, n)
						if err != nil {
							return err
						}
						b, err := e.c.Alloc(dt, n)
						if err != nil {
							return err
						}
						parts, err := e.c.Alloc(dt, tc.gpus*n)
						if err != nil {
							return err
						}
						part, err := e.c.Alloc(dt, n)
						if err != nil {
							return err
						}
						for call, op := range []Op{Sum, Max, Min, Sum} {
							in, err := e.fill(a)
							if err != nil {
								return err
							}
							dst := b
							if call%2 == 1 {
								dst = a
							}
							if err := e.c.AllReduceTo(ctx, dst, a, op); err != nil {
								return err
							}
							if got, want := e.c.LastAlgorithm(), string(fam)+"_"+kernels.OpName(op); got != want {
								return fmt.Errorf("n %d: ran %s, want %s", n, got, want)
							}
							if err := e.expect(fmt.Sprintf("n %d call %d", n, call), dst, func(_, i int) float64 { return reduce(op, dt, in, i) }); err != nil {
								return err
							}
							if call == 1 {
								if _, err := e.fill(parts); err != nil {
									return err
								}
								if err := e.c.ReduceScatter(ctx, part, parts, Sum); err != nil {
									return err
								}
							}
						}
						if err := errors.Join(a.Free(), b.Free(), parts.Free(), part.Free()); err != nil {
							return err
						}
					}
					return nil
				})
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
			runRanks(t, 4, true, true, 3, o, func(e *rankEnv) error {
				fill := func(b *Buffer) ([][]float64, error) {
					out := make([][]float64, e.c.NumGPUs())
					var mine []float32
					for g := range out {
						v := make([]float32, b.Len())
						out[g] = make([]float64, b.Len())
						for i := range v {
							x := fp8Value(e.rng, dt, e.c.NumGPUs())
							v[i], out[g][i] = float32(x), x
						}
						if g == e.c.Rank() {
							mine = v
						}
					}
					return out, b.WriteF32(mine)
				}
				for _, n := range []int{300, 2001} {
					a, err := e.c.Alloc(dt, n)
					if err != nil {
						return err
					}
					b, err := e.c.Alloc(dt, n)
					if err != nil {
						return err
					}
					for call, op := range []Op{Sum, Max, Sum} {
						in, err := fill(a)
						if err != nil {
							return err
						}
						dst := b
						if call%2 == 1 {
							dst = a
						}
						if err := e.c.AllReduceTo(ctx, dst, a, op); err != nil {
							return err
						}
						want := "mm_allreduce_1shot_fp8_"
						if n > o.OneShotMaxBytes {
							want = "mm_allreduce_2shot_fp8_"
						}
						if alg := e.c.LastAlgorithm(); !strings.HasPrefix(alg, want) {
							return fmt.Errorf("n=%d: algorithm %s, want %s*", n, alg, want)
						}
						if err := e.expect(fmt.Sprintf("n=%d call %d", n, call), dst, func(_, i int) float64 { return fp8Reduce(op, dt, in, i) }); err != nil {
							return err
						}
					}
				}
				part, err := e.c.Alloc(dt, 37)
				if err != nil {
					return err
				}
				whole, err := e.c.Alloc(dt, 37*e.c.NumGPUs())
				if err != nil {
					return err
				}
				in, err := fill(whole)
				if err != nil {
					return err
				}
				if err := e.c.ReduceScatter(ctx, part, whole, Sum); err != nil {
					return err
				}
				return e.expect("reduce-scatter", part, func(g, i int) float64 { return fp8Reduce(Sum, dt, in, 37*g+i) })
			})
		})
	}
	for name, o := range map[string]Options{"sm_90": {Target: "sm_90"}, "no multicast": {Target: "sm_100a"}} {
		runRanks(t, 2, name == "sm_90", false, 0, o, func(e *rankEnv) error {
			b, err := e.c.Alloc(dsl.E4M3, 16)
			if err != nil {
				return err
			}
			want := map[string]string{"sm_90": "sm_100a", "no multicast": "multicast"}[name]
			if err := e.c.AllReduce(ctx, b, Sum); err == nil || !strings.Contains(err.Error(), "e4m3") || !strings.Contains(err.Error(), want) {
				return fmt.Errorf("%s: AllReduce of e4m3: %v", name, err)
			}
			return nil
		})
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

// TestBufferFree frees buffers collectively between calls: the freed buffer is refused by
// every call and method, a second Free fails, and the Comm's other buffers (and a buffer
// allocated after the free) keep working.
func TestBufferFree(t *testing.T) {
	ctx := context.Background()
	runRanks(t, 3, false, false, 1, testOpts, func(e *rankEnv) error {
		keep, err := e.c.Alloc(dsl.F32, 300)
		if err != nil {
			return err
		}
		gone, err := e.c.Alloc(dsl.F32, 300)
		if err != nil {
			return err
		}
		if err := e.c.AllReduce(ctx, gone, Sum); err != nil {
			return err
		}
		if err := gone.Free(); err != nil {
			return err
		}
		if err := e.c.AllReduce(ctx, gone, Sum); err == nil || !strings.Contains(err.Error(), "freed") {
			return fmt.Errorf("AllReduce of a freed buffer: %v", err)
		}
		if _, err := gone.ReadF32(); err == nil || !strings.Contains(err.Error(), "freed") {
			return fmt.Errorf("ReadF32 of a freed buffer: %v", err)
		}
		if err := gone.Free(); err == nil {
			return errors.New("a second Free succeeded")
		}
		if gone.DevPtr() != 0 {
			return errors.New("a freed buffer still has an address")
		}
		again, err := e.c.Alloc(dsl.F32, 300)
		if err != nil {
			return err
		}
		for _, b := range []*Buffer{keep, again} {
			in, err := e.fill(b)
			if err != nil {
				return err
			}
			if err := e.c.AllReduce(ctx, b, Sum); err != nil {
				return err
			}
			if err := e.expect("after a free", b, func(_, i int) float64 { return reduce(Sum, dsl.F32, in, i) }); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestBufferAfterClose: Close frees the Comm's buffers, so every use of one afterwards fails
// naming the closed Comm (HARDENING 2: they stayed usable over freed memory).
func TestBufferAfterClose(t *testing.T) {
	runRanks(t, 2, false, false, 1, testOpts, func(e *rankEnv) error {
		c, err := New(context.Background(), e.r, testOpts)
		if err != nil {
			return err
		}
		b, err := c.Alloc(dsl.BF16, 64)
		if err != nil {
			return err
		}
		if err := c.Close(); err != nil {
			return err
		}
		if err := b.Write(make([]byte, 8)); err == nil || !strings.Contains(err.Error(), "closed") {
			return fmt.Errorf("Write after Close: %v", err)
		}
		if _, err := b.ReadF32(); err == nil || !strings.Contains(err.Error(), "closed") {
			return fmt.Errorf("ReadF32 after Close: %v", err)
		}
		if _, err := b.TensorMap(64, 1, [2]int{64, 1}); err == nil || !strings.Contains(err.Error(), "closed") {
			return fmt.Errorf("TensorMap after Close: %v", err)
		}
		if b.DevPtr() != 0 {
			return errors.New("a buffer of a closed Comm still has an address")
		}
		if err := e.c.AllReduce(context.Background(), b, Sum); err == nil {
			return errors.New("another Comm took a closed Comm's buffer")
		}
		return nil
	})
}
