package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ops"
	"github.com/kgen-dev/kgen/ptx"
	"github.com/kgen-dev/kgen/tune"
)

// runOps is `gpubench ops`: each op of package ops against launching the kernel it chooses
// directly with jit (built and launched here, independently of ops), in the same call on the
// same stream: the GPU time of each (CUDA events, median of -reps after 3 warm-ups) and
// their ratio; then the host cost of a call, ns per op call against ns per
// Function.Launch of the same kernel (small shapes, so the GPU keeps up with the host;
// the median of -rounds rounds of -calls calls each, alternating), with Go allocations per
// call. Without the cuda tag it runs on the emulator with -small shapes, which checks only
// that it works.
func runOps(args []string) error {
	fs := flag.NewFlagSet("ops", flag.ExitOnError)
	reps := fs.Int("reps", 30, "timed repetitions per op (after 3 warm-ups)")
	calls := fs.Int("calls", 2000, "calls per round of the host-cost measurement")
	rounds := fs.Int("rounds", 7, "rounds of the host-cost measurement (median)")
	small := fs.Bool("small", false, "small shapes (for the emulator)")
	only := fs.String("only", "", "comma-separated op cases to run (default all; see the table's first column)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	d, err := jit.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Printf("device: %s (%s, %d SMs)\n", d.Info().Name, d.Info().Arch, d.Info().Multiproc)
	b := &opsBench{d: d, s: s, ctx: context.Background()}
	defer b.free()
	cases := b.cases(*small)
	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	fmt.Printf("%-22s %-44s %12s %12s %8s\n", "case", "kernel", "ops us", "direct us", "ops/dir")
	for _, c := range cases {
		if len(want) > 0 && !want[c.name] {
			continue
		}
		if err := b.gpuTime(c, *reps); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	fmt.Printf("\nhost cost per call (median of %d rounds of %d calls; small shapes)\n", *rounds, *calls)
	fmt.Printf("%-22s %12s %12s %10s %12s %12s\n", "case", "ops ns", "launch ns", "diff ns", "ops allocs", "launch allocs")
	for _, c := range b.hostCases() {
		if len(want) > 0 && !want[c.name] {
			continue
		}
		if err := b.hostCost(c, *calls, *rounds); err != nil {
			return fmt.Errorf("%s (host cost): %w", c.name, err)
		}
	}
	return nil
}

// opsBench holds the device, the stream and what the cases allocated.
type opsBench struct {
	d     *jit.Device
	s     *jit.Stream
	ctx   context.Context
	frees []func() error
	mods  []*jit.Module
}

func (b *opsBench) free() {
	for _, f := range b.frees {
		f()
	}
	for _, m := range b.mods {
		m.Close()
	}
}

// opCase is one op: call runs it through ops; direct launches the same kernel with jit
// (kernel is its name, which ops must have chosen too).
type opCase struct {
	name   string
	kernel string
	call   func() error
	direct func() error
}

// opsAlloc allocates n elements of T filled with small values.
func opsAlloc[T jit.Elem](b *opsBench, n int, conv func(float32) T) (*jit.Buffer[T], error) {
	buf, err := jit.Alloc[T](b.d, n)
	if err != nil {
		return nil, err
	}
	b.frees = append(b.frees, buf.Free)
	h := make([]T, n)
	for i := range h {
		h[i] = conv(float32(i%17)/16 - 0.5)
	}
	return buf, buf.CopyFromHost(h)
}

func f32(x float32) float32 { return x }

// load builds a kernel with write for target and loads it.
func (b *opsBench) load(name string, target ptx.Target, write func(k *dsl.Kernel)) (*jit.Function, error) {
	k := dsl.New(name, dsl.WithTarget(target))
	write(k)
	mod, err := k.Build()
	if err != nil {
		return nil, err
	}
	m, err := b.d.Load(jit.Source{Module: mod, Params: map[string][]jit.ParamInfo{name: jit.ParamInfos(k.Params())}})
	if err != nil {
		return nil, err
	}
	b.mods = append(b.mods, m)
	return m.Function(name)
}

// registered loads the library kernel id for target as the registry builds it.
func (b *opsBench) registered(id kernels.ID, target ptx.Target) (*jit.Function, string, error) {
	spec, err := kernels.Find(id)
	if err != nil {
		return nil, "", err
	}
	v, err := spec.BuildVariant(kernels.Config{Target: target, DType: id.DType})
	if err != nil {
		return nil, "", err
	}
	m, err := b.d.Load(jit.Source{Module: v.Module, Params: map[string][]jit.ParamInfo{v.Entry: jit.ParamInfos(v.Params)}})
	if err != nil {
		return nil, "", err
	}
	b.mods = append(b.mods, m)
	fn, err := m.Function(v.Entry)
	return fn, v.Entry, err
}

// target is the device's architecture, as ops builds its non-gemm kernels for.
func (b *opsBench) target() ptx.Target {
	if t := ptx.Target(b.d.Info().Arch); t.Valid() {
		return t
	}
	return ptx.SM90
}

// softmaxCase is Softmax over rows x cols (a view of rows x ld from column 0 when ld > cols).
func (b *opsBench) softmaxCase(name string, rows, cols, ld int) (opCase, error) {
	in, err := opsAlloc(b, rows*ld, f32)
	if err != nil {
		return opCase{}, err
	}
	out, err := opsAlloc(b, rows*ld, f32)
	if err != nil {
		return opCase{}, err
	}
	ti, _ := ops.Strided(in, 0, []int{rows, cols}, []int{ld, 1})
	to, _ := ops.Strided(out, 0, []int{rows, cols}, []int{ld, 1})
	c := opCase{name: name, call: func() error { return ops.Softmax(b.ctx, b.s, to, ti) }}
	pi, po := jit.AnyOf[float32](in), jit.AnyOf[float32](out)
	if ld != cols {
		c.kernel = "softmax_strided_f32"
		fn, err := b.load(c.kernel, b.target(), func(k *dsl.Kernel) { kernels.SoftmaxStrided(k, dsl.F32); k.LaunchBounds(1024, 0) })
		if err != nil {
			return c, err
		}
		sh := kernels.SoftmaxShape(rows, cols)
		lc := jit.LaunchConfig{Grid: jit.D1(sh.Grid), Block: jit.D1(sh.Block), Stream: b.s}
		c.direct = func() error { return fn.Launch(lc, pi, po, uint32(rows), uint32(cols), uint32(ld), uint32(ld)) }
		return c, nil
	}
	rl, err := kernels.ChooseRowKernel(kernels.FamilySoftmax, dsl.F32, rows, cols, max(b.d.Info().Multiproc, 1))
	if err != nil {
		return c, err
	}
	fn, entry, err := b.registered(rl.ID, b.target())
	if err != nil {
		return c, err
	}
	c.kernel = entry
	lc := jit.LaunchConfig{Grid: jit.D1(rl.Grid), Block: jit.D1(rl.Block), Stream: b.s}
	if rl.Split {
		sc, err := jit.Alloc[uint32](b.d, rl.ScratchWords)
		if err != nil {
			return c, err
		}
		b.frees = append(b.frees, sc.Free)
		if err := sc.CopyFromHost(make([]uint32, rl.ScratchWords)); err != nil {
			return c, err
		}
		lc.CoResident = true
		c.direct = func() error {
			return fn.Launch(lc, pi, po, sc, uint32(rows), uint32(cols), uint32(rl.Parts))
		}
		return c, nil
	}
	c.direct = func() error { return fn.Launch(lc, pi, po, uint32(rows), uint32(cols)) }
	return c, nil
}

// rowSumCase is RowSum over a dense rows x cols matrix.
func (b *opsBench) rowSumCase(name string, rows, cols int) (opCase, error) {
	in, err := opsAlloc(b, rows*cols, f32)
	if err != nil {
		return opCase{}, err
	}
	out, err := opsAlloc(b, rows, f32)
	if err != nil {
		return opCase{}, err
	}
	ti, _ := ops.New(in, rows, cols)
	to, _ := ops.New(out, rows)
	c := opCase{name: name, call: func() error { return ops.RowSum(b.ctx, b.s, to, ti) }}
	rl, err := kernels.ChooseRowKernel(kernels.FamilyRowSum, dsl.F32, rows, cols, max(b.d.Info().Multiproc, 1))
	if err != nil {
		return c, err
	}
	if rl.Split {
		return c, fmt.Errorf("row_sum %dx%d: ChooseRowKernel picks the split kernel; pick a shape of many rows", rows, cols)
	}
	fn, entry, err := b.registered(rl.ID, b.target())
	if err != nil {
		return c, err
	}
	c.kernel = entry
	lc := jit.LaunchConfig{Grid: jit.D1(rl.Grid), Block: jit.D1(rl.Block), Stream: b.s}
	pi, po := jit.AnyOf[float32](in), jit.AnyOf[float32](out)
	c.direct = func() error { return fn.Launch(lc, pi, po, uint32(rows), uint32(cols)) }
	return c, nil
}

// transposeCase is Transpose of an m x n matrix.
func (b *opsBench) transposeCase(name string, m, n int) (opCase, error) {
	in, err := opsAlloc(b, m*n, f32)
	if err != nil {
		return opCase{}, err
	}
	out, err := opsAlloc(b, m*n, f32)
	if err != nil {
		return opCase{}, err
	}
	ti, _ := ops.New(in, m, n)
	to, _ := ops.New(out, n, m)
	c := opCase{name: name, call: func() error { return ops.Transpose(b.ctx, b.s, to, ti) }}
	fn, entry, err := b.registered(kernels.ID{Family: kernels.FamilyTranspose, DType: dsl.F32}, b.target())
	if err != nil {
		return c, err
	}
	c.kernel = entry
	lc := jit.LaunchConfig{Grid: jit.Dim3{X: (n + 31) / 32, Y: (m + 31) / 32, Z: 1}, Block: jit.D1(256), Stream: b.s}
	pi, po := jit.AnyOf[float32](in), jit.AnyOf[float32](out)
	c.direct = func() error { return fn.Launch(lc, pi, po, uint32(m), uint32(n)) }
	return c, nil
}

// streamCase is Add (axpy false) or Axpy over n f32 elements.
func (b *opsBench) streamCase(name string, n int, axpy bool) (opCase, error) {
	x, err := opsAlloc(b, n, f32)
	if err != nil {
		return opCase{}, err
	}
	y, err := opsAlloc(b, n, f32)
	if err != nil {
		return opCase{}, err
	}
	z, err := opsAlloc(b, n, f32)
	if err != nil {
		return opCase{}, err
	}
	tx, _ := ops.New(x, n)
	ty, _ := ops.New(y, n)
	tz, _ := ops.New(z, n)
	fam := kernels.FamilyVectorAdd
	c := opCase{name: name, call: func() error { return ops.Add(b.ctx, b.s, tz, tx, ty) }}
	if axpy {
		fam = kernels.FamilyAxpy
		c.call = func() error { return ops.Axpy(b.ctx, b.s, ty, tx, float32(0.5)) }
	}
	fn, entry, err := b.registered(kernels.ID{Family: fam, DType: dsl.F32}, b.target())
	if err != nil {
		return c, err
	}
	c.kernel = entry
	sh := kernels.StreamShape(n, dsl.F32)
	lc := jit.LaunchConfig{Grid: jit.D1(sh.Grid), Block: jit.D1(sh.Block), Stream: b.s}
	px, py, pz := jit.AnyOf[float32](x), jit.AnyOf[float32](y), jit.AnyOf[float32](z)
	c.direct = func() error { return fn.Launch(lc, px, py, pz, uint32(n)) }
	if axpy {
		c.direct = func() error { return fn.Launch(lc, float32(0.5), px, py, uint32(n)) }
	}
	return c, nil
}

// matmulCase is Matmul of bf16 (or e4m3: B n x k, transposed) m x n x k into bf16 on
// gemm_sm90 as ops picks it (tune.GemmConfig: a cached winner, else GemmSM90For); the direct launch builds its tensor maps from
// GemmSM90Config.Launch.
func matmulCase[T jit.Elem](b *opsBench, name string, m, n, k int, conv func(float32) T) (opCase, error) {
	return matmulEpiCase(b, name, m, n, k, conv, false)
}

// matmulEpiCase is matmulCase, with epi a Bias and ReLU epilogue (MatmulOptions).
func matmulEpiCase[T jit.Elem](b *opsBench, name string, m, n, k int, conv func(float32) T, epi bool) (opCase, error) {
	in := dsl.Type(jit.ElemType[T]())
	a, err := opsAlloc(b, m*k, conv)
	if err != nil {
		return opCase{}, err
	}
	bb, err := opsAlloc(b, k*n, conv)
	if err != nil {
		return opCase{}, err
	}
	dd, err := opsAlloc(b, m*n, fp.BF16Of)
	if err != nil {
		return opCase{}, err
	}
	ta, _ := ops.New(a, m, k)
	tb, _ := ops.New(bb, k, n)
	if in == dsl.E4M3 {
		nk, _ := ops.New(bb, n, k)
		tb, _ = nk.Transpose()
	}
	td, _ := ops.New(dd, m, n)
	var opts *ops.MatmulOptions[fp.BF16]
	var e kernels.Epilogue
	var epiArgs []any
	if epi {
		bias, err := opsAlloc(b, n, f32)
		if err != nil {
			return opCase{}, err
		}
		tbias, _ := ops.New(bias, n)
		opts = &ops.MatmulOptions[fp.BF16]{Alpha: 1, Bias: tbias, Act: kernels.ReLU}
		e = kernels.Epilogue{Bias: true, Act: kernels.ReLU}
		null := jit.AnyPtr{Elem: ptx.F32}
		epiArgs = []any{jit.AnyOf[float32](bias), null, null, jit.AnyPtr{Elem: ptx.BF16}}
	}
	c := opCase{name: name, call: func() error { return ops.Matmul(b.ctx, b.s, td, ta, tb, opts) }}
	if b.d.Info().SM != 90 {
		return c, fmt.Errorf("the direct gemm_sm90 launch needs compute capability 9.0; the device is %s", b.d.Info().Arch)
	}
	sms := max(b.d.Info().Multiproc, 1)
	cfg, _, err := tune.GemmConfig(nil, b.d.Info(), tune.GemmProblem{In: in, Out: dsl.BF16, M: m, N: n, K: k})
	if err != nil {
		return c, err
	}
	cfg.Epilogue = e
	l, err := cfg.Launch(m, n, k, sms)
	if err != nil {
		return c, err
	}
	c.kernel = cfg.Name()
	fn, err := b.load(cfg.Name(), ptx.SM90a, func(kb *dsl.Kernel) { kernels.GemmSM90(kb, cfg) })
	if err != nil {
		return c, err
	}
	tmA, err := jit.NewTensorMap(a, l.A.Dims[:], l.A.Strides[:], l.A.Box[:], jit.Swizzle(l.A.Swizzle))
	if err != nil {
		return c, err
	}
	tmB, err := jit.NewTensorMap(bb, l.B.Dims[:], l.B.Strides[:], l.B.Box[:], jit.Swizzle(l.B.Swizzle))
	if err != nil {
		return c, err
	}
	lc := jit.LaunchConfig{Grid: jit.D1(l.Grid), Block: jit.D1(l.Block), SharedMem: l.SharedBytes, Stream: b.s}
	if l.Cluster > 1 {
		lc.Cluster = jit.D1(l.Cluster)
	}
	pd := jit.AnyOf[fp.BF16](dd)
	args := []any{tmA, tmB, uint32(m), uint32(n), uint32(k), float32(1), float32(0), pd, pd}
	if l.HasD {
		tmD, err := jit.NewTensorMap(dd, l.D.Dims[:], l.D.Strides[:], l.D.Box[:], jit.Swizzle(l.D.Swizzle))
		if err != nil {
			return c, err
		}
		args = append(args, tmD)
	}
	args = append(args, epiArgs...)
	c.direct = func() error { return fn.Launch(lc, args...) }
	return c, nil
}

// cases are the timed ops at the shapes of docs/bench.md (small: shapes for the emulator).
func (b *opsBench) cases(small bool) []opCase {
	type mk func() (opCase, error)
	var ms []mk
	if small {
		ms = []mk{
			func() (opCase, error) { return b.softmaxCase("softmax", 64, 256, 256) },
			func() (opCase, error) { return b.softmaxCase("softmax_view", 64, 200, 256) },
			func() (opCase, error) { return b.rowSumCase("row_sum", 64, 256) },
			func() (opCase, error) { return b.transposeCase("transpose", 96, 64) },
			func() (opCase, error) { return b.streamCase("add", 1<<14, false) },
			func() (opCase, error) { return b.streamCase("axpy", 1<<14, true) },
			func() (opCase, error) { return matmulCase(b, "matmul_bf16", 128, 128, 64, fp.BF16Of) },
			func() (opCase, error) { return b.attentionCase("attention", 1, 2, 1, 70, 90, 64, true) },
		}
	} else {
		ms = []mk{
			func() (opCase, error) { return b.softmaxCase("softmax", 8192, 4096, 4096) },
			func() (opCase, error) { return b.softmaxCase("softmax_view", 8192, 4000, 4096) },
			func() (opCase, error) { return b.softmaxCase("softmax_split", 64, 262144, 262144) },
			func() (opCase, error) { return b.rowSumCase("row_sum", 8192, 4096) },
			func() (opCase, error) { return b.transposeCase("transpose", 8192, 8192) },
			func() (opCase, error) { return b.streamCase("add", 1<<28, false) },
			func() (opCase, error) { return b.streamCase("axpy", 1<<28, true) },
			func() (opCase, error) { return matmulCase(b, "matmul_bf16_4096", 4096, 4096, 4096, fp.BF16Of) },
			func() (opCase, error) { return matmulCase(b, "matmul_bf16_8192", 8192, 8192, 8192, fp.BF16Of) },
			func() (opCase, error) { return matmulCase(b, "matmul_bf16_skinny", 128, 14336, 4096, fp.BF16Of) },
			func() (opCase, error) { return matmulCase(b, "matmul_e4m3_4096", 4096, 4096, 4096, fp.E4M3Of) },
			func() (opCase, error) { return b.attentionCase("attention_d128_4k", 4, 16, 16, 4096, 4096, 128, false) },
			func() (opCase, error) {
				return b.attentionCase("attention_d128_4k_causal", 4, 16, 16, 4096, 4096, 128, true)
			},
			func() (opCase, error) {
				return b.attentionCase("attention_decode_gqa8", 32, 32, 4, 1, 8192, 128, false)
			},
		}
	}
	var cs []opCase
	for _, m := range ms {
		c, err := m()
		if err != nil {
			fmt.Printf("%-22s skipped: %v\n", c.name, err)
			continue
		}
		cs = append(cs, c)
	}
	return cs
}

// gpuTime times c through ops and directly, alternating blocks of reps, and checks that
// ops chose c's kernel.
func (b *opsBench) gpuTime(c opCase, reps int) error {
	if err := c.call(); err != nil { // ops makes its plan
		return err
	}
	if err := b.s.Synchronize(); err != nil {
		return err
	}
	found := false
	for _, k := range ops.Kernels(b.d) {
		found = found || k == c.kernel
	}
	if !found {
		return fmt.Errorf("ops did not load %s (it loaded %v): the direct launch times another kernel", c.kernel, ops.Kernels(b.d))
	}
	var to, td []time.Duration
	for i := 0; i < 3; i++ {
		t, err := timeIt(b.d, b.s, reps, c.call)
		if err != nil {
			return err
		}
		to = append(to, t)
		if t, err = timeIt(b.d, b.s, reps, c.direct); err != nil {
			return err
		}
		td = append(td, t)
	}
	o, d := medianDur(to), medianDur(td)
	fmt.Printf("%-22s %-44s %12.2f %12.2f %8.4f\n", c.name, c.kernel, us(o), us(d), float64(o)/float64(d))
	return nil
}

// hostCases are small problems whose kernels take less GPU time than a launch takes host
// time: the loop measures the host.
func (b *opsBench) hostCases() []opCase {
	var cs []opCase
	for _, m := range []func() (opCase, error){
		func() (opCase, error) { return b.softmaxCase("softmax_8x32", 8, 32, 32) },
		func() (opCase, error) { return b.softmaxCase("softmax_view_8x24", 8, 24, 32) },
		func() (opCase, error) { return b.streamCase("add_1024", 1024, false) },
		func() (opCase, error) { return matmulCase(b, "matmul_bf16_64", 64, 64, 64, fp.BF16Of) },
		func() (opCase, error) {
			return matmulEpiCase(b, "matmul_bf16_64_bias_relu", 64, 64, 64, fp.BF16Of, true)
		},
	} {
		c, err := m()
		if err != nil {
			fmt.Printf("%-22s skipped: %v\n", c.name, err)
			continue
		}
		cs = append(cs, c)
	}
	return cs
}

// hostCost measures the host time and Go allocations per call of c through ops and
// through Function.Launch: rounds of calls back to back, each round synchronized after
// its calls (outside the timing of the calls' issue).
func (b *opsBench) hostCost(c opCase, calls, rounds int) error {
	if err := c.call(); err != nil {
		return err
	}
	if err := b.s.Synchronize(); err != nil {
		return err
	}
	round := func(f func() error) (time.Duration, float64, error) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		t0 := time.Now()
		for i := 0; i < calls; i++ {
			if err := f(); err != nil {
				return 0, 0, err
			}
		}
		t := time.Since(t0)
		runtime.ReadMemStats(&m1)
		return t, float64(m1.Mallocs-m0.Mallocs) / float64(calls), b.s.Synchronize()
	}
	var to, td []time.Duration
	var ao, ad float64
	for r := 0; r < rounds; r++ {
		t, a, err := round(c.call)
		if err != nil {
			return err
		}
		to, ao = append(to, t), a
		if t, a, err = round(c.direct); err != nil {
			return err
		}
		td, ad = append(td, t), a
	}
	o := float64(medianDur(to).Nanoseconds()) / float64(calls)
	d := float64(medianDur(td).Nanoseconds()) / float64(calls)
	fmt.Printf("%-22s %12.0f %12.0f %10.0f %12.1f %12.1f\n", c.name, o, d, o-d, ao, ad)
	return nil
}

func medianDur(ts []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ts...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
