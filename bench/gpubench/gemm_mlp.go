package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/ptx"
)

// runMLP is `gpubench mlp`: a transformer MLP block in bf16 on gemm_sm90 with the library's
// epilogues, H = SiLU(X*W1 + b1) then Y = H*W2 + X, per token count: it times each GEMM and
// the pair, and checks a sample of H and of Y (from the H the GPU wrote) against float64.
func runMLP(args []string) error {
	fs := flag.NewFlagSet("mlp", flag.ExitOnError)
	tokens := fs.String("tokens", "128,1024,8192", "token counts (rows of X), comma-separated")
	hidden := fs.Int("hidden", 4096, "hidden size (columns of X; a multiple of 8)")
	ff := fs.Int("ff", 14336, "feed-forward size (columns of H; a multiple of 8)")
	reps := fs.Int("reps", 20, "timed repetitions (after 3 warm-ups)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *hidden <= 0 || *ff <= 0 || *hidden%8 != 0 || *ff%8 != 0 {
		return usagef("-hidden %d -ff %d: want positive multiples of 8 (TMA's 16-byte row strides)", *hidden, *ff)
	}
	if *reps < 1 {
		return usagef("-reps %d: want at least one timed repetition", *reps)
	}
	var counts []int
	for _, s := range strings.Split(*tokens, ",") {
		t, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || t <= 0 {
			return usagef("-tokens: bad count %q", s)
		}
		// The host holds X, W1, W2, H and Y (bf16, with float64 checks on samples): each
		// matrix under 2^31 elements and all of them under mlpMaxHostBytes.
		if err := mlpFits(t, *hidden, *ff); err != nil {
			return usageError{err}
		}
		counts = append(counts, t)
	}
	d, err := jit.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	fmt.Printf("device: %s (%s); MLP block bf16, hidden %d, ff %d, gemm_sm90 as kernels.GemmSM90For picks\n", d.Info().Name, d.Info().Arch, *hidden, *ff)
	for _, t := range counts {
		if err := benchMLP(d, t, *hidden, *ff, *reps); err != nil {
			return fmt.Errorf("mlp %dx%dx%d: %w", t, *hidden, *ff, err)
		}
	}
	return nil
}

// mlpMaxHostBytes bounds the host memory of one MLP problem's matrices (16 GiB).
const mlpMaxHostBytes = 16 << 30

// mlpFits refuses an MLP problem whose matrices pass 2^31 elements or together
// mlpMaxHostBytes of bf16 (products in float64: no overflow).
func mlpFits(tokens, hidden, ff int) error {
	t, h, f := float64(tokens), float64(hidden), float64(ff)
	for _, m := range []struct {
		name string
		n    float64
	}{{"X and Y (tokens x hidden)", t * h}, {"W1 and W2 (hidden x ff)", h * f}, {"H (tokens x ff)", t * f}} {
		if m.n >= 1<<31 {
			return fmt.Errorf("-tokens %d -hidden %d -ff %d: %s has %.4g elements; at most 2^31-1", tokens, hidden, ff, m.name, m.n)
		}
	}
	if b := 2 * (2*t*h + 2*h*f + t*f); b > mlpMaxHostBytes {
		return fmt.Errorf("-tokens %d -hidden %d -ff %d: the matrices take %.4g bytes; at most %d (16 GiB)", tokens, hidden, ff, b, int64(mlpMaxHostBytes))
	}
	return nil
}

// mlpGemm is one of the block's GEMMs, built and loaded.
type mlpGemm struct {
	cfg kernels.GemmSM90Config
	fn  *jit.Function
	mod *jit.Module
}

func loadMLPGemm(d *jit.Device, e kernels.Epilogue, m, n, k int) (*mlpGemm, error) {
	cfg, err := kernels.GemmSM90For(dsl.BF16, dsl.BF16, m, n, k, max(d.Info().Multiproc, 1))
	if err != nil {
		return nil, err
	}
	cfg.Epilogue = e
	kb := dsl.New(cfg.Name(), dsl.WithTarget(ptx.SM90a))
	kernels.GemmSM90(kb, cfg)
	mod, err := kb.Build()
	if err != nil {
		return nil, err
	}
	jm, err := d.Load(jit.Source{Module: mod, Params: map[string][]jit.ParamInfo{cfg.Name(): jit.ParamInfos(kb.Params())}})
	if err != nil {
		return nil, err
	}
	fn, err := jm.Function(cfg.Name())
	if err != nil {
		jm.Close()
		return nil, err
	}
	return &mlpGemm{cfg: cfg, fn: fn, mod: jm}, nil
}

// args are the GEMM's parameters for D (m x n) = A (m x k) * B (k x n), all bf16 buffers,
// with the epilogue's operands after them, and its launch on sms multiprocessors.
func (g *mlpGemm) args(a, b, dbuf *jit.Buffer[fp.BF16], m, n, k, sms int, epi []any) ([]any, kernels.GemmSM90Launch, error) {
	l, err := g.cfg.Launch(m, n, k, sms)
	if err != nil {
		return nil, l, err
	}
	tmA, err := tensorMap(a, l.A)
	if err != nil {
		return nil, l, err
	}
	tmB, err := tensorMap(b, l.B)
	if err != nil {
		return nil, l, err
	}
	pd := jit.AnyPtr{Addr: dbuf.DevPtr(), Elem: dsl.BF16}
	args := []any{tmA, tmB, uint32(m), uint32(n), uint32(k), float32(1), float32(0), pd, pd}
	if l.HasD {
		tmD, err := tensorMap(dbuf, l.D)
		if err != nil {
			return nil, l, err
		}
		args = append(args, tmD)
	}
	return append(args, epi...), l, nil
}

// benchMLP runs the block for t tokens (see runMLP).
func benchMLP(d *jit.Device, t, hd, ff, reps int) error {
	rng := rand.New(rand.NewSource(int64(t*7 + hd + ff)))
	host := func(n int, scale float64) []fp.BF16 {
		v := make([]fp.BF16, n)
		for i := range v {
			v[i] = fp.BF16Of(float32(scale * (2*rng.Float64() - 1)))
		}
		return v
	}
	hx, hw1, hw2 := host(t*hd, 1), host(hd*ff, 2/math.Sqrt(float64(hd))), host(ff*hd, 2/math.Sqrt(float64(ff)))
	hb1 := make([]float32, ff)
	for i, b := range host(ff, 1) {
		hb1[i] = b.Float32()
	}
	var bufs []*jit.Buffer[fp.BF16]
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	buf := func(v []fp.BF16, n int) (*jit.Buffer[fp.BF16], error) {
		b, err := jit.Alloc[fp.BF16](d, n)
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, b)
		if v != nil {
			return b, b.CopyFromHost(v)
		}
		return b, nil
	}
	x, err := buf(hx, t*hd)
	if err != nil {
		return err
	}
	w1, err := buf(hw1, hd*ff)
	if err != nil {
		return err
	}
	w2, err := buf(hw2, ff*hd)
	if err != nil {
		return err
	}
	h, err := buf(nil, t*ff)
	if err != nil {
		return err
	}
	y, err := buf(nil, t*hd)
	if err != nil {
		return err
	}
	b1, err := jit.Alloc[float32](d, ff)
	if err != nil {
		return err
	}
	defer b1.Free()
	if err := b1.CopyFromHost(hb1); err != nil {
		return err
	}
	up, err := loadMLPGemm(d, kernels.Epilogue{Bias: true, Act: kernels.SiLU}, t, ff, hd)
	if err != nil {
		return err
	}
	defer up.mod.Close()
	down, err := loadMLPGemm(d, kernels.Epilogue{Residual: true}, t, hd, ff)
	if err != nil {
		return err
	}
	defer down.mod.Close()
	sms := max(d.Info().Multiproc, 1)
	null32, null16 := jit.AnyPtr{Elem: dsl.F32}, jit.AnyPtr{Elem: dsl.BF16}
	upArgs, upL, err := up.args(x, w1, h, t, ff, hd, sms, []any{jit.AnyPtr{Addr: b1.DevPtr(), Elem: dsl.F32}, null32, null32, null16})
	if err != nil {
		return err
	}
	downArgs, downL, err := down.args(h, w2, y, t, hd, ff, sms, []any{null32, null32, null32, jit.AnyPtr{Addr: x.DevPtr(), Elem: dsl.BF16}})
	if err != nil {
		return err
	}
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	launch := func(g *mlpGemm, l kernels.GemmSM90Launch, args []any) func() error {
		lc := jit.LaunchConfig{Grid: jit.D1(l.Grid), Block: jit.D1(l.Block), SharedMem: l.SharedBytes, Stream: s}
		if l.Cluster > 1 {
			lc.Cluster = jit.D1(l.Cluster)
		}
		return func() error { return g.fn.Launch(lc, args...) }
	}
	l1, l2 := launch(up, upL, upArgs), launch(down, downL, downArgs)
	t1, err := timeIt(d, s, reps, l1)
	if err != nil {
		return err
	}
	t2, err := timeIt(d, s, reps, l2)
	if err != nil {
		return err
	}
	tb, err := timeIt(d, s, reps, func() error {
		if err := l1(); err != nil {
			return err
		}
		return l2()
	})
	if err != nil {
		return err
	}
	gh, gy := make([]fp.BF16, t*ff), make([]fp.BF16, t*hd)
	if err := h.CopyToHost(gh); err != nil {
		return err
	}
	if err := y.CopyToHost(gy); err != nil {
		return err
	}
	// Samples against float64: H from X, W1, b1; Y from the GPU's H, W2 and X. tanh.approx
	// errs by up to 2^-12*|v| (kernels.SiLU).
	f := func(v fp.BF16) float64 { return float64(v.Float32()) }
	worstH, worstY := 0.0, 0.0
	for i := 0; i < 256; i++ {
		r, c := rng.Intn(t), rng.Intn(ff)
		v, abs := float64(hb1[c]), math.Abs(float64(hb1[c]))
		for l := 0; l < hd; l++ {
			p := f(hx[r*hd+l]) * f(hw1[l*ff+c])
			v += p
			abs += math.Abs(p)
		}
		want := ref.ActRef(kernels.SiLU, v)
		tol := 1.2*float64(hd+6)*0x1p-23*abs + 0x1p-7*math.Abs(want) + 0x1p-12*math.Abs(v) + 1e-30
		worstH = math.Max(worstH, math.Abs(f(gh[r*ff+c])-want)/tol)
		r, c = rng.Intn(t), rng.Intn(hd)
		v, abs = 0, 0
		for l := 0; l < ff; l++ {
			p := f(gh[r*ff+l]) * f(hw2[l*hd+c])
			v += p
			abs += math.Abs(p)
		}
		want = v + f(hx[r*hd+c])
		tol = float64(ff+6)*0x1p-23*abs + 0x1p-7*math.Abs(want) + 1e-30
		worstY = math.Max(worstY, math.Abs(f(gy[r*hd+c])-want)/tol)
	}
	us := func(x interface{ Seconds() float64 }) float64 { return x.Seconds() * 1e6 }
	fl1, fl2 := 2*float64(t)*float64(ff)*float64(hd), 2*float64(t)*float64(hd)*float64(ff)
	fmt.Printf("mlp %d tokens: up %s %.1f us (%.1f TFLOP/s), down %s %.1f us (%.1f TFLOP/s), block %.1f us; sampled error H %.3g, Y %.3g of tolerance\n",
		t, up.cfg.Name(), us(t1), fl1/t1.Seconds()/1e12, down.cfg.Name(), us(t2), fl2/t2.Seconds()/1e12, us(tb), worstH, worstY)
	if worstH > 1 || worstY > 1 {
		return fmt.Errorf("sampled H or Y differs from the float64 reference (%.3g, %.3g x tolerance)", worstH, worstY)
	}
	return nil
}
