package ref

import (
	"errors"
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// The MoE kernels' check: the whole pipeline (moe_dispatch_count, moe_dispatch_layout,
// moe_dispatch_send, moe_dispatch_expand, moe_combine, the run's kernel among them) on the
// problem's GPUs, collLaunches rounds with fresh routings and no resets, against moeRef. The
// experts are the identity (combine reads the receive buffer), so out[t] = the sum over GPUs d
// in order of round(sum over k of t's pairs on d of w[t,k] * x[t]). Each GPU's token buffer
// must hold each token of another GPU bound for it exactly once (the first round also checks
// that no slot past the received ones, and none of its own tokens' slots, was written: those
// go straight to the receive buffer).

var moeFamilies = []kernels.Family{kernels.FamilyMoEDispatchCount, kernels.FamilyMoEDispatchLayout,
	kernels.FamilyMoEDispatchSend, kernels.FamilyMoEDispatchExpand, kernels.FamilyMoECombine}

func init() {
	for _, f := range moeFamilies {
		register(string(f), moePipeline)
	}
}

// moeShape is the problem of a check of size n on g GPUs (chunk: tokens per count block).
// piece and cpiece: the bulk kernels' row pieces (send and expand, combine; 0 before sm_90).
type moeShape struct{ t, k, h, e, el, pairs, cap, chunk, nchunks, piece, cpiece int }

func newMoEShape(n, g int) moeShape {
	s := moeShape{t: min(max(n/16, 1), 40), k: 1 + n%4, h: 8 * (1 + n%3), el: 1 + n%3}
	s.e = s.el * g
	s.pairs = s.t * s.k
	s.cap = g * s.pairs
	s.chunk = 1 + n%5 // several chunks (count blocks), some partial
	s.nchunks = (s.t + s.chunk - 1) / s.chunk
	return s
}

// withPieces sets the bulk kernels' pieces for target: whole rows for even n, pieces of at
// most 32 bytes for odd n (rows of 48 bytes then take two: 32, then 16).
func (s moeShape) withPieces(n int, target ptx.Target) moeShape {
	if !kernels.MoEBulk(target) {
		return s
	}
	sm, cm := kernels.MoESendMaxPiece, kernels.MoECombineMaxPiece
	if n%2 == 1 {
		sm, cm = 32, 32
	}
	s.piece, s.cpiece = kernels.MoEPieceBytes(2*s.h, sm), kernels.MoEPieceBytes(2*s.h, cm)
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

// moeOn reports whether token t of a GPU with ids has an expert on GPU d.
func moeOn(ids []int32, s moeShape, t, d int) bool {
	for k := 0; k < s.k; k++ {
		if id := int(ids[t*s.k+k]); id >= 0 && id < s.e && id/s.el == d {
			return true
		}
	}
	return false
}

// moeTokens is GPU d's token buffer in the reference: the (source GPU, token) of each slot,
// by source, then token.
func moeTokens(ids [][]int32, s moeShape, d int) (slots [][2]int) {
	for g := range ids {
		for t := 0; t < s.t; t++ {
			if moeOn(ids[g], s, t, d) {
				slots = append(slots, [2]int{g, t})
			}
		}
	}
	return slots
}

// familyModules builds the bf16 kernel of every family in fams for r's target: r's own
// module for r's family (the pipelines run several kernels of one protocol).
func familyModules(r *run, fams []kernels.Family) (map[kernels.Family]*ptx.Module, error) {
	mods := map[kernels.Family]*ptx.Module{}
	for _, f := range fams {
		if f == r.spec.Family {
			mods[f] = r.mod
			continue
		}
		spec, err := kernels.Find(kernels.ID{Family: f, DType: dsl.BF16})
		if err != nil {
			return nil, err
		}
		b, err := spec.BuildVariant(kernels.Config{Target: r.p.Target, DType: dsl.BF16})
		if err != nil {
			return nil, err
		}
		mods[f] = b.Module
	}
	return mods, nil
}

func moePipeline(r *run) error {
	c := newColl(r)
	s := newMoEShape(r.size(200), c.g).withPieces(r.size(200), r.p.Target)
	r.res.Shape = fmt.Sprintf("tokens=%d k=%d h=%d experts=%d chunks=%dx%d gpus=%d pieces=%d,%d", s.t, s.k, s.h, s.e, s.nchunks, s.chunk, c.g, s.piece, s.cpiece)
	mods, err := familyModules(r, moeFamilies)
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
	slots := c.g * s.t // token-buffer rows
	x, _ := sym(dsl.BF16, s.t*s.h, false)
	ids, _ := sym(dsl.I32, s.pairs, false)
	w, _ := sym(dsl.F32, s.pairs, false)
	pos, _ := sym(dsl.U32, s.pairs, false)
	tpos, _ := sym(dsl.U32, s.t*c.g, false)
	tmask, _ := sym(dsl.U32, s.t, false)
	cnt, cntTab := sym(dsl.U32, kernels.CollMaxGPUs*s.nchunks*(s.e+1+c.g), true)
	tot, _ := sym(dsl.U32, kernels.CollMaxGPUs*(s.e+1+c.g), false)
	rowStart, _ := sym(dsl.U32, s.nchunks*(s.e+c.g), false)
	counts, _ := sym(dsl.U32, s.el, false)
	offsets, _ := sym(dsl.U32, s.el+1, false)
	status, _ := sym(dsl.U32, kernels.MoEStatusWords, false)
	route, _ := sym(dsl.U32, s.t*c.g, false)
	tok, tokTab := sym(dsl.BF16, slots*s.h, true)
	slotIdx, slotIdxTab := sym(dsl.U32, slots, true)
	slotRows, slotRowsTab := sym(dsl.U32, slots*s.k, true)
	_, slotWTab := sym(dsl.F32, slots*s.k, true)
	_, partTab := sym(dsl.BF16, slots*s.h, true)
	slotOf, slotOfTab := sym(dsl.U32, s.cap, true)
	recv, _ := sym(dsl.BF16, s.cap*s.h, false)
	src, srcTab := sym(dsl.U32, s.cap, true)
	out, _ := sym(dsl.BF16, s.t*s.h, false)
	pads, padTab := sym(dsl.U32, kernels.PadWords, true)
	if err != nil {
		return err
	}
	if err := errors.Join(c.fill(pads, kernels.PadWords, c.epoch), c.fill(tok, slots*s.h/2, moeUnwritten)); err != nil {
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
		u := func(m *emu.Symmetric, g int) jit.AnyPtr { return on(m, g, dsl.U32) }
		sendShared, combineShared := 0, 0
		if s.piece > 0 {
			sendShared, combineShared = kernels.MoESendShared(s.piece), kernels.MoECombineShared(s.cpiece)
		}
		steps := []struct {
			f      kernels.Family
			blocks int
			shared int
			args   func(g int) any
		}{
			{kernels.FamilyMoEDispatchCount, s.nchunks, 0, func(g int) any {
				return launch.MoEDispatchCount{Ids: on(ids, g, dsl.I32), Pos: u(pos, g), TPos: u(tpos, g), TMask: u(tmask, g), Cnt: table(cntTab, g), Pads: table(padTab, g),
					Rank: uint32(g), NGPUs: uint32(c.g), Tokens: uint32(s.t), K: uint32(s.k), Chunk: uint32(s.chunk), E: uint32(s.e), EL: uint32(s.el), Epoch: c.epoch}
			}},
			{kernels.FamilyMoEDispatchLayout, 1, 0, func(g int) any {
				return launch.MoEDispatchLayout{Cnt: u(cnt, g), Tot: u(tot, g), RowStart: u(rowStart, g), Counts: u(counts, g),
					Offsets: u(offsets, g), Status: u(status, g), Rank: uint32(g), NGPUs: uint32(c.g), Chunks: uint32(s.nchunks), E: uint32(s.e), EL: uint32(s.el)}
			}},
			{kernels.FamilyMoEDispatchSend, c.blocks(s.t * s.h / 8), sendShared, func(g int) any {
				return launch.MoEDispatchSend{X: on(x, g, dsl.BF16), Recv: on(recv, g, dsl.BF16), Ids: on(ids, g, dsl.I32), Pos: u(pos, g), TPos: u(tpos, g), TMask: u(tmask, g),
					RowStart: u(rowStart, g), Route: u(route, g), Tok: table(tokTab, g), SlotIdx: table(slotIdxTab, g), SlotRows: table(slotRowsTab, g),
					SlotOf: table(slotOfTab, g), Src: table(srcTab, g), Pads: table(padTab, g),
					Rank: uint32(g), NGPUs: uint32(c.g), Tokens: uint32(s.t), Chunk: uint32(s.chunk), K: uint32(s.k), H: uint32(s.h), E: uint32(s.e), EL: uint32(s.el),
					Cap: uint32(s.cap), Epoch: c.epoch, Piece: uint32(s.piece)}
			}},
			{kernels.FamilyMoEDispatchExpand, c.blocks(s.cap * s.h / 8), sendShared, func(g int) any {
				return launch.MoEDispatchExpand{Tok: on(tok, g, dsl.BF16), Recv: on(recv, g, dsl.BF16), SlotOf: u(slotOf, g), Offsets: u(offsets, g),
					SlotRows: u(slotRows, g), Status: u(status, g), EL: uint32(s.el), H: uint32(s.h), Cap: uint32(s.cap), K: uint32(s.k), Piece: uint32(s.piece)}
			}},
			{kernels.FamilyMoECombine, c.blocks(s.t * s.h / 8), combineShared, func(g int) any {
				return launch.MoECombine{Y: on(recv, g, dsl.BF16), Weights: on(w, g, dsl.F32), TMask: u(tmask, g), Route: u(route, g),
					SlotIdx: u(slotIdx, g), SlotRows: u(slotRows, g), SlotW: table(slotWTab, g), Part: table(partTab, g),
					Out: on(out, g, dsl.BF16), Pads: table(padTab, g), Rank: uint32(g), NGPUs: uint32(c.g), Tokens: uint32(s.t), K: uint32(s.k), H: uint32(s.h), Epoch: c.epoch, Piece: uint32(s.cpiece)}
			}},
		}
		for _, st := range steps {
			if err := c.launchModShared(mods[st.f], string(st.f)+"_"+dsl.BF16.String(), st.blocks, st.shared, st.args); err != nil {
				return fmt.Errorf("round %d: %s: %w", l, st.f, err)
			}
			n, _, _ := kernels.CollBarriers(st.f)
			c.epoch += uint32(n)
		}
		for d := 0; d < c.g; d++ {
			b := moeBufs{counts, offsets, status, recv, src, out, tok, slotIdx}
			if err := moeCheck(c, s, d, idv, xs, ws, b, l == 0); err != nil {
				return fmt.Errorf("round %d: %w", l, err)
			}
		}
	}
	return nil
}

// moeUnwritten fills the token buffers before the first round: two bf16 NaNs a word, which
// no token holds.
const moeUnwritten = 0xFFFFFFFF

// moeBufs are the buffers moeCheck reads.
type moeBufs struct{ counts, offsets, status, recv, src, out, tok, slotIdx *emu.Symmetric }

// moeCheck compares GPU d's layout, token buffer, received rows, sources and combined tokens
// with the reference; first: no slot past the received tokens may have been written.
func moeCheck(c *coll, s moeShape, d int, ids [][]int32, xs, ws [][]float64, b moeBufs, first bool) error {
	sys := c.r.sys
	srcs, cnts := moeRef(ids, s, d)
	var wantC, wantO []float64
	off := 0
	for _, n := range cnts {
		wantC, wantO = append(wantC, float64(n)), append(wantO, float64(off))
		off += n
	}
	wantO = append(wantO, float64(off))
	gotC, err := emu.ReadSlice[uint32](sys, b.counts.On(d), s.el)
	if err != nil {
		return err
	}
	gotO, err := emu.ReadSlice[uint32](sys, b.offsets.On(d), s.el+1)
	if err != nil {
		return err
	}
	gotS, err := emu.ReadSlice[uint32](sys, b.src.On(d), len(srcs))
	if err != nil {
		return err
	}
	st, err := emu.ReadSlice[uint32](sys, b.status.On(d), kernels.MoEStatusWords)
	if err != nil {
		return err
	}
	var wantS, wantR []float64
	for _, p := range srcs {
		wantS = append(wantS, float64(p[0]*s.pairs+p[1]))
		t := p[1] / s.k
		wantR = append(wantR, xs[p[0]][t*s.h:(t+1)*s.h]...)
	}
	gotR, err := read(sys, b.recv.On(d), dsl.BF16, len(wantR))
	if err != nil {
		return err
	}
	// The token buffer: each token bound for d once, by source, then token.
	slots := moeTokens(ids, s, d)
	var wantT []float64
	wantTS := make([]float64, c.g*s.t) // the slot of each (source, token)
	for i := range wantTS {
		wantTS[i] = kernels.MoENone
	}
	for i, p := range slots {
		wantTS[p[0]*s.t+p[1]] = float64(i)
		if p[0] != d {
			wantT = append(wantT, xs[p[0]][p[1]*s.h:(p[1]+1)*s.h]...)
		}
	}
	gotTS, err := emu.ReadSlice[uint32](sys, b.slotIdx.On(d), len(wantTS))
	if err != nil {
		return err
	}
	allT, err := emu.ReadSlice[uint16](sys, b.tok.On(d), c.g*s.t*s.h)
	if err != nil {
		return err
	}
	var gotT []float64
	var unwritten error
	for i := 0; i < c.g*s.t; i++ {
		row := allT[i*s.h : (i+1)*s.h]
		if i < len(slots) && slots[i][0] != d {
			for _, v := range row {
				gotT = append(gotT, float64(fp.BF16ToF32(v)))
			}
			continue
		}
		for _, v := range row {
			if first && v != uint16(moeUnwritten&0xFFFF) && unwritten == nil {
				unwritten = fmt.Errorf("GPU %d token buffer: slot %d written (of %d tokens received; its own tokens' slots stay unwritten)", d, i, len(slots))
			}
		}
	}
	ownLo, ownN := 0, 0 // d's own tokens' slots
	for _, p := range slots {
		switch {
		case p[0] < d:
			ownLo++
		case p[0] == d:
			ownN++
		}
	}
	sent := 0
	for t := 0; t < s.t; t++ {
		for g := 0; g < c.g; g++ {
			if g != d && moeOn(ids[d], s, t, g) {
				sent++
			}
		}
	}
	// out[t]: per GPU g in order, the f32 sum over k of t's pairs on g, rounded; then their
	// sum, rounded.
	wantOut := moeCombineWant(s, c.g, ids[d], ws[d], xs[d], s.t)
	gotOut, err := read(sys, b.out.On(d), dsl.BF16, len(wantOut))
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
		c.r.check(fmt.Sprintf("GPU %d status", d), f(st), []float64{0, float64(most), float64(len(slots)), float64(sent), float64(ownLo), float64(ownN)}, 0, 0),
		c.r.check(fmt.Sprintf("GPU %d token slots", d), f(gotTS), wantTS, 0, 0),
		c.r.check(fmt.Sprintf("GPU %d token rows", d), gotT, wantT, 0, 0),
		unwritten,
		c.r.check(fmt.Sprintf("GPU %d sources", d), f(gotS), wantS, 0, 0),
		c.r.check(fmt.Sprintf("GPU %d rows", d), gotR, wantR, 0, 0),
		c.r.check(fmt.Sprintf("GPU %d out", d), gotOut, wantOut, 0, 0))
}

// moeCombineWant is GPU d's combined output for its first n tokens (ids, ws, xs: d's own):
// per GPU g in order, the f32 sum over k of each token's pairs on g, rounded to bf16; then
// their sum, rounded. Both MoE pipelines (normal and low-latency) combine this way.
func moeCombineWant(s moeShape, gpus int, ids []int32, ws, xs []float64, n int) []float64 {
	var want []float64
	for t := 0; t < n; t++ {
		for col := 0; col < s.h; col++ {
			var acc float64
			for g := 0; g < gpus; g++ {
				var part float64
				for k := 0; k < s.k; k++ {
					if id := int(ids[t*s.k+k]); id >= 0 && id/s.el == g {
						part += ws[t*s.k+k] * xs[t*s.h+col]
					}
				}
				acc += round(dsl.BF16, part)
			}
			want = append(want, round(dsl.BF16, acc))
		}
	}
	return want
}
