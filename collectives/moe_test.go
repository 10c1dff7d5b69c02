package collectives

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// moeRouting is one rank's inputs: tokens, ids and weights.
type moeRouting struct {
	x   []float32 // [T, H], multiples of 1/4 in [-4, 4]
	ids []int32   // [T, K]
	w   []float32 // [T, K], multiples of 1/4 in [0, 1]
}

// moeInputs makes every rank's inputs (the same on every rank: one seed); skew sends every
// pair to expert 0 (or the last expert), else ids are random in [-1, E), duplicates allowed.
func moeInputs(rng *rand.Rand, g int, cfg MoEConfig, skew int) []moeRouting {
	out := make([]moeRouting, g)
	for r := range out {
		x := make([]float32, cfg.Tokens*cfg.Hidden)
		for i := range x {
			x[i] = float32(rng.Intn(33)-16) / 4
		}
		ids := make([]int32, cfg.Tokens*cfg.TopK)
		w := make([]float32, len(ids))
		for i := range ids {
			switch skew {
			case 1:
				ids[i] = 0
			case 2:
				ids[i] = int32(cfg.Experts - 1)
			default:
				ids[i] = int32(rng.Intn(cfg.Experts+1) - 1)
			}
			w[i] = float32(rng.Intn(5)) / 4
		}
		out[r] = moeRouting{x, ids, w}
	}
	return out
}

// moeWant is the Go reference of a dispatch: every GPU's received rows (x rows, in layout
// order), their sources, and per-local-expert counts.
func moeWant(in []moeRouting, cfg MoEConfig, g int) (rows [][][]float32, src [][]int32, counts [][]int32) {
	el := cfg.Experts / g
	rows, src, counts = make([][][]float32, g), make([][]int32, g), make([][]int32, g)
	for d := 0; d < g; d++ {
		counts[d] = make([]int32, el)
		for j := 0; j < el; j++ {
			e := int32(d*el + j)
			for s := 0; s < g; s++ {
				for i, id := range in[s].ids {
					if id != e {
						continue
					}
					t := i / cfg.TopK
					rows[d] = append(rows[d], in[s].x[t*cfg.Hidden:(t+1)*cfg.Hidden])
					src[d] = append(src[d], int32(s*len(in[s].ids)+i))
					counts[d][j]++
				}
			}
		}
	}
	return rows, src, counts
}

func bf16(x float64) float32 { return fp.BF16ToF32(fp.F32ToBF16(float32(x))) }

// moeCheckDispatch compares this rank's Recv, Src, Counts and Offsets with the reference.
func moeCheckDispatch(e *rankEnv, m *MoE, in []moeRouting) error {
	cfg, g, r := m.Config(), e.c.NumGPUs(), e.c.Rank()
	rows, src, counts := moeWant(in, cfg, g)
	gotC, err := m.Counts().ReadF32()
	if err != nil {
		return err
	}
	gotO, err := m.Offsets().ReadF32()
	if err != nil {
		return err
	}
	off := 0
	for j, c := range counts[r] {
		if int(gotC[j]) != int(c) || int(gotO[j]) != off {
			return fmt.Errorf("GPU %d expert %d: count %v offset %v, want %d %d", r, j, gotC[j], gotO[j], c, off)
		}
		off += int(c)
	}
	if int(gotO[len(counts[r])]) != off {
		return fmt.Errorf("GPU %d: %v rows received, want %d", r, gotO[len(counts[r])], off)
	}
	if err := moeCheckTokens(e, m, in); err != nil {
		return err
	}
	recv, err := m.Recv().ReadF32()
	if err != nil {
		return err
	}
	gotS, err := m.Src().ReadF32()
	if err != nil {
		return err
	}
	for i, row := range rows[r] {
		if int32(gotS[i]) != src[r][i] {
			return fmt.Errorf("GPU %d row %d: source %v, want %d", r, i, gotS[i], src[r][i])
		}
		for c, x := range row {
			if got := recv[i*cfg.Hidden+c]; got != x {
				return fmt.Errorf("GPU %d row %d col %d: %v, want %v", r, i, c, got, x)
			}
		}
	}
	return nil
}

// moeExpert is the test's expert: y = x * (1 + j%2) + (j%4)/4 for local expert j (exact in
// bf16 for these inputs, and so are the combine's f32 sums), applied on the host to Recv.
func moeExpert(x float32, j int) float32 { return x*float32(1+j%2) + float32(j%4)/4 }

// moeWantCombine is out on GPU r: per GPU d in order, the sum over k in order of w *
// expert(x) for the token's pairs on d, rounded; then the sum of those, rounded.
func moeWantCombine(in []moeRouting, cfg MoEConfig, g, r int, expert func(x float32, e int) float32) []float32 {
	return moeWantCombineKept(in, cfg, g, r, expert, nil)
}

// moeWantCombineKept is moeWantCombine counting only the pairs i of GPU r with kept(i)
// (nil: all).
func moeWantCombineKept(in []moeRouting, cfg MoEConfig, g, r int, expert func(x float32, e int) float32, kept func(i int) bool) []float32 {
	out := make([]float32, cfg.Tokens*cfg.Hidden)
	el := cfg.Experts / g
	for t := 0; t < cfg.Tokens; t++ {
		for c := 0; c < cfg.Hidden; c++ {
			var acc float64
			for d := 0; d < g; d++ {
				var part float64
				for k := 0; k < cfg.TopK; k++ {
					id := in[r].ids[t*cfg.TopK+k]
					if id < 0 || int(id) >= cfg.Experts || int(id)/el != d || kept != nil && !kept(t*cfg.TopK+k) {
						continue
					}
					part += float64(in[r].w[t*cfg.TopK+k]) * float64(expert(in[r].x[t*cfg.Hidden+c], int(id)))
				}
				acc += float64(bf16(part))
			}
			out[t*cfg.Hidden+c] = bf16(acc)
		}
	}
	return out
}

// moeOnGPU reports whether token t of routing in has an expert on GPU d.
func moeOnGPU(in moeRouting, cfg MoEConfig, el, t, d int) bool {
	for k := 0; k < cfg.TopK; k++ {
		if id := int(in.ids[t*cfg.TopK+k]); id >= 0 && id < cfg.Experts && id/el == d {
			return true
		}
	}
	return false
}

// moeCheckTokens checks that this rank's token buffer holds each token bound for it exactly
// once (by source rank, then token; the slots of its own tokens are not written), and the
// status's tokens received and sent.
func moeCheckTokens(e *rankEnv, m *MoE, in []moeRouting) error {
	cfg, g, r := m.Config(), e.c.NumGPUs(), e.c.Rank()
	el := cfg.Experts / g
	var want [][2]int
	for s := 0; s < g; s++ {
		for t := 0; t < cfg.Tokens; t++ {
			if moeOnGPU(in[s], cfg, el, t, r) {
				want = append(want, [2]int{s, t})
			}
		}
	}
	sent := 0
	for t := 0; t < cfg.Tokens; t++ {
		for d := 0; d < g; d++ {
			if d != r && moeOnGPU(in[r], cfg, el, t, d) {
				sent++
			}
		}
	}
	st, err := (&Buffer{c: m.c, s: m.status, dt: dsl.I32, n: kernels.MoEStatusWords}).ReadF32()
	if err != nil {
		return err
	}
	if int(st[2]) != len(want) || int(st[3]) != sent {
		return fmt.Errorf("GPU %d: status says %v tokens received, %v sent to other GPUs; want %d, %d", r, st[2], st[3], len(want), sent)
	}
	slots, err := (&Buffer{c: m.c, s: m.slotIdx, dt: dsl.I32, n: g * cfg.Tokens}).ReadF32()
	if err != nil {
		return err
	}
	tok, err := (&Buffer{c: m.c, s: m.tok, dt: dsl.BF16, n: g * cfg.Tokens * cfg.Hidden}).ReadF32()
	if err != nil {
		return err
	}
	wantSlot := make([]int32, g*cfg.Tokens)
	for i := range wantSlot {
		wantSlot[i] = -1 // MoENone as i32
	}
	for i, p := range want {
		wantSlot[p[0]*cfg.Tokens+p[1]] = int32(i)
	}
	for i, w := range wantSlot {
		if int32(slots[i]) != w {
			return fmt.Errorf("GPU %d: rank %d token %d in token slot %v, want %d (-1: not sent here)", r, i/cfg.Tokens, i%cfg.Tokens, slots[i], w)
		}
	}
	for i, p := range want {
		if p[0] == r {
			continue // this GPU's own tokens go straight to Recv
		}
		for c := 0; c < cfg.Hidden; c++ {
			if got, x := tok[i*cfg.Hidden+c], in[p[0]].x[p[1]*cfg.Hidden+c]; got != x {
				return fmt.Errorf("GPU %d token slot %d col %d: %v, want %v", r, i, c, got, x)
			}
		}
	}
	return nil
}

// moeRound runs one dispatch and combine on every rank and checks both against the
// reference; identity makes y the receive buffer itself (no host step between the launches).
func moeRound(ctx context.Context, e *rankEnv, m *MoE, in []moeRouting, identity bool) error {
	cfg, g, r := m.Config(), e.c.NumGPUs(), e.c.Rank()
	x, err := e.c.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
	if err != nil {
		return err
	}
	ids, _ := e.c.Alloc(dsl.I32, cfg.Tokens*cfg.TopK)
	w, _ := e.c.Alloc(dsl.F32, cfg.Tokens*cfg.TopK)
	out, _ := e.c.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
	idf := make([]float32, len(in[r].ids))
	for i, id := range in[r].ids {
		idf[i] = float32(id)
	}
	for _, err := range []error{x.WriteF32(in[r].x), ids.WriteF32(idf), w.WriteF32(in[r].w)} {
		if err != nil {
			return err
		}
	}
	if err := m.Dispatch(ctx, x, ids); err != nil {
		return err
	}
	expert := func(x float32, e int) float32 { return x }
	y := m.Recv()
	if !identity {
		if err := moeCheckDispatch(e, m, in); err != nil {
			return err
		}
		if y, err = e.c.Alloc(dsl.BF16, cfg.Capacity*cfg.Hidden); err != nil {
			return err
		}
		recv, _ := m.Recv().ReadF32()
		off, _ := m.Offsets().ReadF32()
		for j := 0; j < len(off)-1; j++ {
			for row := int(off[j]); row < int(off[j+1]); row++ {
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
	if err := m.Combine(ctx, y, w, out); err != nil {
		return err
	}
	got, err := out.ReadF32()
	if err != nil {
		return err
	}
	want := moeWantCombine(in, cfg, g, r, expert)
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("combine: GPU %d token %d col %d = %v, want %v", r, i/cfg.Hidden, i%cfg.Hidden, got[i], want[i])
		}
	}
	return m.Check(ctx)
}

// TestMoE runs dispatch and combine on 1..8 emulated GPUs against the Go reference: random
// routing with -1 and duplicates, every pair to one expert, k = 1 and 8, hidden 24 (not a
// multiple of 16), back to back with other routings on one MoE.
func TestMoE(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		gpus int
		cfg  MoEConfig
		skew []int // the rounds' routings
		weak bool
	}{
		{1, MoEConfig{Tokens: 5, TopK: 2, Hidden: 16, Experts: 3}, []int{0, 1}, false},
		{2, MoEConfig{Tokens: 7, TopK: 1, Hidden: 24, Experts: 4}, []int{0, 2, 0}, false},
		{3, MoEConfig{Tokens: 4, TopK: 3, Hidden: 8, Experts: 6}, []int{0, 1}, true},
		{4, MoEConfig{Tokens: 6, TopK: 8, Hidden: 24, Experts: 8}, []int{0, 1, 0}, true},
		{8, MoEConfig{Tokens: 3, TopK: 2, Hidden: 8, Experts: 16}, []int{0, 2}, false},
		// several blocks in every kernel: 513 count columns, 400 pairs x 3 vectors, 300 token vectors
		{2, MoEConfig{Tokens: 100, TopK: 4, Hidden: 24, Experts: 512}, []int{0}, true},
	} {
		t.Run(fmt.Sprintf("g%d/k%d/h%d/e%d", c.gpus, c.cfg.TopK, c.cfg.Hidden, c.cfg.Experts), func(t *testing.T) {
			runRanks(t, c.gpus, false, c.weak, 3, testOpts, func(e *rankEnv) error {
				m, err := e.c.NewMoE(ctx, c.cfg)
				if err != nil {
					return err
				}
				rng := rand.New(rand.NewSource(int64(c.gpus)))
				for round, skew := range c.skew {
					in := moeInputs(rng, c.gpus, m.Config(), skew)
					if err := moeRound(ctx, e, m, in, false); err != nil {
						return fmt.Errorf("round %d: %w", round, err)
					}
				}
				return nil
			})
		})
	}
}

// TestMoEBackToBack runs dispatch, combine (the experts the identity: y is Recv),
// dispatch with another routing, combine, with no host step between the ranks' launches, and
// an all-reduce between rounds on the same Comm (with multicast: its flags and the MoE's
// signal pads keep their epochs apart).
func TestMoEBackToBack(t *testing.T) {
	ctx := context.Background()
	cfg := MoEConfig{Tokens: 5, TopK: 2, Hidden: 24, Experts: 8}
	for _, mc := range []bool{false, true} {
		runRanks(t, 4, mc, true, 5, testOpts, func(e *rankEnv) error {
			m, err := e.c.NewMoE(ctx, cfg)
			if err != nil {
				return err
			}
			ar, err := e.c.Alloc(dsl.F32, 300)
			if err != nil {
				return err
			}
			rng := rand.New(rand.NewSource(9))
			for round := 0; round < 3; round++ {
				in := moeInputs(rng, 4, m.Config(), round%2)
				if err := moeRound(ctx, e, m, in, true); err != nil {
					return fmt.Errorf("multicast %v round %d: %w", mc, round, err)
				}
				vals, err := e.fill(ar)
				if err != nil {
					return err
				}
				if err := e.c.AllReduce(ctx, ar, Sum); err != nil {
					return err
				}
				if err := e.expect("AllReduce between MoE rounds", ar, func(_, i int) float64 { return reduce(Sum, dsl.F32, vals, i) }); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// TestMoEErrors: bad shapes name the field; bad ids and a too small capacity are reported by
// Check on every rank, and the rows that fit still arrive.
func TestMoEErrors(t *testing.T) {
	ctx := context.Background()
	runRanks(t, 2, false, false, 1, testOpts, func(e *rankEnv) error {
		for _, c := range []struct {
			cfg  MoEConfig
			want string
		}{
			{MoEConfig{Tokens: 4, TopK: 1, Hidden: 12, Experts: 2}, "Hidden 12"},
			{MoEConfig{Tokens: 4, TopK: 1, Hidden: 8, Experts: 3}, "Experts 3"},
			{MoEConfig{Tokens: 0, TopK: 1, Hidden: 8, Experts: 2}, "Tokens 0"},
			{MoEConfig{Tokens: 4, TopK: 0, Hidden: 8, Experts: 2}, "TopK 0"},
			{MoEConfig{Tokens: 4, TopK: 1, Hidden: 8, Experts: 2, Capacity: -1}, "Capacity -1"},
		} {
			if _, err := e.c.NewMoE(ctx, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
				return fmt.Errorf("NewMoE(%+v) = %v, want an error naming %q", c.cfg, err, c.want)
			}
		}
		cfg := MoEConfig{Tokens: 4, TopK: 2, Hidden: 8, Experts: 2, Capacity: 3}
		m, err := e.c.NewMoE(ctx, cfg)
		if err != nil {
			return err
		}
		x, _ := e.c.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
		ids, _ := e.c.Alloc(dsl.I32, cfg.Tokens*cfg.TopK)
		small, _ := e.c.Alloc(dsl.I32, 1)
		w, _ := e.c.Alloc(dsl.F32, cfg.Tokens*cfg.TopK)
		if err := m.Dispatch(ctx, x, small); err == nil || !strings.Contains(err.Error(), "ids holds 1 s32") {
			return fmt.Errorf("short ids: %v", err)
		}
		if err := m.Combine(ctx, m.Recv(), w, x); err == nil || !strings.Contains(err.Error(), "before any MoE.Dispatch") {
			return fmt.Errorf("combine first: %v", err)
		}
		// Rank 0 sends one bad id (7) and -1s; rank 1 sends 5 rows to expert 0 (capacity 3).
		v := []float32{7, -1, -1, -1, -1, -1, -1, -1}
		if e.c.Rank() == 1 {
			v = []float32{0, 0, 0, 0, 0, -1, -1, -1}
		}
		if err := ids.WriteF32(v); err != nil {
			return err
		}
		if err := m.Dispatch(ctx, x, ids); err != nil {
			return err
		}
		err = m.Check(ctx)
		if err == nil || !strings.Contains(err.Error(), "1 expert ids outside [-1, 2)") || !strings.Contains(err.Error(), "receives 5 rows, past MoEConfig.Capacity 3") {
			return fmt.Errorf("Check = %v, want the bad id and the capacity", err)
		}
		if err := m.Combine(ctx, m.Recv(), w, m.Recv()); err == nil || !strings.Contains(err.Error(), "out is y") {
			return fmt.Errorf("out is y: %v", err)
		}
		return nil
	})
}

// TestMoEQueued queues three rounds of dispatch and combine (identity experts) with every
// input written first and every output read last: no host synchronization anywhere between
// the launches, on any rank.
func TestMoEQueued(t *testing.T) {
	ctx := context.Background()
	cfg := MoEConfig{Tokens: 6, TopK: 3, Hidden: 16, Experts: 6}
	const rounds = 3
	runRanks(t, 3, false, true, 8, testOpts, func(e *rankEnv) error {
		m, err := e.c.NewMoE(ctx, cfg)
		if err != nil {
			return err
		}
		r := e.c.Rank()
		rng := rand.New(rand.NewSource(4))
		type bufs struct{ x, ids, w, out *Buffer }
		var ins [rounds][]moeRouting
		var bs [rounds]bufs
		for i := range bs {
			ins[i] = moeInputs(rng, 3, m.Config(), i%3)
			b := &bs[i]
			for _, a := range []struct {
				p  **Buffer
				dt dsl.Type
				n  int
			}{{&b.x, dsl.BF16, cfg.Tokens * cfg.Hidden}, {&b.ids, dsl.I32, cfg.Tokens * cfg.TopK}, {&b.w, dsl.F32, cfg.Tokens * cfg.TopK}, {&b.out, dsl.BF16, cfg.Tokens * cfg.Hidden}} {
				if *a.p, err = e.c.Alloc(a.dt, a.n); err != nil {
					return err
				}
			}
			idf := make([]float32, len(ins[i][r].ids))
			for j, id := range ins[i][r].ids {
				idf[j] = float32(id)
			}
			for _, err := range []error{b.x.WriteF32(ins[i][r].x), b.ids.WriteF32(idf), b.w.WriteF32(ins[i][r].w)} {
				if err != nil {
					return err
				}
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
			got, err := b.out.ReadF32()
			if err != nil {
				return err
			}
			want := moeWantCombine(ins[i], cfg, 3, r, func(x float32, _ int) float32 { return x })
			for j := range want {
				if got[j] != want[j] {
					return fmt.Errorf("round %d: GPU %d token %d col %d = %v, want %v", i, r, j/cfg.Hidden, j%cfg.Hidden, got[j], want[j])
				}
			}
		}
		return m.Check(ctx)
	})
}

// moeCopyExpert returns an expert that is a kernel of this rank's device (tiled_copy of the
// receive buffer into y, in stream order before the combine): the combine's first barrier
// must order it before the peers read y.
func moeCopyExpert(e *rankEnv) (func(dst, src *Buffer) error, error) {
	spec, err := kernels.Find(kernels.ID{Family: "tiled_copy", DType: dsl.F32})
	if err != nil {
		return nil, err
	}
	b, err := spec.BuildVariant(kernels.Config{Target: ptx.SM90, DType: dsl.F32})
	if err != nil {
		return nil, err
	}
	m, err := e.r.Device.Load(jit.Source{Module: b.Module, Params: map[string][]jit.ParamInfo{b.Entry: jit.ParamInfos(b.Params)}})
	if err != nil {
		return nil, err
	}
	f, err := m.Function(b.Entry)
	if err != nil {
		return nil, err
	}
	return func(dst, src *Buffer) error {
		words := src.Bytes() / 4 // bf16 pairs copied as f32 words: bit for bit
		per := kernels.TiledCopyElems(dsl.F32)
		return f.LaunchArgs(jit.LaunchConfig{Grid: jit.D1((words + per - 1) / per), Block: jit.D1(256)},
			launch.Copy[float32]{Src: jit.TypedPtr[float32](src.DevPtr()), Dst: jit.TypedPtr[float32](dst.DevPtr()), N: uint32(words)})
	}, nil
}

// TestMoEExpertKernel runs dispatch, an expert kernel writing y from the receive buffer,
// and combine, three rounds queued with no host step, in the weak memory model.
func TestMoEExpertKernel(t *testing.T) {
	ctx := context.Background()
	cfg := MoEConfig{Tokens: 7, TopK: 2, Hidden: 16, Experts: 3}
	const rounds = 3
	runRanks(t, 3, false, true, 12, testOpts, func(e *rankEnv) error {
		m, err := e.c.NewMoE(ctx, cfg)
		if err != nil {
			return err
		}
		expert, err := moeCopyExpert(e)
		if err != nil {
			return err
		}
		r := e.c.Rank()
		y, err := e.c.Alloc(dsl.BF16, m.Config().Capacity*cfg.Hidden)
		if err != nil {
			return err
		}
		rng := rand.New(rand.NewSource(6))
		var ins [rounds][]moeRouting
		var outs [rounds]*Buffer
		var xs, ids, ws [rounds]*Buffer
		for i := range ins {
			ins[i] = moeInputs(rng, 3, m.Config(), 0)
			xs[i], _ = e.c.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
			ids[i], _ = e.c.Alloc(dsl.I32, cfg.Tokens*cfg.TopK)
			ws[i], _ = e.c.Alloc(dsl.F32, cfg.Tokens*cfg.TopK)
			if outs[i], err = e.c.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden); err != nil {
				return err
			}
			idf := make([]float32, len(ins[i][r].ids))
			for j, id := range ins[i][r].ids {
				idf[j] = float32(id)
			}
			for _, err := range []error{xs[i].WriteF32(ins[i][r].x), ids[i].WriteF32(idf), ws[i].WriteF32(ins[i][r].w)} {
				if err != nil {
					return err
				}
			}
		}
		for i := range ins {
			if err := m.Dispatch(ctx, xs[i], ids[i]); err != nil {
				return err
			}
			if err := expert(y, m.Recv()); err != nil {
				return err
			}
			if err := m.Combine(ctx, y, ws[i], outs[i]); err != nil {
				return err
			}
		}
		for i := range ins {
			got, err := outs[i].ReadF32()
			if err != nil {
				return err
			}
			want := moeWantCombine(ins[i], cfg, 3, r, func(x float32, _ int) float32 { return x })
			for j := range want {
				if got[j] != want[j] {
					return fmt.Errorf("round %d: GPU %d token %d col %d = %v, want %v", i, r, j/cfg.Hidden, j%cfg.Hidden, got[j], want[j])
				}
			}
		}
		return nil
	})
}

// TestMoEAcrossNodes: the MoE kernels reach one node's GPUs only (peer pointers); across
// emulated nodes NewMoE refuses, naming the ranks out of reach.
func TestMoEAcrossNodes(t *testing.T) {
	ctx := context.Background()
	err := runNodesErr(4, 2, false, false, 1, testOpts, func(e *rankEnv) error {
		_, err := e.c.NewMoE(ctx, MoEConfig{Tokens: 4, TopK: 1, Hidden: 8, Experts: 4})
		if err == nil || !strings.Contains(err.Error(), "runs on one node only") {
			return fmt.Errorf("NewMoE across 2 nodes: %v, want a refusal", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMoECapacityCombine: with a Capacity that some GPU's rows exceed, the rows that fit
// arrive in place, Check reports the rest, and the combine sums exactly the pairs that were
// kept (a token whose every pair on a GPU was dropped still gets that GPU's zero partial).
func TestMoECapacityCombine(t *testing.T) {
	ctx := context.Background()
	const g = 3
	cfg := MoEConfig{Tokens: 9, TopK: 4, Hidden: 16, Experts: 6, Capacity: 20}
	runRanks(t, g, false, true, 4, testOpts, func(e *rankEnv) error {
		m, err := e.c.NewMoE(ctx, cfg)
		if err != nil {
			return err
		}
		r := e.c.Rank()
		in := moeInputs(rand.New(rand.NewSource(11)), g, cfg, 0)
		for s := range in { // skew half the pairs to expert 0, so GPU 0 overflows
			for i := 0; i < len(in[s].ids); i += 2 {
				in[s].ids[i] = 0
			}
		}
		_, src, _ := moeWant(in, cfg, g)
		dropped := map[int32]bool{}
		for d := range src {
			for row, sidx := range src[d] {
				if row >= cfg.Capacity {
					dropped[sidx] = true
				}
			}
		}
		if len(dropped) == 0 {
			return fmt.Errorf("the routing overflows no GPU: the test checks nothing")
		}
		x, _ := e.c.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
		ids, _ := e.c.Alloc(dsl.I32, cfg.Tokens*cfg.TopK)
		w, _ := e.c.Alloc(dsl.F32, cfg.Tokens*cfg.TopK)
		out, err := e.c.Alloc(dsl.BF16, cfg.Tokens*cfg.Hidden)
		if err != nil {
			return err
		}
		idf := make([]float32, len(in[r].ids))
		for i, id := range in[r].ids {
			idf[i] = float32(id)
		}
		for _, err := range []error{x.WriteF32(in[r].x), ids.WriteF32(idf), w.WriteF32(in[r].w)} {
			if err != nil {
				return err
			}
		}
		if err := m.Dispatch(ctx, x, ids); err != nil {
			return err
		}
		if err := m.Combine(ctx, m.Recv(), w, out); err != nil {
			return err
		}
		if err := m.Check(ctx); err == nil || !strings.Contains(err.Error(), "past MoEConfig.Capacity 20") {
			return fmt.Errorf("Check = %v, want the capacity reported", err)
		}
		got, err := out.ReadF32()
		if err != nil {
			return err
		}
		pairs := int32(cfg.Tokens * cfg.TopK)
		want := moeWantCombineKept(in, cfg, g, r, func(x float32, _ int) float32 { return x },
			func(i int) bool { return !dropped[int32(r)*pairs+int32(i)] })
		for j := range want {
			if got[j] != want[j] {
				return fmt.Errorf("GPU %d token %d col %d = %v, want %v", r, j/cfg.Hidden, j%cfg.Hidden, got[j], want[j])
			}
		}
		return nil
	})
}
