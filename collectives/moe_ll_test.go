package collectives

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
)

// moeLLWant is the Go reference of a low-latency dispatch on GPU d: per local expert j, the
// sources (s*Tokens*TopK + t*TopK + the first k naming it) of its rows in order (source GPU,
// then token), one per distinct (token, expert); n[s] is GPU s's tokens.
func moeLLWant(in []moeRouting, cfg MoEConfig, n []int, d int) [][]int32 {
	g := len(in)
	el := cfg.Experts / g
	out := make([][]int32, el)
	for j := range out {
		e := int32(d*el + j)
		for s := 0; s < g; s++ {
			for t := 0; t < n[s]; t++ {
				for k := 0; k < cfg.TopK; k++ {
					if in[s].ids[t*cfg.TopK+k] == e {
						out[j] = append(out[j], int32((s*cfg.Tokens+t)*cfg.TopK+k))
						break
					}
				}
			}
		}
	}
	return out
}

// moeLLCheckDispatch compares this rank's Counts, Offsets, Src and Recv rows with the
// reference (masked layout: expert j's rows at j*NumGPUs*Tokens).
func moeLLCheckDispatch(e *rankEnv, m *MoE, in []moeRouting, n []int) error {
	cfg, g, r := m.Config(), e.c.NumGPUs(), e.c.Rank()
	want := moeLLWant(in, cfg, n, r)
	gotC, err := m.Counts().ReadF32()
	if err != nil {
		return err
	}
	gotO, _ := m.Offsets().ReadF32()
	gotS, _ := m.Src().ReadF32()
	recv, err := m.Recv().ReadF32()
	if err != nil {
		return err
	}
	rows := g * cfg.Tokens
	for j, srcs := range want {
		if int(gotC[j]) != len(srcs) || int(gotO[j]) != j*rows {
			return fmt.Errorf("GPU %d expert %d: count %v offset %v, want %d %d", r, j, gotC[j], gotO[j], len(srcs), j*rows)
		}
		for i, src := range srcs {
			row := j*rows + i
			if int32(gotS[row]) != src {
				return fmt.Errorf("GPU %d expert %d row %d: source %v, want %d", r, j, i, gotS[row], src)
			}
			s, t := int(src)/(cfg.Tokens*cfg.TopK), int(src)%(cfg.Tokens*cfg.TopK)/cfg.TopK
			for c := 0; c < cfg.Hidden; c++ {
				if got, x := recv[row*cfg.Hidden+c], in[s].x[t*cfg.Hidden+c]; got != x {
					return fmt.Errorf("GPU %d expert %d row %d col %d: %v, want %v", r, j, i, c, got, x)
				}
			}
		}
	}
	if int(gotO[len(want)]) != len(want)*rows {
		return fmt.Errorf("GPU %d: Offsets[%d] = %v, want %d", r, len(want), gotO[len(want)], len(want)*rows)
	}
	return nil
}

// moeLLBufs are one round's buffers on one rank.
type moeLLBufs struct{ x, ids, w, out *Buffer }

// moeLLInputs allocates and writes rank r's inputs of in.
func moeLLInputs(e *rankEnv, cfg MoEConfig, in moeRouting) (moeLLBufs, error) {
	var b moeLLBufs
	var err error
	for _, a := range []struct {
		p  **Buffer
		dt dsl.Type
		n  int
	}{{&b.x, dsl.BF16, cfg.Tokens * cfg.Hidden}, {&b.ids, dsl.I32, cfg.Tokens * cfg.TopK}, {&b.w, dsl.F32, cfg.Tokens * cfg.TopK}, {&b.out, dsl.BF16, cfg.Tokens * cfg.Hidden}} {
		if *a.p, err = e.c.Alloc(a.dt, a.n); err != nil {
			return b, err
		}
	}
	idf := make([]float32, len(in.ids))
	for j, id := range in.ids {
		idf[j] = float32(id)
	}
	for _, err := range []error{b.x.WriteF32(in.x), b.ids.WriteF32(idf), b.w.WriteF32(in.w)} {
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

// moeLLCheckOut compares out's first n[r] tokens with the combine of the reference
// (expert: the function of x and the global expert the experts applied).
func moeLLCheckOut(e *rankEnv, cfg MoEConfig, in []moeRouting, n []int, out *Buffer, expert func(x float32, e int) float32) error {
	g, r := e.c.NumGPUs(), e.c.Rank()
	got, err := out.ReadF32()
	if err != nil {
		return err
	}
	c := cfg
	c.Tokens = n[r]
	want := moeWantCombine(in, c, g, r, expert)
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("combine: GPU %d token %d col %d = %v, want %v", r, i/cfg.Hidden, i%cfg.Hidden, got[i], want[i])
		}
	}
	return nil
}

// moeLLRound runs one low-latency dispatch of n[r] tokens and one combine on every rank and
// checks both; the experts are moeExpert applied on the host to Recv's rows (identity: y is
// Recv itself, no host step between the launches).
func moeLLRound(ctx context.Context, e *rankEnv, m *MoE, in []moeRouting, n []int, identity bool) error {
	cfg, g, r := m.Config(), e.c.NumGPUs(), e.c.Rank()
	b, err := moeLLInputs(e, cfg, in[r])
	if err != nil {
		return err
	}
	if err := m.DispatchTokens(ctx, b.x, b.ids, n[r]); err != nil {
		return err
	}
	expert := func(x float32, _ int) float32 { return x }
	y := m.Recv()
	if !identity {
		if err := moeLLCheckDispatch(e, m, in, n); err != nil {
			return err
		}
		if y, err = e.c.Alloc(dsl.BF16, cfg.Capacity*cfg.Hidden); err != nil {
			return err
		}
		recv, _ := m.Recv().ReadF32()
		cnt, _ := m.Counts().ReadF32()
		off, _ := m.Offsets().ReadF32()
		for j := range cnt {
			for row := int(off[j]); row < int(off[j])+int(cnt[j]); row++ {
				for c := 0; c < cfg.Hidden; c++ {
					recv[row*cfg.Hidden+c] = moeExpert(recv[row*cfg.Hidden+c], j)
				}
			}
		}
		if err := y.WriteF32(recv); err != nil {
			return err
		}
		el := cfg.Experts / g
		expert = func(x float32, e int) float32 { return moeExpert(x, e%el) }
	}
	if err := m.Combine(ctx, y, b.w, b.out); err != nil {
		return err
	}
	if err := moeLLCheckOut(e, cfg, in, n, b.out, expert); err != nil {
		return err
	}
	return m.Check(ctx)
}

// TestMoELowLatency runs the low-latency dispatch and combine on 1, 2, 3, 4 and 8 emulated
// GPUs against the Go reference: random routing with -1 and repeated experts, every pair to
// one expert (skew 1, 2: other experts empty), k = 1 and 8, hidden 8 to 40, fewer tokens
// than the maximum on some ranks, several rounds on one MoE, grids smaller and larger than
// the local experts.
func TestMoELowLatency(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		gpus, blocks int
		cfg          MoEConfig
		skew         []int
		fewer        bool // rank r sends Tokens - r%3 tokens
		weak         bool
	}{
		{1, 3, MoEConfig{Tokens: 5, TopK: 2, Hidden: 16, Experts: 3}, []int{0, 1}, false, false},
		{2, 3, MoEConfig{Tokens: 7, TopK: 1, Hidden: 24, Experts: 4}, []int{0, 2, 0}, true, false},
		{3, 2, MoEConfig{Tokens: 4, TopK: 3, Hidden: 8, Experts: 15}, []int{0, 1}, true, true},
		{4, 3, MoEConfig{Tokens: 6, TopK: 8, Hidden: 40, Experts: 8}, []int{0, 1, 0}, true, true},
		{8, 4, MoEConfig{Tokens: 3, TopK: 2, Hidden: 8, Experts: 16}, []int{0, 2}, false, false},
	} {
		t.Run(fmt.Sprintf("g%d/k%d/h%d/e%d", c.gpus, c.cfg.TopK, c.cfg.Hidden, c.cfg.Experts), func(t *testing.T) {
			o := testOpts
			o.MaxBlocks = c.blocks
			runRanks(t, c.gpus, false, c.weak, 3, o, func(e *rankEnv) error {
				cfg := c.cfg
				cfg.LowLatency = true
				m, err := e.c.NewMoE(ctx, cfg)
				if err != nil {
					return err
				}
				rng := rand.New(rand.NewSource(int64(c.gpus)))
				for round, skew := range c.skew {
					in := moeInputs(rng, c.gpus, m.Config(), skew)
					n := make([]int, c.gpus)
					for s := range n {
						n[s] = cfg.Tokens
						if c.fewer {
							n[s] -= (s + round) % 3
						}
					}
					if err := moeLLRound(ctx, e, m, in, n, round%2 == 1); err != nil {
						return fmt.Errorf("round %d: %w", round, err)
					}
				}
				return nil
			})
		})
	}
}

// TestMoELowLatencyQueued queues four rounds of dispatch and combine (identity experts) with
// every input written first and every output read last: no host synchronization between the
// launches on any rank, so ranks may run calls apart and the parities and call counts are
// exercised (weak memory).
func TestMoELowLatencyQueued(t *testing.T) {
	ctx := context.Background()
	const g, rounds = 3, 4
	cfg := MoEConfig{Tokens: 6, TopK: 3, Hidden: 16, Experts: 6, LowLatency: true}
	runRanks(t, g, false, true, 8, testOpts, func(e *rankEnv) error {
		m, err := e.c.NewMoE(ctx, cfg)
		if err != nil {
			return err
		}
		r := e.c.Rank()
		rng := rand.New(rand.NewSource(4))
		var ins [rounds][]moeRouting
		var bs [rounds]moeLLBufs
		full := []int{cfg.Tokens, cfg.Tokens, cfg.Tokens}
		for i := range bs {
			ins[i] = moeInputs(rng, g, m.Config(), i%3)
			if bs[i], err = moeLLInputs(e, m.Config(), ins[i][r]); err != nil {
				return err
			}
		}
		for i, b := range bs {
			if err := m.Dispatch(ctx, b.x, b.ids); err != nil {
				return fmt.Errorf("round %d: %w", i, err)
			}
			if err := m.Combine(ctx, m.Recv(), b.w, b.out); err != nil {
				return fmt.Errorf("round %d: %w", i, err)
			}
		}
		for i, b := range bs {
			if err := moeLLCheckOut(e, m.Config(), ins[i], full, b.out, func(x float32, _ int) float32 { return x }); err != nil {
				return fmt.Errorf("round %d: %w", i, err)
			}
		}
		return m.Check(ctx)
	})
}

// TestMoELowLatencyCapture captures a dispatch and a combine (identity experts) on a
// CaptureSafe Comm at 2 and 4 ranks (weak memory) and replays the graph three times back to
// back with no host step, then with other inputs in the same buffers (every pair to one
// expert), then calls both directly; each time out is checked against the reference. The
// call counts live on the device, so replays and direct calls mix.
func TestMoELowLatencyCapture(t *testing.T) {
	ctx := context.Background()
	for _, g := range []int{2, 4} {
		cfg := MoEConfig{Tokens: 5, TopK: 3, Hidden: 16, Experts: 2 * g, LowLatency: true}
		runRanks(t, g, false, true, int64(g), Options{}, func(e *rankEnv) error {
			return withStream(e, graphOpts, func(c *Comm, s *jit.Stream) error {
				normal := cfg
				normal.LowLatency = false
				if _, err := c.NewMoE(ctx, normal); err == nil || !strings.Contains(err.Error(), "set MoEConfig.LowLatency") {
					return fmt.Errorf("a normal-mode MoE on a CaptureSafe Comm: %v, want a refusal naming LowLatency", err)
				}
				m, err := c.NewMoE(ctx, cfg)
				if err != nil {
					return err
				}
				r := c.Rank()
				rng := rand.New(rand.NewSource(5))
				in := moeInputs(rng, g, m.Config(), 0)
				b, err := moeLLInputs(e, m.Config(), in[r])
				if err != nil {
					return err
				}
				full := make([]int, g)
				for i := range full {
					full[i] = cfg.Tokens
				}
				identity := func(x float32, _ int) float32 { return x }
				call := func() error {
					if err := m.Dispatch(ctx, b.x, b.ids); err != nil {
						return err
					}
					return m.Combine(ctx, m.Recv(), b.w, b.out)
				}
				if err := call(); err != nil { // warm-up: loads the kernels outside the capture
					return err
				}
				x, err := c.Capture(ctx, call)
				if err != nil {
					return err
				}
				defer x.Close()
				if last := c.LastAlgorithm(); last != "moe_ll_combine" {
					return fmt.Errorf("captured %s, want moe_ll_combine", last)
				}
				for rep := 0; rep < 3; rep++ {
					if err := x.Launch(s); err != nil {
						return fmt.Errorf("replay %d: %w", rep, err)
					}
				}
				if err := moeLLCheckOut(e, m.Config(), in, full, b.out, identity); err != nil {
					return fmt.Errorf("after 3 replays: %w", err)
				}
				// Other inputs in the same buffers: meet first, so that no rank still replays.
				if err := e.r.NVSHMEM.BarrierAll(); err != nil {
					return err
				}
				in = moeInputs(rng, g, m.Config(), 1)
				idf := make([]float32, len(in[r].ids))
				for i, id := range in[r].ids {
					idf[i] = float32(id)
				}
				for _, err := range []error{b.x.WriteF32(in[r].x), b.ids.WriteF32(idf), b.w.WriteF32(in[r].w)} {
					if err != nil {
						return err
					}
				}
				if err := e.r.NVSHMEM.BarrierAll(); err != nil {
					return err
				}
				if err := x.Launch(s); err != nil {
					return err
				}
				if err := moeLLCheckOut(e, m.Config(), in, full, b.out, identity); err != nil {
					return fmt.Errorf("replay with other inputs: %w", err)
				}
				if err := call(); err != nil {
					return err
				}
				if err := moeLLCheckOut(e, m.Config(), in, full, b.out, identity); err != nil {
					return fmt.Errorf("direct call after the replays: %w", err)
				}
				return m.Check(ctx)
			})
		})
	}
}

// TestMoELowLatencyErrors: bad configurations and calls are refused naming the field or
// operand; bad ids are reported by Check on every rank.
func TestMoELowLatencyErrors(t *testing.T) {
	ctx := context.Background()
	runRanks(t, 2, false, false, 1, testOpts, func(e *rankEnv) error {
		if _, err := e.c.NewMoE(ctx, MoEConfig{Tokens: 4, TopK: 1, Hidden: 8, Experts: 2, Capacity: 8, LowLatency: true}); err == nil || !strings.Contains(err.Error(), "Capacity 8 with LowLatency") {
			return fmt.Errorf("Capacity with LowLatency: %v", err)
		}
		if _, err := e.c.NewMoE(ctx, MoEConfig{Tokens: 4, TopK: 65, Hidden: 8, Experts: 66, LowLatency: true}); err == nil || !strings.Contains(err.Error(), "TopK 65 with LowLatency: want at most 64") {
			return fmt.Errorf("TopK 65: %v", err)
		}
		if _, err := e.c.NewMoE(ctx, MoEConfig{Tokens: 4, TopK: 1, Hidden: 12, Experts: 2, LowLatency: true}); err == nil || !strings.Contains(err.Error(), "Hidden 12") {
			return fmt.Errorf("Hidden 12: %v", err)
		}
		cfg := MoEConfig{Tokens: 4, TopK: 2, Hidden: 8, Experts: 2, LowLatency: true}
		m, err := e.c.NewMoE(ctx, cfg)
		if err != nil {
			return err
		}
		x, _ := e.c.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
		ids, _ := e.c.Alloc(dsl.I32, cfg.Tokens*cfg.TopK)
		w, _ := e.c.Alloc(dsl.F32, cfg.Tokens*cfg.TopK)
		out, _ := e.c.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
		if err := m.DispatchTokens(ctx, x, ids, 5); err == nil || !strings.Contains(err.Error(), "n 5") {
			return fmt.Errorf("n 5: %v", err)
		}
		if err := m.Combine(ctx, m.Recv(), w, out); err == nil || !strings.Contains(err.Error(), "before any MoE.Dispatch") {
			return fmt.Errorf("combine first: %v", err)
		}
		v := []float32{7, -1, -1, -1, -1, -1, -1, -1}
		if e.c.Rank() == 1 {
			v = []float32{0, 0, -3, 1, 1, 1, -1, -1}
		}
		if err := ids.WriteF32(v); err != nil {
			return err
		}
		if err := m.Dispatch(ctx, x, ids); err != nil {
			return err
		}
		if err := m.Check(ctx); err == nil || !strings.Contains(err.Error(), "2 expert ids outside [-1, 2)") {
			return fmt.Errorf("Check = %v, want the 2 bad ids", err)
		}
		if err := m.Combine(ctx, m.Recv(), w, m.Recv()); err == nil || !strings.Contains(err.Error(), "out is y") {
			return fmt.Errorf("out is y: %v", err)
		}
		nm, err := e.c.NewMoE(ctx, MoEConfig{Tokens: 4, TopK: 2, Hidden: 8, Experts: 2})
		if err != nil {
			return err
		}
		if err := nm.DispatchTokens(ctx, x, ids, 2); err == nil || !strings.Contains(err.Error(), "not low-latency") {
			return fmt.Errorf("DispatchTokens of a normal MoE: %v", err)
		}
		return nil
	})
}

// TestMoELowLatencyNoTokens: a rank that sends no tokens (n = 0) still takes part (its
// counters, its experts' rows from the others), at 2 and 3 ranks, for three rounds.
func TestMoELowLatencyNoTokens(t *testing.T) {
	ctx := context.Background()
	for _, g := range []int{2, 3} {
		runRanks(t, g, false, true, 6, testOpts, func(e *rankEnv) error {
			m, err := e.c.NewMoE(ctx, MoEConfig{Tokens: 4, TopK: 2, Hidden: 8, Experts: 2 * g, LowLatency: true})
			if err != nil {
				return err
			}
			rng := rand.New(rand.NewSource(int64(g)))
			for round := 0; round < 3; round++ {
				n := make([]int, g)
				for s := range n {
					n[s] = 4
				}
				n[round%g] = 0
				if err := moeLLRound(ctx, e, m, moeInputs(rng, g, m.Config(), 0), n, round == 1); err != nil {
					return fmt.Errorf("round %d (GPU %d sends nothing): %w", round, round%g, err)
				}
			}
			return nil
		})
	}
}
