package dist_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ops"
	"github.com/kgen-dev/kgen/ops/dist"
)

// layerCase is one MoE layer test: its shape and its routing of token t's pair k on rank r
// in round i (rng: that round's).
type layerCase struct {
	name                                  string
	g, tokens, hidden, ffn, experts, topK int
	route                                 func(rng *rand.Rand, i, r, t, k int) int32
	// capacity is MoEConfig.Capacity (0: the worst case); dropped says that rank r's pairs
	// of round i fall past it (the reference leaves them out); checkErr is what Check then
	// reports (past the capacity, or bad ids).
	capacity int
	dropped  func(i, r int) bool
	checkErr string
	// gateUp and down force the grouped GEMMs' configurations (BN 0: the pick).
	gateUp, down kernels.GemmSM90GroupedConfig
	// lowLatency runs the low-latency MoE (the masked layout: the masked grouped GEMMs and
	// SwiGLU over the rows received); allSlots their previous form over every slot.
	lowLatency, allSlots bool
}

// randomRoute sends each pair to a random expert or none (-1), repeats allowed.
func randomRoute(experts int) func(*rand.Rand, int, int, int, int) int32 {
	return func(rng *rand.Rand, _, _, _, _ int) int32 { return int32(rng.Intn(experts+1) - 1) }
}

// layerRound is one round's inputs on every rank: x [T*H] (bf16 values), ids and weights
// [T*K].
type layerRound struct {
	x   [][]float32
	ids [][]int32
	w   [][]float32
}

// iv is an interval [lo, hi] that holds the device's value of a reference quantity.
type iv struct{ lo, hi float64 }

// bf16 rounds both ends to bf16 (rounding is monotonic: the device's value, one of the
// interval's rounded, lies between them).
func (a iv) bf16() iv {
	r := func(v float64) float64 { return float64(fp.BF16Of(float32(v)).Float32()) }
	return iv{r(a.lo), r(a.hi)}
}

// widen adds e on both sides.
func (a iv) widen(e float64) iv { return iv{a.lo - e, a.hi + e} }

// mag is the largest magnitude in a.
func (a iv) mag() float64 { return max(math.Abs(a.lo), math.Abs(a.hi)) }

// mul is the interval of x*y over x in a, y in b.
func (a iv) mul(b iv) iv {
	p := []float64{a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi}
	return iv{min(p[0], p[1], p[2], p[3]), max(p[0], p[1], p[2], p[3])}
}

// The error terms of the layer's f32 steps: an f32 sum of n products whose magnitudes add
// to s is within acc32(n, s) of the exact sum (kernels/ref.GemmTolerance's (n+4)*2^-23*s,
// which covers wgmma's order); SwiGLU's f32 evaluation is within swiEval of its value,
// relatively (ops' swigluTol: the exponent's argument rounded, ex2.approx, rcp.approx);
// silu's minimum is at siluMinX.
const (
	swiEval  = 0x1p-16
	siluMinX = -1.2784645427610738
)

func acc32(n int, s float64) float64 { return float64(n+4) * 0x1p-23 * s }

func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

// dotIv is the interval of the device's f32 sum of xs[l]*w(l) (xs intervals, w exact),
// rounded to bf16.
func dotIv(xs []iv, w func(l int) float64) iv {
	var sum iv
	var abs float64
	for l, x := range xs {
		p := x.mul(iv{w(l), w(l)})
		sum.lo += p.lo
		sum.hi += p.hi
		abs += p.mag()
	}
	return sum.widen(acc32(len(xs), abs) + 0x1p-50*abs).bf16()
}

// expertRef is the interval of each of expert e's outputs for the token row x: y =
// bf16(f32(h x W2[e])) with h = bf16(silu(a)*b) (f32), [a | b] = bf16(f32(x x W13[e])): the
// float64 reference carried as intervals through each step's f32 error and bf16 rounding.
func expertRef(lc layerCase, w13, w2 []float32, e int, x []float32) []iv {
	h, f := lc.hidden, lc.ffn
	xs := make([]iv, h)
	for l, v := range x {
		xs[l] = iv{float64(v), float64(v)}
	}
	a := make([]iv, 2*f)
	for j := range a {
		a[j] = dotIv(xs, func(l int) float64 { return float64(w13[(e*h+l)*2*f+j]) })
	}
	hs := make([]iv, f)
	for c := range hs {
		g := a[c]
		s := iv{min(silu(g.lo), silu(g.hi)), max(silu(g.lo), silu(g.hi))}
		if g.lo <= siluMinX && siluMinX <= g.hi {
			s.lo = silu(siluMinX)
		}
		p := s.mul(a[f+c])
		hs[c] = p.widen(swiEval * p.mag()).bf16()
	}
	y := make([]iv, h)
	for c := range y {
		y[c] = dotIv(hs, func(l int) float64 { return float64(w2[(e*f+l)*h+c]) })
	}
	return y
}

// layerRef is the interval of each of rank r's outputs [T*H] in round in: the experts
// (expertRef), then the combine as docs/moe.md fixes it: per GPU d the f32 sum over k of
// w*y of the token's pairs there, rounded to bf16, then the f32 sum over the GPUs, rounded.
// A token with no pair is 0 exactly.
func layerRef(lc layerCase, w13, w2 []float32, in layerRound, r int) []iv {
	t, h, k, el := lc.tokens, lc.hidden, lc.topK, lc.experts/lc.g
	out := make([]iv, t*h)
	for tok := 0; tok < t; tok++ {
		ys := make([][][]iv, lc.g) // per GPU, its pairs' rows
		ws := make([][]float64, lc.g)
		for kk := 0; kk < k; kk++ {
			e := int(in.ids[r][tok*k+kk])
			if e < 0 || e >= lc.experts {
				continue // none, or a bad id: not sent, not combined
			}
			d := e / el
			ys[d] = append(ys[d], expertRef(lc, w13, w2, e, in.x[r][tok*h:(tok+1)*h]))
			ws[d] = append(ws[d], float64(in.w[r][tok*k+kk]))
		}
		for c := 0; c < h; c++ {
			var parts []iv
			for d := range ys {
				if len(ys[d]) == 0 {
					continue
				}
				col := make([]iv, len(ys[d]))
				for i := range col {
					col[i] = ys[d][i][c]
				}
				parts = append(parts, dotIv(col, func(i int) float64 { return ws[d][i] }))
			}
			if len(parts) == 0 {
				continue // [0, 0]
			}
			out[tok*h+c] = dotIv(parts, func(int) float64 { return 1 })
		}
	}
	return out
}

// TestMoELayer runs the whole layer (dispatch, grouped GEMM gate|up, SwiGLU, grouped GEMM
// down, combine) on 1, 2 and 4 emulated GPUs, two rounds queued back to back with no host
// step between them (each its own inputs and out), and checks every output of every rank
// against a float64 reference of the layer within the bound the roundings derive
// (layerRef): random routing with -1 and repeated experts, top-1 to top-4, every token to
// one expert (the others empty), tokens with no expert (out 0 exactly); the normal mode and
// the low-latency one (masked layout: masked GEMMs and SwiGLU, forced configurations
// included, and AllSlots).
func TestMoELayer(t *testing.T) {
	cases := []layerCase{
		{name: "1gpu", g: 1, tokens: 6, hidden: 16, ffn: 16, experts: 4, topK: 2, route: randomRoute(4)},
		{name: "2gpu", g: 2, tokens: 8, hidden: 32, ffn: 24, experts: 4, topK: 2, route: randomRoute(4)},
		{name: "2gpu-configs", g: 2, tokens: 8, hidden: 32, ffn: 24, experts: 4, topK: 2, route: randomRoute(4),
			gateUp: kernels.GemmSM90GroupedConfig{GemmSM90Config: kernels.GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 64, Consumers: 1, Stages: 4, TMAStore: true}, BandM: 8},
			down:   kernels.GemmSM90GroupedConfig{GemmSM90Config: kernels.GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 128, Consumers: 2, Stages: 3}}},
		{name: "2gpu-sparse", g: 2, tokens: 7, hidden: 24, ffn: 32, experts: 8, topK: 4,
			route: func(rng *rand.Rand, i, r, t, k int) int32 {
				if t == 3 || k >= 2 { // token 3 goes nowhere; two pairs of each token are empty
					return -1
				}
				return int32((t + k + i + r) % 8)
			}},
		{name: "4gpu", g: 4, tokens: 16, hidden: 64, ffn: 48, experts: 8, topK: 4, route: randomRoute(8)},
		{name: "4gpu-skewed", g: 4, tokens: 12, hidden: 32, ffn: 16, experts: 8, topK: 1,
			route: func(_ *rand.Rand, i, _, _, _ int) int32 { return int32(5 - 5*i) }}, // all to expert 5, then 0
		// Ids outside [-1, Experts): Check reports them on every rank, and those pairs are
		// neither sent nor combined.
		{name: "2gpu-badids", g: 2, tokens: 6, hidden: 16, ffn: 8, experts: 4, topK: 2,
			route: func(rng *rand.Rand, i, r, t, k int) int32 {
				switch {
				case t == 1 && k == 0:
					return 4 // one past the last expert
				case t == 2 && k == 1:
					return -7
				}
				return int32(rng.Intn(4))
			},
			checkErr: "expert ids outside [-1, 4)"},
		// Every token to one expert, twice the rows its GPU's receive buffer holds: GPU 0's
		// rows come first (by source GPU), so GPU 1's pairs are dropped, Check says so on
		// every rank and GPU 1's tokens come back 0.
		{name: "2gpu-overflow", g: 2, tokens: 6, hidden: 16, ffn: 16, experts: 4, topK: 1, capacity: 6,
			route:    func(_ *rand.Rand, i, _, _, _ int) int32 { return int32(1 + 2*i) }, // expert 1 (GPU 0), then 3 (GPU 1)
			dropped:  func(_, r int) bool { return r == 1 },
			checkErr: "a GPU receives 12 rows, past MoEConfig.Capacity 6"},
	}
	ll := func(lc layerCase, name string) layerCase {
		lc.name, lc.lowLatency = name, true
		return lc
	}
	allSlots := ll(cases[1], "2gpu-ll-allslots")
	allSlots.allSlots = true
	cases = append(cases, ll(cases[0], "1gpu-ll"), ll(cases[1], "2gpu-ll"), ll(cases[2], "2gpu-ll-configs"), ll(cases[3], "2gpu-ll-sparse"),
		ll(cases[4], "4gpu-ll"), ll(cases[5], "4gpu-ll-skewed"), allSlots)
	for _, lc := range cases {
		t.Run(lc.name, func(t *testing.T) { testMoELayer(t, lc) })
	}
}

func testMoELayer(t *testing.T, lc layerCase) {
	ctx := context.Background()
	const rounds, sentinel = 2, 9
	rng := rand.New(rand.NewSource(int64(lc.g*100 + lc.tokens)))
	h, f, el := lc.hidden, lc.ffn, lc.experts/lc.g
	bf := func(v float64) float32 { return fp.BF16Of(float32(v)).Float32() }
	w13 := make([]float32, lc.experts*h*2*f)
	for i := range w13 {
		w13[i] = bf((2*rng.Float64() - 1) * 2 / math.Sqrt(float64(h)))
	}
	w2 := make([]float32, lc.experts*f*h)
	for i := range w2 {
		w2[i] = bf((2*rng.Float64() - 1) * 2 / math.Sqrt(float64(f)))
	}
	in := make([]layerRound, rounds)
	for i := range in {
		for r := 0; r < lc.g; r++ {
			x := make([]float32, lc.tokens*h)
			for j := range x {
				x[j] = float32(rng.Intn(33)-16) / 8
			}
			ids, w := make([]int32, lc.tokens*lc.topK), make([]float32, lc.tokens*lc.topK)
			for j := range ids {
				ids[j] = lc.route(rng, i, r, j/lc.topK, j%lc.topK)
				w[j] = rng.Float32()
			}
			in[i].x, in[i].ids, in[i].w = append(in[i].x, x), append(in[i].ids, ids), append(in[i].w, w)
		}
	}
	cfg := dist.MoELayerConfig{MoEConfig: collectives.MoEConfig{Tokens: lc.tokens, TopK: lc.topK, Hidden: h, Experts: lc.experts, Capacity: lc.capacity, LowLatency: lc.lowLatency}, FFN: f,
		GateUp: lc.gateUp, Down: lc.down, AllSlots: lc.allSlots}
	ro := jit.RanksOptions{Backend: jit.Emulator, World: lc.g, NVSHMEM: true}
	err := jit.RunRanks(ro, func(r *jit.Rank) error {
		c, err := collectives.New(ctx, r, collectives.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		defer c.Close()
		weights := func(h []float32, shape ...int) (ops.Tensor[fp.BF16], error) {
			b, err := jit.Alloc[fp.BF16](r.Device, len(h))
			if err != nil {
				return ops.Tensor[fp.BF16]{}, err
			}
			if err := b.CopyFromHost(fp.From[fp.BF16](h)); err != nil {
				return ops.Tensor[fp.BF16]{}, err
			}
			return ops.New(b, shape...)
		}
		lw13, err := weights(w13[r.Rank*el*h*2*f:(r.Rank+1)*el*h*2*f], el, h, 2*f)
		if err != nil {
			return err
		}
		lw2, err := weights(w2[r.Rank*el*f*h:(r.Rank+1)*el*f*h], el, f, h)
		if err != nil {
			return err
		}
		l, err := dist.NewMoELayer(ctx, c, cfg, lw13, lw2)
		if err != nil {
			return err
		}
		defer l.Free(ctx)
		outs := make([]ops.Tensor[fp.BF16], rounds)
		for i := range in {
			x, _, err := dist.Alloc[fp.BF16](ctx, c, lc.tokens, h)
			if err != nil {
				return err
			}
			ids, _, err := dist.Alloc[int32](ctx, c, lc.tokens, lc.topK)
			if err != nil {
				return err
			}
			w, _, err := dist.Alloc[float32](ctx, c, lc.tokens, lc.topK)
			if err != nil {
				return err
			}
			if outs[i], _, err = dist.Alloc[fp.BF16](ctx, c, lc.tokens, h); err != nil {
				return err
			}
			s := make([]float32, lc.tokens*h)
			for j := range s {
				s[j] = sentinel
			}
			for _, err := range []error{x.Buffer().CopyFromHost(fp.From[fp.BF16](in[i].x[r.Rank])), ids.Buffer().CopyFromHost(in[i].ids[r.Rank]),
				w.Buffer().CopyFromHost(in[i].w[r.Rank]), outs[i].Buffer().CopyFromHost(fp.From[fp.BF16](s))} {
				if err != nil {
					return err
				}
			}
			// The rounds run back to back: every round is queued before any is read.
			if err := l.Forward(ctx, outs[i], x, ids, w); err != nil {
				return fmt.Errorf("round %d: %w", i, err)
			}
		}
		if err := l.Check(ctx); lc.checkErr == "" && err != nil {
			return err
		} else if lc.checkErr != "" && (err == nil || !strings.Contains(err.Error(), lc.checkErr)) {
			return fmt.Errorf("Check: %v; want an error containing %q", err, lc.checkErr)
		}
		for i := range in {
			got := make([]fp.BF16, lc.tokens*h)
			if err := outs[i].Buffer().CopyToHost(got); err != nil {
				return err
			}
			ri := in[i]
			if lc.dropped != nil && lc.dropped(i, r.Rank) {
				ri.ids = append([][]int32(nil), ri.ids...)
				ri.ids[r.Rank] = make([]int32, len(ri.ids[r.Rank]))
				for j := range ri.ids[r.Rank] {
					ri.ids[r.Rank][j] = -1 // dropped: not combined
				}
			}
			want := layerRef(lc, w13, w2, ri, r.Rank)
			var ss, worst float64 // sum of squares of the intervals' middles; the widest interval
			exact := 0            // intervals of one value
			for j, g := range got {
				v, w := float64(g.Float32()), want[j]
				if !(w.lo <= v && v <= w.hi) {
					return fmt.Errorf("GPU %d round %d token %d col %d: %v, want [%v, %v]", r.Rank, i, j/h, j%h, v, w.lo, w.hi)
				}
				mid := (w.lo + w.hi) / 2
				ss += mid * mid
				worst = max(worst, w.hi-w.lo)
				if w.lo == w.hi {
					exact++
				}
			}
			// The intervals must be narrow beside the outputs for the check to mean anything.
			rms := math.Sqrt(ss / float64(len(got)))
			if rms == 0 && (lc.dropped == nil || !lc.dropped(i, r.Rank)) {
				return fmt.Errorf("GPU %d round %d: every output is 0: the test checks nothing", r.Rank, i)
			}
			if worst > 0.05*rms {
				return fmt.Errorf("GPU %d round %d: the widest interval %.3g is over 5%% of the outputs' rms %.3g: too loose to test anything", r.Rank, i, worst, rms)
			}
			if testing.Verbose() {
				fmt.Printf("%s GPU %d round %d: rms %.3g, widest interval %.3g, %d of %d outputs exact\n", lc.name, r.Rank, i, rms, worst, exact, len(got))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMoELayerErrors checks that misuse fails naming the operand and the rule: bad
// weights, FFN, AllSlots without LowLatency, steps out of order, operands that are no Comm
// buffers or of the wrong shape.
func TestMoELayerErrors(t *testing.T) {
	ctx := context.Background()
	const tokens, topK, hidden, experts, ffn = 4, 2, 16, 2, 8
	onOneRank(t, func(r *jit.Rank, c *collectives.Comm) error {
		local := func(shape ...int) ops.Tensor[fp.BF16] { return uninitBF16(r, shape...) }
		w13, w2 := local(experts, hidden, 2*ffn), local(experts, ffn, hidden)
		cfg := dist.MoELayerConfig{MoEConfig: collectives.MoEConfig{Tokens: tokens, TopK: topK, Hidden: hidden, Experts: experts}, FFN: ffn}
		bad := cfg
		bad.FFN = 12
		var errs []struct {
			name string
			err  error
			want string
		}
		add := func(name string, err error, want string) {
			errs = append(errs, struct {
				name string
				err  error
				want string
			}{name, err, want})
		}
		_, err := dist.NewMoELayer(ctx, c, bad, w13, w2)
		add("FFN", err, "FFN 12: want a positive multiple of 8")
		f16 := cfg
		f16.GateUp = kernels.DefaultGemmSM90GroupedConfig(dsl.F16)
		_, err = dist.NewMoELayer(ctx, c, f16, w13, w2)
		add("GateUp dtype", err, "MoELayerConfig.GateUp is f16 -> f16; want bf16 -> bf16")
		badTile := cfg
		badTile.Down = kernels.DefaultGemmSM90GroupedConfig(dsl.BF16)
		badTile.Down.Stages = 99
		_, err = dist.NewMoELayer(ctx, c, badTile, w13, w2)
		add("Down config", err, "MoELayerConfig.Down: ")
		_, err = dist.NewMoELayer(ctx, c, cfg, local(experts, hidden, ffn), w2)
		add("w13 shape", err, "w13 has shape [2 16 8]; want [2 16 16]")
		other, err := jit.OpenBackend(jit.Emulator, 0)
		if err != nil {
			return err
		}
		defer other.Close()
		ob, _ := jit.Alloc[fp.BF16](other, experts*ffn*hidden)
		elsewhere, _ := ops.New(ob, experts, ffn, hidden)
		_, err = dist.NewMoELayer(ctx, c, cfg, w13, elsewhere)
		add("w2 on another device", err, "w13 and w2 must live on this rank's device")
		hid := cfg
		hid.Hidden = 12
		_, err = dist.NewMoELayer(ctx, c, hid, w13, w2)
		add("Hidden", err, "MoELayerConfig.Hidden 12: want a positive multiple of 8")
		_, err = dist.NewMoELayer(ctx, c, cfg, w13, ops.Tensor[fp.BF16]{})
		add("w2 zero", err, "w2 is the zero Tensor")
		slots := cfg
		slots.AllSlots = true
		_, err = dist.NewMoELayer(ctx, c, slots, w13, w2)
		add("AllSlots", err, "MoELayerConfig.AllSlots without LowLatency")
		l, err := dist.NewMoELayer(ctx, c, cfg, w13, w2)
		if err != nil {
			return err
		}
		x, _, _ := dist.Alloc[fp.BF16](ctx, c, tokens, hidden)
		ids, _, _ := dist.Alloc[int32](ctx, c, tokens, topK)
		w, _, _ := dist.Alloc[float32](ctx, c, tokens, topK)
		out, _, _ := dist.Alloc[fp.BF16](ctx, c, tokens, hidden)
		add("order", l.GateUp(ctx), "run MoELayer.Dispatch first")
		add("order combine", l.Combine(ctx, out, w), "run MoELayer.Dispatch first")
		add("x local", l.Forward(ctx, out, local(tokens, hidden), ids, w), "x: ")
		wide, _, _ := dist.Alloc[fp.BF16](ctx, c, tokens, 2*hidden)
		add("x shape", l.Forward(ctx, out, wide, ids, w), "x has shape [4 32]; want [4 16]")
		if err := l.Dispatch(ctx, x, ids); err != nil {
			return err
		}
		add("skip a step", l.SwiGLU(ctx), "run MoELayer.GateUp first")
		add("ctx", l.Forward(nilCtx(), out, x, ids, w), "nil context")
		if err := l.Free(ctx); err != nil {
			return err
		}
		add("freed", l.Forward(ctx, out, x, ids, w), "freed MoELayer")
		for _, e := range errs {
			if e.err == nil || !strings.Contains(e.err.Error(), e.want) {
				return fmt.Errorf("%s: %v; want an error containing %q", e.name, e.err, e.want)
			}
		}
		return nil
	})
}

// nilCtx is a nil context: the misuse tested.
func nilCtx() context.Context { return nil }

// TestMoELayerMaskedSameBits: the low-latency layer on the masked kernels (GEMMs and SwiGLU
// over the rows received) gives out bit for bit what it gave before them, over every slot
// (AllSlots), and what the normal-mode layer gives, on 2 emulated GPUs, two rounds of random
// routing, with the pick and with forced 64-row tiles (TMA store: warpgroups inside a group
// and crossing its count).
func TestMoELayerMaskedSameBits(t *testing.T) {
	ctx := context.Background()
	const g, tokens, topK, hidden, experts, ffn, rounds = 2, 40, 2, 64, 4, 32, 2
	el := experts / g
	small := kernels.GemmSM90GroupedConfig{GemmSM90Config: kernels.GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 64, Consumers: 1, Stages: 2, TMAStore: true}, BandM: 8}
	rng := rand.New(rand.NewSource(12))
	bf := func(v float64) float32 { return fp.BF16Of(float32(v)).Float32() }
	w13, w2 := make([]float32, experts*hidden*2*ffn), make([]float32, experts*ffn*hidden)
	for i := range w13 {
		w13[i] = bf((2*rng.Float64() - 1) / 4)
	}
	for i := range w2 {
		w2[i] = bf((2*rng.Float64() - 1) / 4)
	}
	type input struct {
		x, w []float32
		ids  []int32
	}
	in := make([][g]input, rounds)
	for i := range in {
		for r := range in[i] {
			x, ids, w := make([]float32, tokens*hidden), make([]int32, tokens*topK), make([]float32, tokens*topK)
			for j := range x {
				x[j] = float32(rng.Intn(33)-16) / 8
			}
			for j := range ids {
				ids[j], w[j] = int32(rng.Intn(experts+1)-1), rng.Float32()
			}
			in[i][r] = input{x, w, ids}
		}
	}
	variants := []struct {
		name     string
		ll, all  bool
		gu, down kernels.GemmSM90GroupedConfig
	}{
		{"normal", false, false, kernels.GemmSM90GroupedConfig{}, kernels.GemmSM90GroupedConfig{}},
		{"ll all slots", true, true, kernels.GemmSM90GroupedConfig{}, kernels.GemmSM90GroupedConfig{}},
		{"ll masked", true, false, kernels.GemmSM90GroupedConfig{}, kernels.GemmSM90GroupedConfig{}},
		{"ll all slots, 64-row tiles", true, true, small, small},
		{"ll masked, 64-row tiles", true, false, small, small},
	}
	outs := make([][g][rounds][]fp.BF16, len(variants))
	ro := jit.RanksOptions{Backend: jit.Emulator, World: g, NVSHMEM: true}
	err := jit.RunRanks(ro, func(r *jit.Rank) error {
		c, err := collectives.New(ctx, r, collectives.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		defer c.Close()
		weights := func(h []float32, shape ...int) (ops.Tensor[fp.BF16], error) {
			b, err := jit.Alloc[fp.BF16](r.Device, len(h))
			if err != nil {
				return ops.Tensor[fp.BF16]{}, err
			}
			if err := b.CopyFromHost(fp.From[fp.BF16](h)); err != nil {
				return ops.Tensor[fp.BF16]{}, err
			}
			return ops.New(b, shape...)
		}
		lw13, err := weights(w13[r.Rank*el*hidden*2*ffn:(r.Rank+1)*el*hidden*2*ffn], el, hidden, 2*ffn)
		if err != nil {
			return err
		}
		lw2, err := weights(w2[r.Rank*el*ffn*hidden:(r.Rank+1)*el*ffn*hidden], el, ffn, hidden)
		if err != nil {
			return err
		}
		x, xb, _ := dist.Alloc[fp.BF16](ctx, c, tokens, hidden)
		ids, ib, _ := dist.Alloc[int32](ctx, c, tokens, topK)
		w, wb, _ := dist.Alloc[float32](ctx, c, tokens, topK)
		out, _, err := dist.Alloc[fp.BF16](ctx, c, tokens, hidden)
		if err != nil {
			return err
		}
		for v, vr := range variants {
			cfg := dist.MoELayerConfig{MoEConfig: collectives.MoEConfig{Tokens: tokens, TopK: topK, Hidden: hidden, Experts: experts, LowLatency: vr.ll},
				FFN: ffn, GateUp: vr.gu, Down: vr.down, AllSlots: vr.all}
			l, err := dist.NewMoELayer(ctx, c, cfg, lw13, lw2)
			if err != nil {
				return fmt.Errorf("%s: %w", vr.name, err)
			}
			for i := range in {
				is := make([]float32, len(in[i][r.Rank].ids))
				for j, id := range in[i][r.Rank].ids {
					is[j] = float32(id)
				}
				for _, err := range []error{xb.WriteF32(in[i][r.Rank].x), ib.WriteF32(is), wb.WriteF32(in[i][r.Rank].w)} {
					if err != nil {
						return err
					}
				}
				if err := l.Forward(ctx, out, x, ids, w); err != nil {
					return fmt.Errorf("%s round %d: %w", vr.name, i, err)
				}
				if err := l.Check(ctx); err != nil {
					return fmt.Errorf("%s round %d: %w", vr.name, i, err)
				}
				outs[v][r.Rank][i] = make([]fp.BF16, tokens*hidden)
				if err := out.Buffer().CopyToHost(outs[v][r.Rank][i]); err != nil {
					return err
				}
			}
			if err := l.Free(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	nonzero := 0
	for v := 1; v < len(variants); v++ {
		for r := 0; r < g; r++ {
			for i := 0; i < rounds; i++ {
				for j, want := range outs[0][r][i] {
					if got := outs[v][r][i][j]; got != want {
						t.Fatalf("%s: GPU %d round %d token %d col %d: %v (bits %#04x), the normal layer %v (%#04x)", variants[v].name, r, i, j/hidden, j%hidden, got.Float32(), uint16(got), want.Float32(), uint16(want))
					}
					if v == 1 && want != 0 {
						nonzero++
					}
				}
			}
		}
	}
	if nonzero == 0 {
		t.Fatal("every output is 0: the comparison proves nothing")
	}
	t.Logf("%d variants x %d GPUs x %d rounds: every output bit-identical (%d nonzero)", len(variants), g, rounds, nonzero)
}

// onOneRank runs f on one emulated GPU with NVSHMEM, beside a Comm on it; an error fails t.
func onOneRank(t *testing.T, f func(r *jit.Rank, c *collectives.Comm) error) {
	t.Helper()
	ro := jit.RanksOptions{Backend: jit.Emulator, World: 1, NVSHMEM: true}
	err := jit.RunRanks(ro, func(r *jit.Rank) error {
		c, err := collectives.New(context.Background(), r, collectives.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		defer c.Close()
		return f(r, c)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// uninitBF16 is a bf16 tensor of the given shape on r's GPU, its contents not set; a
// failed allocation gives the zero Tensor, which the operations refuse.
func uninitBF16(r *jit.Rank, shape ...int) ops.Tensor[fp.BF16] {
	n := 1
	for _, s := range shape {
		n *= s
	}
	b, _ := jit.Alloc[fp.BF16](r.Device, n)
	x, _ := ops.New(b, shape...)
	return x
}
