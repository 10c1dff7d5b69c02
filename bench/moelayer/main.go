// Command moelayer times the whole expert-parallel MoE layer, dist.MoELayer (docs/moe.md,
// "The whole layer"), on every rank of a multi-GPU program (one process per GPU: kgen
// launch -n N --backend cuda): dispatch, the grouped GEMM of the gate and up projections,
// SwiGLU, the grouped GEMM of the down projection and the combine, in stream order with no
// host step. Issue #26's shape by default: 4096 tokens per GPU, hidden 7168, FFN 2048
// (DeepSeek-V3's expert size), top-8 of 32 experts, bf16.
//
// With -ll the MoE runs in the low-latency mode (MoEConfig.LowLatency: the masked layout,
// every local expert's NumGPUs*tokens slots), whose grouped GEMMs and SwiGLU compute only the
// rows received (the masked kernels); -allslots runs them over every slot instead, as the
// layer did before the masked kernels (MoELayerConfig.AllSlots), for a before/after timing.
//
// Each rank routes its tokens to -topk distinct experts drawn at random (seeded by rank);
// the weights of expert e are a hash of (e, row, column), so every rank can rebuild any
// expert's. It runs the layer once and checks -check sampled tokens of its own (every
// column) against float64 carried as intervals through each step's f32 error and bf16
// rounding (check.go), then times -iters layers back to back between two CUDA events on
// the Comm's stream (layer_us), then -iters layers with an event between every two steps
// (the per-step means: dispatch_us ... combine_us; their sum, steps_us, includes the
// events). It prints one line per rank with the rows this GPU received, the experts'
// TFLOP/s over the layer time (6*rows*hidden*FFN flops) and the check's verdict.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math"
	"math/rand"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ops"
	"github.com/kgen-dev/kgen/ops/dist"
)

type config struct {
	cfg           dist.MoELayerConfig
	iters, warmup int
	check         int
}

func main() {
	var c config
	flag.IntVar(&c.cfg.Tokens, "tokens", 4096, "tokens per GPU")
	flag.IntVar(&c.cfg.Hidden, "hidden", 7168, "hidden size (a multiple of 8)")
	flag.IntVar(&c.cfg.FFN, "ffn", 2048, "each expert's intermediate size (a multiple of 8)")
	flag.IntVar(&c.cfg.Experts, "experts", 32, "experts in all (a multiple of the GPUs)")
	flag.IntVar(&c.cfg.TopK, "topk", 8, "experts per token (distinct)")
	flag.IntVar(&c.cfg.Capacity, "capacity", 0, "receive rows per GPU (0: GPUs*tokens*topk, which no routing exceeds)")
	flag.IntVar(&c.iters, "iters", 20, "timed layers")
	flag.IntVar(&c.warmup, "warmup", 3, "warm-up layers")
	flag.IntVar(&c.check, "check", 2, "tokens per rank checked against float64 (0: none)")
	flag.BoolVar(&c.cfg.LowLatency, "ll", false, "the low-latency MoE (masked layout; -capacity must be 0)")
	flag.BoolVar(&c.cfg.AllSlots, "allslots", false, "with -ll: the grouped GEMMs and SwiGLU over every slot of the masked layout (the layer before the masked kernels)")
	gateUp := flag.String("gateup", "pick", "the gate/up grouped GEMM: pick or BMxBN:<stages>s[:tma][:band<b>] (as gpubench grouped -variants)")
	down := flag.String("down", "pick", "the down grouped GEMM: pick or BMxBN:<stages>s[:tma][:band<b>]")
	flag.Parse()
	var err error
	if c.cfg.GateUp, err = parseGrouped(*gateUp); err != nil {
		log.Fatalf("moelayer: -gateup: %v", err)
	}
	if c.cfg.Down, err = parseGrouped(*down); err != nil {
		log.Fatalf("moelayer: -down: %v", err)
	}
	if c.cfg.TopK > c.cfg.Experts {
		log.Fatalf("moelayer: -topk %d > -experts %d: the experts of a token are distinct", c.cfg.TopK, c.cfg.Experts)
	}
	err = jit.RunRanks(jit.RanksOptions{NVSHMEM: true}, func(r *jit.Rank) error { return run(r, c) })
	if err != nil {
		log.Fatalf("moelayer: %v", err)
	}
}

// parseGrouped reads "pick" (the zero configuration) or BMxBN:<stages>s[:tma][:band<b>], a
// bf16 grouped GEMM configuration, checked by its Check.
func parseGrouped(s string) (kernels.GemmSM90GroupedConfig, error) {
	var c kernels.GemmSM90GroupedConfig
	if s == "pick" {
		return c, nil
	}
	f := strings.Split(s, ":")
	var bm, bn int
	if _, err := fmt.Sscanf(f[0], "%dx%d", &bm, &bn); err != nil || (bm != 64 && bm != 128) || len(f) < 2 || !strings.HasSuffix(f[1], "s") {
		return c, fmt.Errorf("%q: want pick or BMxBN:<stages>s[:tma][:band<b>] with BM 64 or 128 (e.g. 128x256:3s:tma:band8)", s)
	}
	stages, err := strconv.Atoi(strings.TrimSuffix(f[1], "s"))
	if err != nil {
		return c, fmt.Errorf("%q: stages are <n>s", s)
	}
	c = kernels.GemmSM90GroupedConfig{GemmSM90Config: kernels.GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: bn, Consumers: bm / 64, Stages: stages}}
	for _, o := range f[2:] {
		switch {
		case o == "tma":
			c.TMAStore = true
		case strings.HasPrefix(o, "band"):
			if c.BandM, err = strconv.Atoi(strings.TrimPrefix(o, "band")); err != nil {
				return c, fmt.Errorf("%q: band<b> takes a number of row tiles", s)
			}
		default:
			return c, fmt.Errorf("%q: option %q (want tma or band<b>)", s, o)
		}
	}
	return c, c.Check()
}

// hash is splitmix64's finalizer: a stateless random word of x.
func hash(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// inputs generates the layer's values, the same on every rank: expert weights by
// (expert, matrix, index), tokens and routing by rank.
type inputs struct{ cfg dist.MoELayerConfig }

// w13 is expert e's gate|up weight at (row l of Hidden, column j of 2F): k/(4*sqrt(H)),
// k in [-4, 4], in bf16.
func (in inputs) w13(e, l, j int) float32 {
	h := hash(uint64(e)<<40 ^ uint64(l*2*in.cfg.FFN+j))
	return fp.BF16Of(float32(int(h%9)-4) / (4 * float32(math.Sqrt(float64(in.cfg.Hidden))))).Float32()
}

// w2 is expert e's down weight at (row l of F, column c of Hidden): k/(4*sqrt(F)).
func (in inputs) w2(e, l, c int) float32 {
	h := hash(uint64(e)<<40 ^ 1<<39 ^ uint64(l*in.cfg.Hidden+c))
	return fp.BF16Of(float32(int(h%9)-4) / (4 * float32(math.Sqrt(float64(in.cfg.FFN))))).Float32()
}

// x is rank r's token t at column l: k/16, k in [-16, 16] (exact in bf16).
func (in inputs) x(r, t, l int) float32 {
	return float32(int(hash(1<<62^uint64(r)<<40^uint64(t*in.cfg.Hidden+l))%33)-16) / 16
}

// routing is rank r's ids (top-k distinct experts per token) and weights, [T, K].
func (in inputs) routing(r int) (ids []int32, w []float32) {
	cfg := in.cfg
	rng := rand.New(rand.NewSource(int64(r) + 1))
	ids, w = make([]int32, cfg.Tokens*cfg.TopK), make([]float32, cfg.Tokens*cfg.TopK)
	for t := 0; t < cfg.Tokens; t++ {
		for k, e := range rng.Perm(cfg.Experts)[:cfg.TopK] {
			ids[t*cfg.TopK+k] = int32(e)
			w[t*cfg.TopK+k] = rng.Float32()
		}
	}
	return ids, w
}

// fill writes f(i) for i < n into a bf16 slice, on every CPU.
func fill(n int, f func(i int) float32) []fp.BF16 {
	out := make([]fp.BF16, n)
	p := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := 0; w < p; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w * n / p; i < (w+1)*n/p; i++ {
				out[i] = fp.BF16Of(f(i))
			}
		}(w)
	}
	wg.Wait()
	return out
}

func run(r *jit.Rank, c config) error {
	ctx := context.Background()
	s, err := r.Device.NewStream()
	if err != nil {
		return err
	}
	comm, err := collectives.New(ctx, r, collectives.Options{DisableMulticast: true, Stream: s,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer comm.Close()
	g, rank, cfg := comm.NumGPUs(), comm.Rank(), c.cfg
	if cfg.Experts%g != 0 {
		return fmt.Errorf("-experts %d: want a multiple of the %d GPUs", cfg.Experts, g)
	}
	in := inputs{cfg}
	el, h, f := cfg.Experts/g, cfg.Hidden, cfg.FFN
	t0 := time.Now()
	upload := func(host []fp.BF16, shape ...int) (ops.Tensor[fp.BF16], error) {
		b, err := jit.Alloc[fp.BF16](r.Device, len(host))
		if err != nil {
			return ops.Tensor[fp.BF16]{}, err
		}
		if err := b.CopyFromHost(host); err != nil {
			return ops.Tensor[fp.BF16]{}, err
		}
		return ops.New(b, shape...)
	}
	w13, err := upload(fill(el*h*2*f, func(i int) float32 {
		return in.w13(rank*el+i/(h*2*f), i%(h*2*f)/(2*f), i%(2*f))
	}), el, h, 2*f)
	if err != nil {
		return err
	}
	w2, err := upload(fill(el*f*h, func(i int) float32 {
		return in.w2(rank*el+i/(f*h), i%(f*h)/h, i%h)
	}), el, f, h)
	if err != nil {
		return err
	}
	l, err := dist.NewMoELayer(ctx, comm, cfg, w13, w2)
	if err != nil {
		return err
	}
	defer l.Free(ctx)
	cfg = l.Config()
	x, _, err := dist.Alloc[fp.BF16](ctx, comm, cfg.Tokens, h)
	if err != nil {
		return err
	}
	ids, _, err := dist.Alloc[int32](ctx, comm, cfg.Tokens, cfg.TopK)
	if err != nil {
		return err
	}
	wts, _, err := dist.Alloc[float32](ctx, comm, cfg.Tokens, cfg.TopK)
	if err != nil {
		return err
	}
	out, _, err := dist.Alloc[fp.BF16](ctx, comm, cfg.Tokens, h)
	if err != nil {
		return err
	}
	hid, hw := in.routing(rank)
	xh := fill(cfg.Tokens*h, func(i int) float32 { return in.x(rank, i/h, i%h) })
	for _, err := range []error{x.Buffer().CopyFromHost(xh), ids.Buffer().CopyFromHost(hid), wts.Buffer().CopyFromHost(hw)} {
		if err != nil {
			return err
		}
	}
	setup := time.Since(t0)

	// Check once.
	if err := l.Forward(ctx, out, x, ids, wts); err != nil {
		return err
	}
	verdict := "ok"
	if err := l.Check(ctx); err != nil {
		verdict = err.Error()
	}
	// The rows received: Offsets[el], or in the low-latency mode (whose masked layout has
	// fixed offsets, the last one the capacity) the counts' sum.
	offs := make([]int32, el+1)
	ot, err := dist.Tensor[int32](l.MoE().Offsets(), el+1)
	if err != nil {
		return err
	}
	if err := ot.Buffer().CopyToHost(offs); err != nil {
		return err
	}
	rows := int(offs[el])
	if cfg.LowLatency {
		counts := make([]int32, el)
		ct, err := dist.Tensor[int32](l.MoE().Counts(), el)
		if err != nil {
			return err
		}
		if err := ct.Buffer().CopyToHost(counts); err != nil {
			return err
		}
		rows = 0
		for _, n := range counts {
			rows += int(n)
		}
	}
	if c.check > 0 && verdict == "ok" {
		got := make([]fp.BF16, cfg.Tokens*h)
		if err := out.Buffer().CopyToHost(got); err != nil {
			return err
		}
		if err := verify(in, rank, g, c.check, hid, hw, got); err != nil {
			verdict = err.Error()
		}
	}

	// Time: the whole layer between two events, then each step between events.
	ev := make([]*jit.Event, 5*c.iters+1)
	for i := range ev {
		if ev[i], err = r.Device.NewEvent(); err != nil {
			return err
		}
		defer ev[i].Close()
	}
	settle := func() error {
		for i := 0; i < c.warmup; i++ {
			if err := l.Forward(ctx, out, x, ids, wts); err != nil {
				return err
			}
		}
		if err := comm.Barrier(ctx); err != nil {
			return err
		}
		return s.Synchronize()
	}
	if err := settle(); err != nil {
		return err
	}
	if err := ev[0].Record(s); err != nil {
		return err
	}
	for i := 0; i < c.iters; i++ {
		if err := l.Forward(ctx, out, x, ids, wts); err != nil {
			return err
		}
	}
	if err := ev[1].Record(s); err != nil {
		return err
	}
	if err := ev[1].Synchronize(); err != nil {
		return err
	}
	d, err := ev[0].Elapsed(ev[1])
	if err != nil {
		return err
	}
	layer := us(d) / float64(c.iters)
	if err := settle(); err != nil {
		return err
	}
	steps := []func() error{
		func() error { return l.Dispatch(ctx, x, ids) },
		func() error { return l.GateUp(ctx) },
		func() error { return l.SwiGLU(ctx) },
		func() error { return l.Down(ctx) },
		func() error { return l.Combine(ctx, out, wts) },
	}
	if err := ev[0].Record(s); err != nil {
		return err
	}
	for i := 0; i < c.iters; i++ {
		for j, step := range steps {
			if err := step(); err != nil {
				return err
			}
			if err := ev[5*i+j+1].Record(s); err != nil {
				return err
			}
		}
	}
	if err := ev[len(ev)-1].Synchronize(); err != nil {
		return err
	}
	var per [5]float64
	var sum float64
	for i := 0; i < c.iters; i++ {
		for j := range per {
			d, err := ev[5*i+j].Elapsed(ev[5*i+j+1])
			if err != nil {
				return err
			}
			per[j] += us(d) / float64(c.iters)
		}
	}
	for _, p := range per {
		sum += p
	}
	flops := 6 * float64(rows) * float64(h) * float64(f)
	mode := "normal"
	switch {
	case cfg.LowLatency && cfg.AllSlots:
		mode = "ll-allslots"
	case cfg.LowLatency:
		mode = "ll"
	}
	fmt.Printf("moelayer rank=%d gpus=%d mode=%s tokens=%d hidden=%d ffn=%d experts=%d topk=%d capacity=%d rows=%d layer_us=%.1f dispatch_us=%.1f gateup_us=%.1f swiglu_us=%.1f down_us=%.1f combine_us=%.1f steps_us=%.1f expert_TFLOPs=%.1f setup_s=%.1f gateup=%s down=%s check=%q\n",
		rank, g, mode, cfg.Tokens, h, f, cfg.Experts, cfg.TopK, cfg.Capacity, rows, layer, per[0], per[1], per[2], per[3], per[4], sum,
		flops/layer/1e6, setup.Seconds(), name(cfg.GateUp), name(cfg.Down), verdict)
	return nil
}

// name is a configuration's kernel name, "pick" for the zero one.
func name(c kernels.GemmSM90GroupedConfig) string {
	if c.BN == 0 {
		return "pick"
	}
	return c.Name()
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
