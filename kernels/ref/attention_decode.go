package ref

import (
	"fmt"
	"math"
	"math/rand"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

func init() {
	registerOwn("attention_decode", oneGPU, func(r *run) error { return decodeHarness(r, 1) })
	registerOwn("attention_decode_combine", oneGPU, func(r *run) error { return decodeHarness(r, 3) })
}

// decodeHarness runs `kgen run attention_decode` (splits 1) and `kgen run
// attention_decode_combine` (splits 3: the decode kernel's partials, then the combine): the
// registry's configuration (head dim 128, 16-key pages, GQA 4) on two sequences of 141 and
// 71 keys (--size sets the first; the second is half of it plus one), one query each.
func decodeHarness(r *run, splits int) error {
	ctx := 141
	if r.p.Size > 0 {
		ctx = r.p.Size
	}
	res, err := RunAttentionDecode(DecodeProblem{Config: kernels.DefaultAttentionDecodeConfig(r.p.DType, 128, 16, 4), Target: r.p.Target,
		Batch: 2, QLen: 1, Heads: 4, KVHeads: 1, SeqLens: []int{ctx, ctx/2 + 1}, Splits: splits, Seed: r.p.Seed})
	r.res = res
	return err
}

// DecodeProblem is one paged decode-attention run on the emulator: Q [Batch, QLen, Heads,
// D] (D = Config.HeadDim), one sequence per batch entry with context SeqLens[b] (its last
// QLen keys are the queries' own), K and V in NumPages pages of Config.PageSize keys, given
// to the sequences in a random order (a shuffled block table of MaxPages entries a
// sequence; the entries a sequence does not use hold BadPage). Values are random in
// [-1, 1]; Scale 0 means 1/sqrt(D).
type DecodeProblem struct {
	Config                      kernels.AttentionDecodeConfig
	Target                      ptx.Target // zero: sm_90
	Batch, QLen, Heads, KVHeads int
	SeqLens                     []int
	MaxPages                    int // zero: enough for the longest context
	NumPages                    int // zero: the pages the sequences use, plus 3
	Splits                      int // zero: 1
	Scale                       float64
	Seed                        int64
	// BadPage, when non-zero, replaces one page id the first sequence uses by
	// NumPages + BadPage - 1 (out of range: the emulator's sanitizer must report it).
	BadPage int
}

// MaxEmuDecode bounds an emulated decode problem's scores (batch*qLen*heads*keys, 2^22).
const MaxEmuDecode = 1 << 22

// RunAttentionDecode builds the problem's decode kernel (and, with several splits, the
// combine kernel), runs them on one emulated GPU and checks O and LSE element by element
// against the float64 reference (ref.AttentionRef on each sequence's gathered keys, causal
// aligned bottom-right; AttentionTolerance).
func RunAttentionDecode(p DecodeProblem) (Result, error) {
	cfg := p.Config
	splits := max(p.Splits, 1)
	res := Result{Kernel: cfg.Name(), DType: cfg.In,
		Shape: fmt.Sprintf("b%d q%d h%d/%d ctx%s splits %d", p.Batch, p.QLen, p.Heads, p.KVHeads, lensText(p.SeqLens), splits)}
	if p.Target == "" {
		p.Target = ptx.SM90
	}
	if err := cfg.Check(); err != nil {
		return res, err
	}
	if len(p.SeqLens) != p.Batch {
		return res, fmt.Errorf("attention_decode %s: %d context lengths for batch %d", res.Shape, len(p.SeqLens), p.Batch)
	}
	what := "attention_decode " + res.Shape
	for _, c := range []struct {
		field string
		v     int
		rule  string
	}{{"Splits", p.Splits, "1 split"}, {"MaxPages", p.MaxPages, "enough for the longest context"}, {"NumPages", p.NumPages, "the pages used, plus 3"}, {"BadPage", p.BadPage, "no bad page"}} {
		if err := count(what, c.field, c.v, c.rule); err != nil {
			return res, err
		}
	}
	if err := scalar(what, "Scale", p.Scale, true); err != nil {
		return res, err
	}
	B, QL, H, HK, D, PS := p.Batch, p.QLen, p.Heads, p.KVHeads, cfg.HeadDim, cfg.PageSize
	used, longest, keys := 0, 0, 0
	for _, s := range p.SeqLens {
		if s < 0 || s > math.MaxInt32 {
			return res, fmt.Errorf("attention_decode %s: context length %d: want 0 to 2^31-1 (SeqLens are s32 on the device)", res.Shape, s)
		}
		used += ceil(s, PS)
		longest = max(longest, s)
		keys += s
	}
	maxPages := p.MaxPages
	if maxPages == 0 {
		maxPages = max(1, ceil(longest, PS))
	}
	numPages := p.NumPages
	if numPages == 0 {
		numPages = used + 3
	}
	if used > numPages || ceil(longest, PS) > maxPages {
		return res, fmt.Errorf("attention_decode %s: the contexts need %d pages (at most %d a sequence); the cache has %d, the table %d a sequence", res.Shape, used, ceil(longest, PS), numPages, maxPages)
	}
	if err := cfg.CheckShape(B, QL, H, HK, numPages, maxPages, splits); err != nil {
		return res, err
	}
	if p.BadPage > math.MaxInt32-numPages+1 { // the id must stay out of range as an s32
		return res, fmt.Errorf("%s: BadPage %d: page id %d + %d - 1 is past 2^31-1 (block-table ids are s32)", what, p.BadPage, numPages, p.BadPage)
	}
	if n := satMul(keys, QL, H); n > MaxEmuDecode {
		return res, fmt.Errorf("attention_decode %s: %s scores; the emulator harness takes at most %d (MaxEmuDecode)", res.Shape, satText(n), MaxEmuDecode)
	}
	scale := p.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(D))
	}

	rng := rand.New(rand.NewSource(p.Seed + 1))
	rnd := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = round(cfg.In, 2*rng.Float64()-1)
		}
		return v
	}
	q := rnd(B * QL * H * D)
	kc, vc := rnd(numPages*PS*HK*D), rnd(numPages*PS*HK*D)
	perm := rng.Perm(numPages)
	table := make([]int32, B*maxPages)
	next := 0
	for b, s := range p.SeqLens {
		for i := range maxPages {
			if i < ceil(s, PS) {
				table[b*maxPages+i] = int32(perm[next])
				next++
			} else {
				table[b*maxPages+i] = 1 << 30 // never read as a page
			}
		}
	}
	if p.BadPage != 0 {
		table[0] = int32(numPages + p.BadPage - 1)
	}
	seqLens := make([]int32, B)
	for i, s := range p.SeqLens {
		seqLens[i] = int32(s)
	}

	build := func(name string, write func(*dsl.Kernel)) (*ptx.Module, error) {
		k := dsl.New(name, dsl.WithTarget(p.Target))
		write(k)
		return k.Build()
	}
	mod, err := build(cfg.Name(), func(k *dsl.Kernel) { kernels.AttentionDecode(k, cfg) })
	if err != nil {
		return res, err
	}
	sys, err := emu.New(1)
	if err != nil {
		return res, err
	}
	alloc := func(bytes int) (uint64, error) { return sys.Malloc(0, max(bytes, 4)) }
	rowsAll := B * QL * H
	var ptrs [9]uint64 // q, k, v, o, lse, opart, lsepart, table, seqlens
	for i, x := range []struct {
		dt dsl.Type
		v  []float64
	}{{cfg.In, q}, {cfg.In, kc}, {cfg.In, vc}, {cfg.In, make([]float64, rowsAll*D)}, {dsl.F32, make([]float64, rowsAll)},
		{dsl.F32, make([]float64, rowsAll*splits*D)}, {dsl.F32, make([]float64, rowsAll*splits)}} {
		if ptrs[i], err = alloc(len(x.v) * x.dt.Bytes()); err != nil {
			return res, err
		}
		if err := write(sys, ptrs[i], x.dt, x.v); err != nil {
			return res, err
		}
	}
	for i, x := range [][]int32{table, seqLens} {
		if ptrs[7+i], err = alloc(4 * len(x)); err != nil {
			return res, err
		}
		if err := emu.WriteSlice(sys, ptrs[7+i], x); err != nil {
			return res, err
		}
	}
	err = sys.Launch(emu.Launch{Module: mod, Entry: cfg.Name(), Grid: emu.D1(cfg.Grid(B, QL, H, HK, splits)), Block: emu.D1(cfg.Threads()),
		SharedBytes: cfg.SharedBytes(),
		Args: []any{ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5], ptrs[6], ptrs[7], ptrs[8],
			uint32(B), uint32(QL), uint32(H), uint32(HK), uint32(maxPages), uint32(splits), float32(scale)},
		Options: emu.Options{Seed: p.Seed}})
	if err != nil {
		return res, err
	}
	if splits > 1 {
		name := kernels.AttentionDecodeCombineName(cfg.In, D)
		cmod, err := build(name, func(k *dsl.Kernel) { kernels.AttentionDecodeCombine(k, cfg.In, D) })
		if err != nil {
			return res, err
		}
		err = sys.Launch(emu.Launch{Module: cmod, Entry: name, Grid: emu.D1(kernels.AttentionDecodeCombineGrid(rowsAll, D)),
			Block:   emu.D1(kernels.AttentionDecodeCombineThreads),
			Args:    []any{ptrs[5], ptrs[6], ptrs[3], ptrs[4], uint32(B), uint32(QL), uint32(H), uint32(splits)},
			Options: emu.Options{Seed: p.Seed}})
		if err != nil {
			return res, err
		}
	}
	gotO, err := read(sys, ptrs[3], cfg.In, rowsAll*D)
	if err != nil {
		return res, err
	}
	gotL, err := read(sys, ptrs[4], dsl.F32, rowsAll)
	if err != nil {
		return res, err
	}

	bad := 0
	var first string
	fail := func(s string) {
		if bad == 0 {
			first = s
		}
		bad++
	}
	for b, s := range p.SeqLens {
		want := AttentionRef(q[b*QL*H*D:(b+1)*QL*H*D], gatherPages(kc, table[b*maxPages:], s, PS, HK, D), gatherPages(vc, table[b*maxPages:], s, PS, HK, D),
			1, H, HK, QL, s, D, scale, true)
		if want.Err != nil { // no reference: a failure, not a pass over nothing
			return res, fmt.Errorf("%s %s: batch %d: %w", cfg.Name(), res.Shape, b, want.Err)
		}
		for i, w := range want.O {
			g := gotO[b*QL*H*D+i]
			tol := AttentionTolerance(cfg.In, want.Abs[i/D], w)
			d := math.Abs(g - w)
			res.MaxError = math.Max(res.MaxError, d/tol)
			if !(d <= tol) {
				fail(fmt.Sprintf("O[b %d, q %d, h %d, d %d] = %v, want %v (tolerance %.3g)", b, i/(H*D), i/D%H, i%D, g, w, tol))
			}
		}
		for i, w := range want.LSE {
			g := gotL[b*H*QL+i]
			if math.IsInf(w, -1) {
				if !math.IsInf(g, -1) {
					fail(fmt.Sprintf("LSE[b %d, h %d, q %d] = %v, want -Inf (a query that sees no key)", b, i/QL, i%QL, g))
				}
				continue
			}
			tol := 1e-5 * (1 + math.Abs(w))
			d := math.Abs(g - w)
			res.MaxError = math.Max(res.MaxError, d/tol)
			if !(d <= tol) {
				fail(fmt.Sprintf("LSE[b %d, h %d, q %d] = %v, want %v (tolerance %.3g)", b, i/QL, i%QL, g, w, tol))
			}
		}
	}
	res.Checked = rowsAll*D + rowsAll
	if bad > 0 {
		return res, fmt.Errorf("%s %s: %d of %d values differ; first: %s", cfg.Name(), res.Shape, bad, res.Checked, first)
	}
	return res, nil
}

// gatherPages returns the seqLen keys of one sequence, [seqLen, kvHeads, d], from a paged
// cache [numPages, pageSize, kvHeads, d] and the sequence's block-table row.
func gatherPages(cache []float64, table []int32, seqLen, pageSize, kvHeads, d int) []float64 {
	row := kvHeads * d
	out := make([]float64, seqLen*row)
	for j := range seqLen {
		page := int(table[j/pageSize])
		copy(out[j*row:(j+1)*row], cache[(page*pageSize+j%pageSize)*row:])
	}
	return out
}

// lensText shows context lengths as %v does, the first 8 of a longer list and the count
// (a batch of millions quoted every length in each message).
func lensText(s []int) string {
	if len(s) <= 8 {
		return fmt.Sprint(s)
	}
	return fmt.Sprintf("%v ... (%d lengths)", s[:8], len(s))
}
