package ref

import (
	"errors"
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
)

// The low-latency MoE kernels' check: moe_ll_dispatch then moe_ll_combine (the run's kernel
// among them) on the problem's GPUs, collLaunches rounds with fresh routings (-1 and repeated
// experts; round 1 everything to the last expert; fewer tokens than the maximum on some GPUs
// in round 2), no resets, the call counts starting at the problem's Epoch (the counters at
// Epoch*grid, so their targets cross the u32 wrap from near it). The experts are the
// identity (combine reads Recv). Checked: Counts, Src and Recv's rows of every local expert
// (masked layout), the status, and out, against moeLLRef.

var moeLLFamilies = []kernels.Family{kernels.FamilyMoELLDispatch, kernels.FamilyMoELLCombine}

func init() {
	for _, f := range moeLLFamilies {
		register(string(f), moeLLPipeline)
	}
}

// moeLLRef is GPU d's received rows in the reference: per local expert, the (source GPU,
// pair) of each row (the first k of a token naming the expert), by source, then token.
func moeLLRef(ids [][]int32, n []int, s moeShape, d int) [][][2]int {
	out := make([][][2]int, s.el)
	for j := range out {
		for g := range ids {
			for t := 0; t < n[g]; t++ {
				for k := 0; k < s.k; k++ {
					if int(ids[g][t*s.k+k]) == d*s.el+j {
						out[j] = append(out[j], [2]int{g, t*s.k + k})
						break
					}
				}
			}
		}
	}
	return out
}

func moeLLPipeline(r *run) error {
	c := newColl(r)
	s := newMoEShape(r.size(200), c.g)
	grid := 1 + r.size(200)%3
	r.res.Shape = fmt.Sprintf("tokens=%d k=%d h=%d experts=%d gpus=%d grid=%d", s.t, s.k, s.h, s.e, c.g, grid)
	mods, err := familyModules(r, moeLLFamilies)
	if err != nil {
		return err
	}
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
	slots := c.g * s.t
	rows := s.el * slots
	x, _ := sym(dsl.BF16, s.t*s.h, false)
	ids, _ := sym(dsl.I32, s.pairs, false)
	w, _ := sym(dsl.F32, s.pairs, false)
	recv, _ := sym(dsl.BF16, rows*s.h, false)
	counts, _ := sym(dsl.U32, s.el, false)
	src, _ := sym(dsl.U32, rows, false)
	slotRows, _ := sym(dsl.U32, slots*s.k, false)
	tmask, _ := sym(dsl.U32, s.t, false)
	rowSlot, _ := sym(dsl.U32, rows, false)
	status, _ := sym(dsl.U32, kernels.MoEStatusWords, false)
	out, _ := sym(dsl.BF16, s.t*s.h, false)
	_, tokTab := sym(dsl.BF16, 2*slots*s.h, true)
	_, tokIdsTab := sym(dsl.I32, 2*slots*s.k, true)
	_, wTab := sym(dsl.F32, 2*slots*s.k, true)
	_, partTab := sym(dsl.BF16, 2*slots*s.h, true)
	state, stateTab := sym(dsl.U32, kernels.MoELLStateWords, true)
	if err != nil {
		return err
	}
	init := make([]uint32, kernels.MoELLStateWords)
	for i := range init {
		init[i] = c.epoch * uint32(grid) // the counters
		if i < kernels.MoELLSigTokens {
			init[i] = c.epoch // the call counts
		}
	}
	for g := 0; g < c.g; g++ {
		if err := emu.WriteSlice(r.sys, state.On(g), init); err != nil {
			return err
		}
	}
	for l := 0; l < collLaunches; l++ {
		xs, ws, idv := make([][]float64, c.g), make([][]float64, c.g), make([][]int32, c.g)
		n := make([]int, c.g)
		for g := 0; g < c.g; g++ {
			n[g] = s.t
			if l == 2 {
				n[g] = s.t - g%2*(s.t/2)
			}
			xs[g], ws[g], idv[g] = make([]float64, s.t*s.h), make([]float64, s.pairs), make([]int32, s.pairs)
			for i := range xs[g] {
				xs[g][i] = float64(r.rng.Intn(33)-16) / 4
			}
			for i := range idv[g] {
				idv[g][i] = int32(r.rng.Intn(s.e+1) - 1)
				if l == 1 {
					idv[g][i] = int32(s.e - 1)
				}
				ws[g][i] = float64(r.rng.Intn(5)) / 4
			}
			if err := errors.Join(write(r.sys, x.On(g), dsl.BF16, xs[g]), write(r.sys, w.On(g), dsl.F32, ws[g]),
				emu.WriteSlice(r.sys, ids.On(g), idv[g])); err != nil {
				return err
			}
		}
		u := func(m *emu.Symmetric, g int) jit.AnyPtr { return on(m, g, dsl.U32) }
		if err := c.launchMod(mods[kernels.FamilyMoELLDispatch], string(kernels.FamilyMoELLDispatch)+"_bf16", grid, func(g int) any {
			return launch.MoELLDispatch{X: on(x, g, dsl.BF16), Recv: on(recv, g, dsl.BF16), Ids: on(ids, g, dsl.I32), Counts: u(counts, g), Src: u(src, g),
				SlotRows: u(slotRows, g), TMask: u(tmask, g), RowSlot: u(rowSlot, g), Status: u(status, g),
				Tok: table(tokTab, g), TokIds: table(tokIdsTab, g), State: table(stateTab, g),
				Rank: uint32(g), NGPUs: uint32(c.g), Tokens: uint32(n[g]), MaxT: uint32(s.t), K: uint32(s.k), H: uint32(s.h), E: uint32(s.e), EL: uint32(s.el)}
		}); err != nil {
			return fmt.Errorf("round %d: dispatch: %w", l, err)
		}
		if err := c.launchMod(mods[kernels.FamilyMoELLCombine], string(kernels.FamilyMoELLCombine)+"_bf16", grid, func(g int) any {
			return launch.MoELLCombine{Y: on(recv, g, dsl.BF16), Out: on(out, g, dsl.BF16), Weights: on(w, g, dsl.F32), SlotRows: u(slotRows, g), TMask: u(tmask, g),
				W: table(wTab, g), Part: table(partTab, g), State: table(stateTab, g),
				Rank: uint32(g), NGPUs: uint32(c.g), Tokens: uint32(n[g]), MaxT: uint32(s.t), K: uint32(s.k), H: uint32(s.h)}
		}); err != nil {
			return fmt.Errorf("round %d: combine: %w", l, err)
		}
		for d := 0; d < c.g; d++ {
			if err := moeLLCheck(c, s, d, n, idv, xs, ws, moeLLBufs{counts, src, recv, status, out}); err != nil {
				return fmt.Errorf("round %d: %w", l, err)
			}
		}
	}
	return nil
}

// moeLLBufs are the buffers moeLLCheck reads.
type moeLLBufs struct{ counts, src, recv, status, out *emu.Symmetric }

// moeLLCheck compares GPU d's counts, sources, rows, status and out with the reference.
func moeLLCheck(c *coll, s moeShape, d int, n []int, ids [][]int32, xs, ws [][]float64, b moeLLBufs) error {
	sys := c.r.sys
	want := moeLLRef(ids, n, s, d)
	rows := c.g * s.t
	gotC, err := emu.ReadSlice[uint32](sys, b.counts.On(d), s.el)
	if err != nil {
		return err
	}
	gotS, err := emu.ReadSlice[uint32](sys, b.src.On(d), s.el*rows)
	if err != nil {
		return err
	}
	gotR, err := read(sys, b.recv.On(d), dsl.BF16, s.el*rows*s.h)
	if err != nil {
		return err
	}
	st, err := emu.ReadSlice[uint32](sys, b.status.On(d), 1)
	if err != nil {
		return err
	}
	var wantC, gotCf, wantS, gotSf, wantR, gotRf []float64
	for j, ps := range want {
		wantC, gotCf = append(wantC, float64(len(ps))), append(gotCf, float64(gotC[j]))
		for i, p := range ps {
			row := j*rows + i
			wantS, gotSf = append(wantS, float64(p[0]*s.t*s.k+p[1])), append(gotSf, float64(gotS[row]))
			t := p[1] / s.k
			wantR = append(wantR, xs[p[0]][t*s.h:(t+1)*s.h]...)
			gotRf = append(gotRf, gotR[row*s.h:(row+1)*s.h]...)
		}
	}
	bad := 0
	for g := range ids {
		for _, id := range ids[g][:n[g]*s.k] {
			if id < -1 || int(id) >= s.e {
				bad++
			}
		}
	}
	wantOut := moeCombineWant(s, c.g, ids[d], ws[d], xs[d], n[d])
	gotOut, err := read(sys, b.out.On(d), dsl.BF16, len(wantOut))
	if err != nil {
		return err
	}
	return errors.Join(
		c.r.check(fmt.Sprintf("GPU %d counts", d), gotCf, wantC, 0, 0),
		c.r.check(fmt.Sprintf("GPU %d sources", d), gotSf, wantS, 0, 0),
		c.r.check(fmt.Sprintf("GPU %d rows", d), gotRf, wantR, 0, 0),
		c.r.check(fmt.Sprintf("GPU %d bad ids", d), []float64{float64(st[0])}, []float64{float64(bad)}, 0, 0),
		c.r.check(fmt.Sprintf("GPU %d out", d), gotOut, wantOut, 0, 0))
}
