package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ops"
)

// runAttentionDecode is `gpubench decode`: times ops.AttentionDecode (paged-KV
// flash-decoding: kernels.AttentionDecode and, split, its combine kernel) per (batch,
// context) with CUDA events (median), every sequence of the batch at the same context, its
// pages shuffled over the cache; checks 32 sampled (sequence, token, head) rows of O and
// LSE against float64; prints µs, the K/V bytes read per second, the splits and the waves
// of blocks they make (BlocksPerSM a SM). -splits forces the splits and -bm, -bn, -warps,
// -stages, -prefetch and -shiftdiv the decode kernel's tiling (AttentionDecodeOptions.Config), for
// A/B runs against ops's choice. With -dir it writes Q, the caches, the block table, the
// lengths, O and kgen.json per problem for scripts/bench/torch_decode.py, which times
// torch's SDPA on the gathered K/V (and flash_attn_with_kvcache when importable) on the
// same inputs.
func runAttentionDecode(args []string) error {
	fs := flag.NewFlagSet("decode", flag.ExitOnError)
	batches := fs.String("b", "1,16,64", "batches, comma-separated")
	ctxs := fs.String("ctx", "1024,8192,32768", "context lengths (keys a sequence, the queries' own included), comma-separated")
	qLen := fs.Int("q", 1, "query tokens a sequence (1: decoding; 2..8: speculative)")
	heads := fs.Int("h", 32, "query heads")
	kvHeads := fs.Int("hkv", 8, "K/V heads (GQA)")
	hd := fs.Int("d", 128, "head dim: 64, 128 or 256")
	page := fs.Int("page", 16, "keys a page: a power of two, 16..1024")
	splits := fs.Int("splits", 0, "splits a sequence (0: chosen by ops from the context and the SM count)")
	bm := fs.Int("bm", 0, "decode kernel: query rows a block, 16 or 32 (0: ops's choice)")
	bn := fs.Int("bn", 0, "decode kernel: keys a step (0: ops's choice)")
	warps := fs.Int("warps", 0, "decode kernel: warps a block (0: ops's choice)")
	stages := fs.Int("stages", 0, "decode kernel: cp.async stages of K/V (0: ops's choice)")
	prefetch := fs.Bool("prefetch", false, "decode kernel: load each tile's page ids one tile ahead (AttentionDecodeConfig.PrefetchPages)")
	shiftDiv := fs.Bool("shiftdiv", false, "decode kernel: divisions and remainders by constants as shifts (AttentionDecodeConfig.ShiftDivision)")
	dtype := fs.String("dtype", "bf16", "bf16 or f16")
	reps := fs.Int("reps", 50, "timed repetitions (after 3 warm-ups)")
	maxGB := fs.Float64("max-gb", 24, "skip problems whose K/V caches exceed this many GB")
	dir := fs.String("dir", "", "write the inputs, O and kgen.json per problem here for torch_decode.py")
	if err := fs.Parse(args); err != nil {
		return err
	}
	list := func(flagName, s string) ([]int, error) {
		var out []int
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 || n > 1<<24 {
				return nil, usagef("-%s: bad value %q (want positive integers up to 2^24)", flagName, f)
			}
			out = append(out, n)
		}
		return out, nil
	}
	bs, err := list("b", *batches)
	if err != nil {
		return err
	}
	cs, err := list("ctx", *ctxs)
	if err != nil {
		return err
	}
	switch {
	case *qLen < 1 || *qLen > 64:
		return usagef("-q %d: want 1..64", *qLen)
	case *heads < 1 || *kvHeads < 1 || *heads%*kvHeads != 0 || *heads > 1024:
		return usagef("-h %d -hkv %d: want heads a multiple of kv heads, at most 1024", *heads, *kvHeads)
	case *reps < 1:
		return usagef("-reps %d: want at least one timed repetition", *reps)
	case *splits < 0:
		return usagef("-splits %d: want 0 (chosen) or more", *splits)
	case *bm < 0 || *bn < 0 || *warps < 0 || *stages < 0:
		return usagef("-bm %d -bn %d -warps %d -stages %d: want 0 (ops's choice) or a positive value", *bm, *bn, *warps, *stages)
	case *dtype != "bf16" && *dtype != "f16":
		return usagef("-dtype %q: want bf16 or f16", *dtype)
	case *hd != 64 && *hd != 128 && *hd != 256:
		return usagef("-d %d: want 64, 128 or 256", *hd)
	}
	d, err := jit.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	fmt.Printf("device: %s (%s, %d SMs)\n", d.Info().Name, d.Info().Arch, d.Info().Multiproc)
	for _, b := range bs {
		for _, c := range cs {
			p := decProblem{b: b, q: *qLen, h: *heads, hkv: *kvHeads, d: *hd, page: *page, ctx: c, splits: *splits,
				tiling: decTiling{bm: *bm, bn: *bn, warps: *warps, stages: *stages, prefetch: *prefetch, shiftDiv: *shiftDiv}}
			if gb := float64(p.kvBytes()) / 1e9; gb > *maxGB {
				fmt.Printf("decode b %d ctx %d: skipped (%.1f GB of K/V > -max-gb %.0f)\n", b, c, gb, *maxGB)
				continue
			}
			var err error
			if *dtype == "f16" {
				err = benchDecode[fp.F16](d, p, *reps, *dir, fp.F16Of)
			} else {
				err = benchDecode[fp.BF16](d, p, *reps, *dir, fp.BF16Of)
			}
			if err != nil {
				return fmt.Errorf("b %d ctx %d: %w", b, c, err)
			}
		}
	}
	return nil
}

// decProblem is one decode shape: batch, query tokens, heads, kv heads, head dim, page
// size, context (every sequence), forced splits (0: chosen) and the decode kernel's forced
// tiling (zero: ops's choice).
type decProblem struct {
	b, q, h, hkv, d, page, ctx, splits int
	tiling                             decTiling
}

// decTiling is gpubench decode's -bm, -bn, -warps, -stages, -prefetch and -shiftdiv: the
// fields of ops's configuration to replace (0 and false: keep).
type decTiling struct {
	bm, bn, warps, stages int
	prefetch, shiftDiv    bool
}

// apply returns cfg with t's fields replaced, and whether any was.
func (t decTiling) apply(cfg kernels.AttentionDecodeConfig) (kernels.AttentionDecodeConfig, bool) {
	for _, x := range []struct{ v, to *int }{{&t.bm, &cfg.BM}, {&t.bn, &cfg.BN}, {&t.warps, &cfg.Warps}, {&t.stages, &cfg.Stages}} {
		if *x.v != 0 {
			*x.to = *x.v
		}
	}
	cfg.PrefetchPages = cfg.PrefetchPages || t.prefetch
	cfg.ShiftDivision = cfg.ShiftDivision || t.shiftDiv
	return cfg, t != decTiling{}
}

// pages is the pages a sequence takes.
func (p decProblem) pages() int { return (p.ctx + p.page - 1) / p.page }

// kvBytes is the bytes of the two caches (2-byte elements).
func (p decProblem) kvBytes() int64 {
	return 2 * 2 * int64(p.b) * int64(p.pages()) * int64(p.page) * int64(p.hkv) * int64(p.d)
}

// decRecord is what torch_decode.py reads back.
type decRecord struct {
	B, Q, H, HKV, D, Page, Ctx, Pages, Splits int
	DType, Kernel                             string
	KgenUS, GBs                               float64
	SampleErr                                 float64 // the largest sampled |O - ref| / tolerance
}

func benchDecode[T interface{ fp.F16 | fp.BF16 }](d *jit.Device, p decProblem, reps int, dir string, conv func(float32) T) error {
	ctx := context.Background()
	dt := jit.ElemType[T]()
	rng := rand.New(rand.NewSource(int64(p.b*31 + p.ctx*7 + p.d)))
	host := func(n int) []T {
		v := make([]T, n)
		for i := range v {
			v[i] = conv(2*rng.Float32() - 1)
		}
		return v
	}
	pagesAll := p.b * p.pages()
	nq, nkv := p.b*p.q*p.h*p.d, pagesAll*p.page*p.hkv*p.d
	hq, hk, hv := host(nq), host(nkv), host(nkv)
	perm := rng.Perm(pagesAll)
	table := make([]int32, pagesAll)
	for i, x := range perm {
		table[i] = int32(x)
	}
	lens := make([]int32, p.b)
	for i := range lens {
		lens[i] = int32(p.ctx)
	}
	var frees []func()
	defer func() {
		for _, f := range frees {
			f()
		}
	}()
	up := func(h []T, shape ...int) (ops.Tensor[T], error) {
		b, err := jit.Alloc[T](d, len(h))
		if err != nil {
			return ops.Tensor[T]{}, err
		}
		frees = append(frees, func() { b.Free() })
		if err := b.CopyFromHost(h); err != nil {
			return ops.Tensor[T]{}, err
		}
		return ops.New(b, shape...)
	}
	upI := func(h []int32, shape ...int) (ops.Tensor[int32], error) {
		b, err := jit.Alloc[int32](d, len(h))
		if err != nil {
			return ops.Tensor[int32]{}, err
		}
		frees = append(frees, func() { b.Free() })
		if err := b.CopyFromHost(h); err != nil {
			return ops.Tensor[int32]{}, err
		}
		return ops.New(b, shape...)
	}
	q, err := up(hq, p.b, p.q, p.h, p.d)
	if err != nil {
		return err
	}
	kc, err := up(hk, pagesAll, p.page, p.hkv, p.d)
	if err != nil {
		return err
	}
	vc, err := up(hv, pagesAll, p.page, p.hkv, p.d)
	if err != nil {
		return err
	}
	out, err := up(make([]T, nq), p.b, p.q, p.h, p.d)
	if err != nil {
		return err
	}
	bt, err := upI(table, p.b, p.pages())
	if err != nil {
		return err
	}
	sl, err := upI(lens, p.b)
	if err != nil {
		return err
	}
	lseB, err := jit.Alloc[float32](d, p.b*p.h*p.q)
	if err != nil {
		return err
	}
	defer lseB.Free()
	lse, err := ops.New(lseB, p.b, p.h, p.q)
	if err != nil {
		return err
	}
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	cfg, err := ops.AttentionDecodeConfigFor(d.Info(), dt, p.d, p.page, p.q*(p.h/p.hkv))
	if err != nil {
		return err
	}
	opt := &ops.AttentionDecodeOptions{LSE: lse, MaxSeqLen: p.ctx, Splits: p.splits}
	if c, forced := p.tiling.apply(cfg); forced {
		cfg, opt.Config = c, &c
	}
	splits := p.splits
	if splits == 0 {
		splits = cfg.Splits(p.b, p.q, p.h, p.hkv, p.ctx, d.Info().Multiproc, cfg.BlocksPerSM(kernels.SMLimitsOf(d.Info().SM)))
	}
	t, err := timeIt(d, s, reps, func() error { return ops.AttentionDecode(ctx, s, out, q, kc, vc, bt, sl, opt) })
	if err != nil {
		return err
	}
	ho := make([]T, nq)
	if err := out.Buffer().CopyToHost(ho); err != nil {
		return err
	}
	hl := make([]float32, p.b*p.h*p.q)
	if err := lseB.CopyToHost(hl); err != nil {
		return err
	}
	worst, err := decSample(p, dsl.Type(dt), hq, hk, hv, table, ho, hl, rng)
	if err != nil {
		return err
	}
	us := float64(t.Nanoseconds()) / 1e3
	gbs := float64(p.kvBytes()) / t.Seconds() / 1e9
	perSM := cfg.BlocksPerSM(kernels.SMLimitsOf(d.Info().SM))
	waves := float64(cfg.Grid(p.b, p.q, p.h, p.hkv, splits)) / float64(d.Info().Multiproc*perSM)
	fmt.Printf("decode b %d q %d h %d/%d d %d page %d ctx %d %s: %s splits %d (%.2f waves of %d a SM): %9.1f us %7.1f GB/s of K/V (median of %d), sampled error %.3g of tolerance\n",
		p.b, p.q, p.h, p.hkv, p.d, p.page, p.ctx, dt, cfg.Name(), splits, waves, perSM, us, gbs, reps, worst)
	if dir == "" {
		return nil
	}
	sub := filepath.Join(dir, fmt.Sprintf("b%d_q%d_h%d_hkv%d_d%d_p%d_ctx%d", p.b, p.q, p.h, p.hkv, p.d, p.page, p.ctx))
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return err
	}
	bytesOf := func(x []T) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 2*len(x)) }
	for name, x := range map[string][]byte{"q.bin": bytesOf(hq), "k.bin": bytesOf(hk), "v.bin": bytesOf(hv), "o.bin": bytesOf(ho),
		"table.bin": unsafe.Slice((*byte)(unsafe.Pointer(&table[0])), 4*len(table))} {
		if err := os.WriteFile(filepath.Join(sub, name), x, 0o644); err != nil {
			return err
		}
	}
	rec, _ := json.Marshal(decRecord{B: p.b, Q: p.q, H: p.h, HKV: p.hkv, D: p.d, Page: p.page, Ctx: p.ctx, Pages: p.pages(), Splits: splits,
		DType: dt.String(), Kernel: cfg.Name(), KgenUS: us, GBs: gbs, SampleErr: worst})
	return os.WriteFile(filepath.Join(sub, "kgen.json"), rec, 0o644)
}

// decSample checks 32 random (sequence, token, head) rows of O and LSE against float64 over
// the paged keys (causal within the last q keys; tolerance as kernels/ref's
// AttentionTolerance) and returns the worst error relative to the tolerance; an error when
// one is outside.
func decSample[T interface{ fp.F16 | fp.BF16 }](p decProblem, dt dsl.Type, hq, hk, hv []T, table []int32, ho []T, hl []float32, rng *rand.Rand) (float64, error) {
	f := func(x T) float64 {
		if h, ok := any(x).(fp.F16); ok {
			return float64(h.Float32())
		}
		return float64(any(x).(fp.BF16).Float32())
	}
	scale := 1 / math.Sqrt(float64(p.d))
	worst := 0.0
	sc := make([]float64, p.ctx)
	for n := 0; n < 32; n++ {
		b, i, h := rng.Intn(p.b), rng.Intn(p.q), rng.Intn(p.h)
		hk2 := h / (p.h / p.hkv)
		qo := ((b*p.q+i)*p.h + h) * p.d
		kv := func(j int) int {
			page := int(table[b*p.pages()+j/p.page])
			return ((page*p.page+j%p.page)*p.hkv + hk2) * p.d
		}
		keys := max(0, min(p.ctx, p.ctx-p.q+i+1))
		w, err := attnRowCheck(dt, p.d, keys, scale,
			func(c int) float64 { return f(hq[qo+c]) },
			func(j, c int) float64 { return f(hk[kv(j)+c]) },
			func(j, c int) float64 { return f(hv[kv(j)+c]) },
			func(c int) float64 { return f(ho[qo+c]) },
			float64(hl[(b*p.h+h)*p.q+i]), sc)
		worst = max(worst, w)
		if err != nil {
			return worst, fmt.Errorf("sampled row (b %d, q %d, h %d): %w", b, i, h, err)
		}
	}
	return worst, nil
}
