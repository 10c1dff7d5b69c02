// Command moebench times collectives.MoE's dispatch and combine (docs/moe.md) on every rank of
// a multi-GPU program (one process per GPU: kgen launch -n N --backend cuda), issue #26's
// shape by default: 4096 tokens per GPU, hidden 7168, top-8 of 32 experts, bf16.
//
// Each rank routes its tokens to -topk distinct experts drawn at random (seeded by rank:
// every rank can rebuild every routing), checks one dispatch and combine first (identity
// experts: y is the receive buffer, so out[t] = the sum over GPUs d of round(sum_k w[t,k] *
// x[t] over t's pairs on d), exact for the inputs used; the received counts against the
// routings), then times -iters dispatches back to back between a pair of CUDA events on the
// Comm's stream, and -iters combines the same way. It prints one line per rank: the mean
// times and the bytes this GPU sends to other GPUs per call (one row per token and other GPU
// holding one of its experts) / time (issue #26's GB/s).
//
// With -ll it runs the low-latency mode (MoEConfig.LowLatency) on a CaptureSafe Comm: after
// the check, it captures -iters dispatches in one CUDA graph and -iters combines in another
// (Comm.Capture), replays each once to warm up, then once between a pair of events, and
// prints the per-call mean (mode=ll).
//
// With -breakdown (normal mode) it then times each kernel of -iters more dispatches and
// combines: a CUDA event on the Comm's stream before each call and after each of its kernel
// launches (MoE.OnLaunch), all calls queued back to back and one synchronization at the
// end, so each kernel's time is the GPU's time between the events around it. It prints one
// line per kernel: the mean microseconds, the kernel's own bytes and their GB/s: for
// moe_dispatch_send the bytes this GPU sends to other GPUs (the rows of its tokens), for
// moe_dispatch_expand the bytes it copies locally (the rows received from other GPUs, token
// buffer to Recv), for moe_combine the partial rows it sends to other GPUs (one per token
// of another GPU with an expert here); the count and layout kernels move no rows (bytes 0).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/bits"
	"math/rand"
	"os"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/jit"
)

type config struct {
	cfg           collectives.MoEConfig
	iters, warmup int
	blocks        int
	ll            bool
	breakdown     bool
}

func main() {
	var c config
	flag.IntVar(&c.cfg.Tokens, "tokens", 4096, "tokens per GPU")
	flag.IntVar(&c.cfg.Hidden, "hidden", 7168, "hidden size (a multiple of 8)")
	flag.IntVar(&c.cfg.Experts, "experts", 32, "experts in all (a multiple of the GPUs)")
	flag.IntVar(&c.cfg.TopK, "topk", 8, "experts per token (distinct)")
	flag.IntVar(&c.iters, "iters", 20, "timed calls")
	flag.IntVar(&c.warmup, "warmup", 3, "warm-up calls")
	flag.IntVar(&c.blocks, "blocks", 0, "Options.MaxBlocks and the normal mode's MoEConfig.Blocks (0: the defaults, 128 and 24 on sm_90+)")
	flag.BoolVar(&c.breakdown, "breakdown", false, "normal mode: also time each kernel (events after every launch) and print one line per kernel")
	flag.BoolVar(&c.ll, "ll", false, "the low-latency mode, timed inside CUDA graphs (-tokens: the most tokens per GPU)")
	flag.Parse()
	if c.cfg.TopK > c.cfg.Experts {
		log.Fatalf("moebench: -topk %d > -experts %d: the experts of a token are distinct", c.cfg.TopK, c.cfg.Experts)
	}
	err := jit.RunRanks(jit.RanksOptions{NVSHMEM: true}, func(r *jit.Rank) error { return run(r, c) })
	if err != nil {
		log.Fatalf("moebench: %v", err)
	}
}

// routing is rank g's ids and weights ([T, K]) and tokens ([T, H]).
func routing(g int, cfg collectives.MoEConfig) (ids []int32, w, x []float32) {
	rng := rand.New(rand.NewSource(int64(g) + 1))
	ids, w = routeIDs(rng, cfg)
	x = make([]float32, cfg.Tokens*cfg.Hidden)
	for i := range x {
		x[i] = float32(rng.Intn(33)-16) / 4
	}
	return ids, w, x
}

// routeIDs draws a rank's ids and weights from rng (routing's first draws).
func routeIDs(rng *rand.Rand, cfg collectives.MoEConfig) (ids []int32, w []float32) {
	ids, w = make([]int32, cfg.Tokens*cfg.TopK), make([]float32, cfg.Tokens*cfg.TopK)
	for t := 0; t < cfg.Tokens; t++ {
		for k, e := range rng.Perm(cfg.Experts)[:cfg.TopK] {
			ids[t*cfg.TopK+k] = int32(e)
			w[t*cfg.TopK+k] = float32(rng.Intn(5)) / 4
		}
	}
	return ids, w
}

// kernelBytes is each row kernel's own bytes on rank (-breakdown): the rows of its tokens it
// sends to other GPUs (send), the rows it receives from other GPUs and copies (expand), the
// partial rows it sends back (combine: one per token of another GPU with an expert here).
func kernelBytes(rank, g int, cfg collectives.MoEConfig) map[string]float64 {
	el, row := cfg.Experts/g, float64(2*cfg.Hidden)
	var sent, copied, back float64
	for s := 0; s < g; s++ {
		ids, _ := routeIDs(rand.New(rand.NewSource(int64(s)+1)), cfg)
		for t := 0; t < cfg.Tokens; t++ {
			var on uint64
			for _, id := range ids[t*cfg.TopK : (t+1)*cfg.TopK] {
				d := int(id) / el
				on |= 1 << d
				if s != rank && d == rank {
					copied++
				}
			}
			if s == rank {
				sent += float64(bits.OnesCount64(on &^ (1 << rank)))
			} else if on&(1<<rank) != 0 {
				back++
			}
		}
	}
	return map[string]float64{"moe_dispatch_send": sent * row, "moe_dispatch_expand": copied * row, "moe_combine": back * row}
}

// breakdown times each kernel of iters calls of f (queued back to back, one synchronization):
// an event before each call and after each of its launches; it returns each kernel's mean
// microseconds, in launch order.
func breakdown(r *jit.Rank, s *jit.Stream, m *collectives.MoE, iters int, f func() error) (names []string, us []float64, err error) {
	type mark struct {
		name string
		ev   *jit.Event
	}
	var marks [][]mark
	defer func() {
		for _, ms := range marks {
			for _, x := range ms {
				x.ev.Close()
			}
		}
	}()
	record := func(name string) error {
		ev, err := r.Device.NewEvent()
		if err != nil {
			return err
		}
		marks[len(marks)-1] = append(marks[len(marks)-1], mark{name, ev})
		return ev.Record(s)
	}
	m.OnLaunch(record)
	defer m.OnLaunch(nil)
	for i := 0; i < iters; i++ {
		marks = append(marks, nil)
		if err := record(""); err != nil {
			return nil, nil, err
		}
		if err := f(); err != nil {
			return nil, nil, err
		}
	}
	last := marks[len(marks)-1]
	if err := last[len(last)-1].ev.Synchronize(); err != nil {
		return nil, nil, err
	}
	for _, ms := range marks {
		for j := 1; j < len(ms); j++ {
			d, err := ms[j-1].ev.Elapsed(ms[j].ev)
			if err != nil {
				return nil, nil, err
			}
			if len(us) < j {
				names, us = append(names, ms[j].name), append(us, 0)
			}
			us[j-1] += float64(d.Nanoseconds()) / 1e3 / float64(iters)
		}
	}
	return names, us, nil
}

func run(r *jit.Rank, c config) error {
	ctx := context.Background()
	s, err := r.Device.NewStream()
	if err != nil {
		return err
	}
	comm, err := collectives.New(ctx, r, collectives.Options{DisableMulticast: true, MaxBlocks: c.blocks, Stream: s, CaptureSafe: c.ll,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer comm.Close()
	g, rank, cfg := comm.NumGPUs(), comm.Rank(), c.cfg
	cfg.LowLatency = c.ll
	if !c.ll {
		cfg.Blocks = c.blocks
	}
	m, err := comm.NewMoE(ctx, cfg)
	if err != nil {
		return err
	}
	cfg = m.Config()
	ids, w, xs := routing(rank, cfg)
	x, err := comm.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
	if err != nil {
		return err
	}
	idb, err := comm.Alloc(dsl.I32, len(ids))
	if err != nil {
		return err
	}
	wb, err := comm.Alloc(dsl.F32, len(w))
	if err != nil {
		return err
	}
	out, err := comm.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
	if err != nil {
		return err
	}
	idf := make([]float32, len(ids))
	for i, id := range ids {
		idf[i] = float32(id)
	}
	for _, err := range []error{x.WriteF32(xs), idb.WriteF32(idf), wb.WriteF32(w)} {
		if err != nil {
			return err
		}
	}
	// Check once.
	if err := m.Dispatch(ctx, x, idb); err != nil {
		return err
	}
	if err := m.Combine(ctx, m.Recv(), wb, out); err != nil {
		return err
	}
	check := "ok"
	if err := verify(m, out, rank, g, cfg, ids, w, xs); err != nil {
		check = err.Error()
	}
	if err := m.Check(ctx); err != nil {
		check = err.Error()
	}
	// Bytes this GPU sends to other GPUs per call: one row per (token, other GPU holding one
	// of its experts), each way.
	el := cfg.Experts / g
	remote := 0
	for t := 0; t < cfg.Tokens; t++ {
		var on uint64
		for _, id := range ids[t*cfg.TopK : (t+1)*cfg.TopK] {
			if d := int(id) / el; d != rank {
				on |= 1 << d
			}
		}
		remote += bits.OnesCount64(on)
	}
	bytes := float64(remote) * float64(cfg.Hidden) * 2
	e0, err := r.Device.NewEvent()
	if err != nil {
		return err
	}
	defer e0.Close()
	e1, err := r.Device.NewEvent()
	if err != nil {
		return err
	}
	defer e1.Close()
	perGraph := 1 // calls per timed f (the graphs of -ll hold -iters)
	time := func(f func() error) (float64, error) {
		for i := 0; i < c.warmup; i++ {
			if err := f(); err != nil {
				return 0, err
			}
		}
		if err := e0.Record(s); err != nil {
			return 0, err
		}
		for i := 0; i < c.iters; i++ {
			if err := f(); err != nil {
				return 0, err
			}
		}
		if err := e1.Record(s); err != nil {
			return 0, err
		}
		if err := e1.Synchronize(); err != nil {
			return 0, err
		}
		d, err := e0.Elapsed(e1)
		return float64(d.Nanoseconds()) / 1e3 / float64(c.iters), err
	}
	dispatch := func() error { return m.Dispatch(ctx, x, idb) }
	combine := func() error { return m.Combine(ctx, m.Recv(), wb, out) }
	mode := "normal"
	if c.ll {
		// One graph of -iters calls each: replayed once to warm up, then once timed.
		mode = "ll"
		graph := func(f func() error) (func() error, func(), error) {
			gx, err := comm.Capture(ctx, func() error {
				for i := 0; i < c.iters; i++ {
					if err := f(); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return nil, nil, err
			}
			return func() error { return gx.Launch(s) }, func() { gx.Close() }, nil
		}
		var closeD, closeC func()
		if dispatch, closeD, err = graph(dispatch); err != nil {
			return err
		}
		defer closeD()
		if combine, closeC, err = graph(combine); err != nil {
			return err
		}
		defer closeC()
		c.warmup = 1
		c.iters, perGraph = 1, c.iters
	}
	dus, err := time(dispatch)
	if err != nil {
		return err
	}
	cus, err := time(combine)
	if err != nil {
		return err
	}
	dus, cus = dus/float64(perGraph), cus/float64(perGraph)
	if c.ll && check == "ok" { // the replays computed the same routing: check them too
		if err := verify(m, out, rank, g, cfg, ids, w, xs); err != nil {
			check = "after the graph replays: " + err.Error()
		}
	}
	fmt.Printf("moebench rank=%d gpus=%d tokens=%d hidden=%d experts=%d topk=%d dispatch_us=%.1f combine_us=%.1f remote_bytes=%.0f dispatch_GBps=%.1f combine_GBps=%.1f mode=%s check=%q\n",
		rank, g, cfg.Tokens, cfg.Hidden, cfg.Experts, cfg.TopK, dus, cus, bytes, bytes/dus/1e3, bytes/cus/1e3, mode, check)
	if !c.breakdown || c.ll {
		return nil
	}
	kb := kernelBytes(rank, g, cfg)
	for _, f := range []func() error{dispatch, combine} {
		names, us, err := breakdown(r, s, m, c.iters, f)
		if err != nil {
			return err
		}
		for i, n := range names {
			gbps := 0.0
			if us[i] > 0 {
				gbps = kb[n] / us[i] / 1e3
			}
			fmt.Printf("moebench rank=%d kernel=%s us=%.1f bytes=%.0f GBps=%.1f\n", rank, n, us[i], kb[n], gbps)
		}
	}
	return nil
}

// verify checks this rank's Counts against every rank's routing and out against the
// combine's sum with identity experts: per GPU d in order, round(sum over k of the token's
// pairs on d of w * x), summed and rounded once more.
func verify(m *collectives.MoE, out *collectives.Buffer, rank, g int, cfg collectives.MoEConfig, ids []int32, w, xs []float32) error {
	el := cfg.Experts / g
	want := make([]int, el)
	for s := 0; s < g; s++ {
		sids, _, _ := routing(s, cfg)
		for _, id := range sids {
			if int(id)/el == rank {
				want[int(id)%el]++
			}
		}
	}
	got, err := m.Counts().ReadF32()
	if err != nil {
		return err
	}
	for j := range want {
		if int(got[j]) != want[j] {
			return fmt.Errorf("expert %d: %v rows, want %d", rank*el+j, got[j], want[j])
		}
	}
	o, err := out.ReadF32()
	if err != nil {
		return err
	}
	bf16 := func(x float64) float64 { return float64(fp.BF16ToF32(fp.F32ToBF16(float32(x)))) }
	sw := make([]float64, g) // the token's weights per GPU
	for t := 0; t < cfg.Tokens; t++ {
		clear(sw)
		for k := 0; k < cfg.TopK; k++ {
			sw[int(ids[t*cfg.TopK+k])/el] += float64(w[t*cfg.TopK+k])
		}
		for c := 0; c < cfg.Hidden; c++ {
			i := t*cfg.Hidden + c
			var acc float64
			for _, s := range sw {
				acc += bf16(s * float64(xs[i]))
			}
			if x := float32(bf16(acc)); o[i] != x {
				return fmt.Errorf("token %d col %d: %v, want %v", t, c, o[i], x)
			}
		}
	}
	return nil
}
