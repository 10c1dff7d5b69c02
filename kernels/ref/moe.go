package ref

import (
	"errors"
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// The MoE kernels' check: the whole pipeline (moe_dispatch_count, moe_dispatch_layout,
// moe_dispatch_send, moe_combine, the run's kernel among them) on the problem's GPUs,
// collLaunches rounds with fresh routings and no resets, against moeRef. The experts are the
// identity (combine reads the receive buffer), so out[t] = sum_k w[t,k] * x[t] for the pairs
// that were routed.

func init() {
	for _, f := range []kernels.Family{kernels.FamilyMoEDispatchCount, kernels.FamilyMoEDispatchLayout,
		kernels.FamilyMoEDispatchSend, kernels.FamilyMoECombine} {
		register(string(f), moePipeline)
	}
}

// moeShape is the problem of a check of size n on g GPUs.
type moeShape struct{ t, k, h, e, el, pairs, cap, chunk, nchunks int }

func newMoEShape(n, g int) moeShape {
	s := moeShape{t: min(max(n/16, 1), 40), k: 1 + n%4, h: 8 * (1 + n%3), el: 1 + n%3}
	s.e = s.el * g
	s.pairs = s.t * s.k
	s.cap = g * s.pairs
	s.chunk = 1 + n%5 // several chunks (count blocks), some partial
	s.nchunks = (s.pairs + s.chunk - 1) / s.chunk
	return s
}

// moeRef is the Go reference of one dispatch: GPU d's received (source GPU, pair) in layout
// order (local expert, then source GPU, then pair) and its rows per local expert.
func moeRef(ids [][]int32, s moeShape, d int) (srcs [][2]int, counts []int) {
	counts = make([]int, s.el)
	for j := 0; j < s.el; j++ {
		for g := range ids {
			for i, id := range ids[g] {
				if int(id) == d*s.el+j {
					srcs = append(srcs, [2]int{g, i})
					counts[j]++
				}
			}
		}
	}
	return srcs, counts
}

func moePipeline(r *run) error {
	c := newColl(r)
	s := newMoEShape(r.size(200), c.g)
	r.res.Shape = fmt.Sprintf("tokens=%d k=%d h=%d experts=%d chunks=%dx%d gpus=%d", s.t, s.k, s.h, s.e, s.nchunks, s.chunk, c.g)
	mods := map[kernels.Family]*ptx.Module{}
	for _, f := range []kernels.Family{kernels.FamilyMoEDispatchCount, kernels.FamilyMoEDispatchLayout,
		kernels.FamilyMoEDispatchSend, kernels.FamilyMoECombine} {
		if f == r.spec.Family {
			mods[f] = r.mod
			continue
		}
		spec, err := kernels.Find(kernels.ID{Family: f, DType: dsl.BF16})
		if err != nil {
			return err
		}
		b, err := spec.BuildVariant(kernels.Config{Target: r.p.Target, DType: dsl.BF16})
		if err != nil {
			return err
		}
		mods[f] = b.Module
	}
	var err error
	sym := func(dt dsl.Type, n int, tab bool) (*emu.Symmetric, *emu.Symmetric) {
		if err != nil {
			return nil, nil
		}
		var m, t *emu.Symmetric
		if m, err = c.sym(dt, n); err == nil && tab {
			t, err = c.table(m)
		}
		return m, t
	}
	x, _ := sym(dsl.BF16, s.t*s.h, false)
	ids, _ := sym(dsl.I32, s.pairs, false)
	w, _ := sym(dsl.F32, s.pairs, false)
	pos, _ := sym(dsl.U32, s.pairs, false)
	cnt, cntTab := sym(dsl.U32, kernels.CollMaxGPUs*s.nchunks*(s.e+1), true)
	tot, _ := sym(dsl.U32, kernels.CollMaxGPUs*(s.e+1), false)
	rowStart, _ := sym(dsl.U32, s.nchunks*s.e, false)
	counts, _ := sym(dsl.U32, s.el, false)
	offsets, _ := sym(dsl.U32, s.el+1, false)
	status, _ := sym(dsl.U32, 2, false)
	route, _ := sym(dsl.U32, 2*s.pairs, false)
	recv, recvTab := sym(dsl.BF16, s.cap*s.h, true)
	src, srcTab := sym(dsl.U32, s.cap, true)
	out, _ := sym(dsl.BF16, s.t*s.h, false)
	pads, padTab := sym(dsl.U32, kernels.PadWords, true)
	if err != nil {
		return err
	}
	if err := c.fill(pads, kernels.PadWords, c.epoch); err != nil {
		return err
	}
	for l := 0; l < collLaunches; l++ {
		xs, ws, idv := make([][]float64, c.g), make([][]float64, c.g), make([][]int32, c.g)
		for g := 0; g < c.g; g++ {
			xs[g], ws[g], idv[g] = make([]float64, s.t*s.h), make([]float64, s.pairs), make([]int32, s.pairs)
			for i := range xs[g] {
				xs[g][i] = float64(r.rng.Intn(33)-16) / 4
			}
			for i := range idv[g] {
				idv[g][i] = int32(r.rng.Intn(s.e+1) - 1) // -1 included, duplicates allowed
				if l == 1 {
					idv[g][i] = int32(s.e - 1) // skewed: everything to the last expert
				}
				ws[g][i] = float64(r.rng.Intn(5)) / 4
			}
			if err := errors.Join(write(r.sys, x.On(g), dsl.BF16, xs[g]), write(r.sys, w.On(g), dsl.F32, ws[g]),
				emu.WriteSlice(r.sys, ids.On(g), idv[g])); err != nil {
				return err
			}
		}
		steps := []struct {
			f      kernels.Family
			blocks int
			args   func(g int) any
		}{
			{kernels.FamilyMoEDispatchCount, s.nchunks, func(g int) any {
				return launch.MoEDispatchCount{Ids: on(ids, g, dsl.I32), Pos: on(pos, g, dsl.U32), Cnt: table(cntTab, g), Pads: table(padTab, g),
					Rank: uint32(g), NGPUs: uint32(c.g), Pairs: uint32(s.pairs), Chunk: uint32(s.chunk), E: uint32(s.e), Epoch: c.epoch}
			}},
			{kernels.FamilyMoEDispatchLayout, 1, func(g int) any {
				return launch.MoEDispatchLayout{Cnt: on(cnt, g, dsl.U32), Tot: on(tot, g, dsl.U32), RowStart: on(rowStart, g, dsl.U32), Counts: on(counts, g, dsl.U32),
					Offsets: on(offsets, g, dsl.U32), Status: on(status, g, dsl.U32), Rank: uint32(g), NGPUs: uint32(c.g), Chunks: uint32(s.nchunks), E: uint32(s.e), EL: uint32(s.el)}
			}},
			{kernels.FamilyMoEDispatchSend, c.blocks(s.pairs * s.h / 8), func(g int) any {
				return launch.MoEDispatchSend{X: on(x, g, dsl.BF16), Ids: on(ids, g, dsl.I32), Pos: on(pos, g, dsl.U32), RowStart: on(rowStart, g, dsl.U32),
					Route: on(route, g, dsl.U32), Recv: table(recvTab, g), Src: table(srcTab, g), Pads: table(padTab, g),
					Rank: uint32(g), NGPUs: uint32(c.g), Pairs: uint32(s.pairs), Chunk: uint32(s.chunk), K: uint32(s.k), H: uint32(s.h), E: uint32(s.e), EL: uint32(s.el),
					Cap: uint32(s.cap), Epoch: c.epoch}
			}},
			{kernels.FamilyMoECombine, c.blocks(s.t * s.h / 8), func(g int) any {
				return launch.MoECombine{Y: table(recvTab, g), Route: on(route, g, dsl.U32), Weights: on(w, g, dsl.F32), Out: on(out, g, dsl.BF16),
					Pads: table(padTab, g), Rank: uint32(g), NGPUs: uint32(c.g), Pairs: uint32(s.pairs), K: uint32(s.k), H: uint32(s.h), Epoch: c.epoch}
			}},
		}
		for _, st := range steps {
			if err := c.launchMod(mods[st.f], string(st.f)+"_"+dsl.BF16.String(), st.blocks, st.args); err != nil {
				return fmt.Errorf("round %d: %s: %w", l, st.f, err)
			}
			n, _, _ := kernels.CollBarriers(st.f)
			c.epoch += uint32(n)
		}
		for d := 0; d < c.g; d++ {
			if err := moeCheck(c, s, d, idv, xs, ws, counts, offsets, status, recv, src, out); err != nil {
				return fmt.Errorf("round %d: %w", l, err)
			}
		}
	}
	return nil
}

// moeCheck compares GPU d's layout, received rows, sources and combined tokens with moeRef.
func moeCheck(c *coll, s moeShape, d int, ids [][]int32, xs, ws [][]float64, counts, offsets, status, recv, src, out *emu.Symmetric) error {
	sys := c.r.sys
	srcs, cnts := moeRef(ids, s, d)
	var wantC, wantO []float64
	off := 0
	for _, n := range cnts {
		wantC, wantO = append(wantC, float64(n)), append(wantO, float64(off))
		off += n
	}
	wantO = append(wantO, float64(off))
	gotC, err := emu.ReadSlice[uint32](sys, counts.On(d), s.el)
	if err != nil {
		return err
	}
	gotO, err := emu.ReadSlice[uint32](sys, offsets.On(d), s.el+1)
	if err != nil {
		return err
	}
	gotS, err := emu.ReadSlice[uint32](sys, src.On(d), len(srcs))
	if err != nil {
		return err
	}
	st, err := emu.ReadSlice[uint32](sys, status.On(d), 2)
	if err != nil {
		return err
	}
	var wantS, wantR []float64
	for _, p := range srcs {
		wantS = append(wantS, float64(p[0]*s.pairs+p[1]))
		t := p[1] / s.k
		wantR = append(wantR, xs[p[0]][t*s.h:(t+1)*s.h]...)
	}
	gotR, err := read(sys, recv.On(d), dsl.BF16, len(wantR))
	if err != nil {
		return err
	}
	var wantOut []float64
	for t := 0; t < s.t; t++ {
		for col := 0; col < s.h; col++ {
			var acc float64
			for k := 0; k < s.k; k++ {
				if ids[d][t*s.k+k] >= 0 {
					acc += ws[d][t*s.k+k] * xs[d][t*s.h+col]
				}
			}
			wantOut = append(wantOut, round(dsl.BF16, acc))
		}
	}
	gotOut, err := read(sys, out.On(d), dsl.BF16, len(wantOut))
	if err != nil {
		return err
	}
	most := 0
	for g := 0; g < c.g; g++ {
		_, n := moeRef(ids, s, g)
		sum := 0
		for _, x := range n {
			sum += x
		}
		most = max(most, sum)
	}
	f := func(v []uint32) []float64 {
		o := make([]float64, len(v))
		for i, x := range v {
			o[i] = float64(x)
		}
		return o
	}
	return errors.Join(
		c.r.check(fmt.Sprintf("GPU %d counts", d), f(gotC), wantC, 0, 0),
		c.r.check(fmt.Sprintf("GPU %d offsets", d), f(gotO), wantO, 0, 0),
		c.r.check(fmt.Sprintf("GPU %d status", d), f(st), []float64{0, float64(most)}, 0, 0),
		c.r.check(fmt.Sprintf("GPU %d sources", d), f(gotS), wantS, 0, 0),
		c.r.check(fmt.Sprintf("GPU %d rows", d), gotR, wantR, 0, 0),
		c.r.check(fmt.Sprintf("GPU %d out", d), gotOut, wantOut, 0, 0))
}
