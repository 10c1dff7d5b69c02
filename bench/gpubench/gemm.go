package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

// gemmMain is `gpubench gemm`: times kgen's gemm (row-major A, B, D; out = in) at each size,
// checks a sample of D against a float64 reference, and with -dir writes the inputs, the
// output and the timing for torch_gemm.py, which times cuBLAS (torch.matmul) on the same
// inputs in the same device call and compares the whole output.
// runGemm times the gemm kernel against cuBLAS (through torch_gemm.py) per problem size.
func runGemm(args []string) error {
	fs := flag.NewFlagSet("gemm", flag.ExitOnError)
	sizes := fs.String("sizes", "4096,8192", "problems: N (N^3) or MxNxK, comma-separated")
	dtype := fs.String("dtype", "bf16", "input and output type: bf16 or f16; e4m3 (with -sm90): e4m3 inputs, B N x K, bf16 out")
	reps := fs.Int("reps", 20, "timed repetitions (after 3 warm-ups)")
	dir := fs.String("dir", "", "write a, b, d and kgen.json per problem here for torch_gemm.py")
	fs.BoolVar(&gemmFull, "full", false, "check every element of D (filled with NaN before the launches) against a float64 reference computed on the host's cores, not a sample")
	cfg := kernels.DefaultGemmConfig(dsl.BF16)
	fs.IntVar(&cfg.BM, "bm", cfg.BM, "block tile M")
	fs.IntVar(&cfg.BN, "bn", cfg.BN, "block tile N")
	fs.IntVar(&cfg.BK, "bk", cfg.BK, "block tile K")
	fs.IntVar(&cfg.WarpsM, "wm", cfg.WarpsM, "warps along M")
	fs.IntVar(&cfg.WarpsN, "wn", cfg.WarpsN, "warps along N")
	fs.IntVar(&cfg.Stages, "stages", cfg.Stages, "cp.async stages")
	fs.IntVar(&cfg.IssueAfter, "issue", cfg.IssueAfter, "the K block before which a step issues the next tile's loads")
	fs.BoolVar(&cfg.DoubleBuffer, "db", cfg.DoubleBuffer, "double-buffer the fragments (load one K block ahead)")
	fs.IntVar(&cfg.MinBlocks, "minblocks", cfg.MinBlocks, "blocks per SM that ptxas must fit (.minnctapersm; 0: its choice)")
	sm90 := fs.Bool("sm90", false, "run gemm_sm90 (TMA + wgmma, warp-specialized, persistent; sm_90a) instead of the mma.sync gemm")
	h := kernels.DefaultGemmSM90Config(dsl.BF16)
	fs.IntVar(&h.BN, "sm90-bn", h.BN, "gemm_sm90: block tile N (64, 128, 256; default: kernels.GemmSM90For's per shape)")
	fs.IntVar(&h.Consumers, "sm90-consumers", h.Consumers, "gemm_sm90: consumer warpgroups (1, 2; default: GemmSM90For's)")
	fs.IntVar(&h.Stages, "sm90-stages", h.Stages, "gemm_sm90: TMA stages (default: GemmSM90For's)")
	fs.IntVar(&h.ClusterM, "sm90-cluster", 0, "gemm_sm90: blocks per cluster along M sharing B by TMA multicast (0 or 1: none, 2); also with GemmSM90For's picks")
	fs.IntVar(&sm90GridSMs, "sm90-grid-sms", 0, "gemm_sm90: size the persistent grid for this many SMs (0: the device's; with clusters, what may run at once can be fewer)")
	fs.BoolVar(&h.TMAStore, "sm90-tma-store", false, "gemm_sm90: the epilogue stores D through shared memory with TMA (true or false; given, it overrides GemmSM90For's picks, their stages cut to fit)")
	fs.BoolVar(&h.ShiftDivision, "sm90-shiftdiv", false, "gemm_sm90: divisions and remainders by constants as shifts (GemmSM90Config.ShiftDivision; given, it overrides GemmSM90For's picks)")
	fs.BoolVar(&h.PingPong, "sm90-pingpong", false, "gemm_sm90: the ping-pong schedule, two consumer warpgroups each with its own 64 x BN tiles, one's epilogue under the other's mainloop (needs -sm90-consumers 2; given with GemmSM90For's picks, it overrides them: two consumers of 64-row tiles, stages cut to fit)")
	epi := fs.String("epilogue", "", "also time the gemm with these epilogue options beside the plain one, in the same call (bias,silu; bias,gelu; relu; residual; ...: kernels.ParseEpilogue); with -dir torch_gemm.py times torch's matmul + bias + activation (+ residual) on the same inputs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := setGemmEpi(*epi, *dtype); err != nil {
		return usageError{err}
	}
	// Without -sm90-* flags each shape runs what kernels.GemmSM90For picks for it;
	// -sm90-cluster, -sm90-tma-store, -sm90-pingpong and -sm90-shiftdiv, when given, then override its
	// pick's options.
	auto := true
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		switch f.Name {
		case "sm90-cluster", "sm90-tma-store", "sm90-grid-sms", "sm90-pingpong", "sm90-shiftdiv":
		default:
			if strings.HasPrefix(f.Name, "sm90-") {
				auto = false
			}
		}
	})
	switch *dtype {
	case "bf16":
	case "f16":
		cfg.In, cfg.Out = dsl.F16, dsl.F16
		h.In, h.Out = dsl.F16, dsl.F16
	case "e4m3":
		if !*sm90 {
			return usagef("-dtype e4m3 needs -sm90 (the mma.sync gemm takes 16-bit inputs)")
		}
		h.In, h.Out = dsl.E4M3, dsl.BF16
	default:
		return usagef("-dtype %q: want bf16, f16 or e4m3", *dtype)
	}
	d, err := jit.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	var hp *kernels.GemmSM90Config
	if *sm90 {
		hp = &h
		if auto {
			fmt.Printf("device: %s (%s); gemm_sm90 as kernels.GemmSM90For picks per shape, persistent on %d SMs\n", d.Info().Name, d.Info().Arch, d.Info().Multiproc)
		} else {
			fmt.Printf("device: %s (%s); kernel %s, %d threads, %d B shared, persistent on %d SMs\n", d.Info().Name, d.Info().Arch, h.Name(), h.Threads(), h.SharedBytes(), d.Info().Multiproc)
		}
	} else {
		fmt.Printf("device: %s (%s); kernel %s, %d threads, %d B shared\n", d.Info().Name, d.Info().Arch, cfg.Name(), cfg.Threads(), cfg.SharedBytes())
	}
	for _, s := range strings.Split(*sizes, ",") {
		m, n, k, err := parseSize(s)
		if err != nil {
			return usageError{err}
		}
		gemmEpiPick = hp != nil && auto && !set["sm90-tma-store"]
		if hp != nil && auto {
			opt := h
			h, err = kernels.GemmSM90For(h.In, h.Out, m, n, k, max(d.Info().Multiproc, 1))
			if err != nil {
				return fmt.Errorf("%dx%dx%d: %w", m, n, k, err)
			}
			if set["sm90-cluster"] {
				h.ClusterM = opt.ClusterM
			}
			if set["sm90-tma-store"] {
				h.TMAStore = opt.TMAStore
			}
			if set["sm90-shiftdiv"] {
				h.ShiftDivision = opt.ShiftDivision
			}
			if set["sm90-pingpong"] && opt.PingPong {
				// The pick's tile rows as 64-row tiles of two alternating warpgroups.
				h.PingPong, h.Consumers = true, 2
			}
			for h.Stages > 2 && h.Check() != nil {
				h.Stages--
			}
		}
		if err := benchGemm(d, cfg, hp, m, n, k, *reps, *dir); err != nil {
			return fmt.Errorf("%dx%dx%d: %w", m, n, k, err)
		}
	}
	return nil
}

func parseSize(s string) (m, n, k int, err error) {
	parts := strings.Split(strings.TrimSpace(s), "x")
	var v []int
	for _, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x <= 0 {
			return 0, 0, 0, fmt.Errorf("bad size %q (want N or MxNxK)", s)
		}
		v = append(v, x)
	}
	switch len(v) {
	case 1:
		return v[0], v[0], v[0], nil
	case 3:
		return v[0], v[1], v[2], nil
	}
	return 0, 0, 0, fmt.Errorf("bad size %q (want N or MxNxK)", s)
}

// gemmFull is -full: benchGemm compares the whole D (fullCheck), not 256 samples.
var gemmFull bool

// gemmEpiPick is set for a shape whose gemm_sm90 configuration is GemmSM90For's pick with no
// -sm90-tma-store given: its epilogue run takes the library's variant (WithEpilogue).
var gemmEpiPick bool

// gemmRecord is what torch_gemm.py reads back.
type gemmRecord struct {
	M, N, K   int
	DType     string
	Kernel    string
	KgenUS    float64
	SampleErr float64 // the largest sampled |D - ref| / tolerance
}

// benchGemm times one problem: the mma.sync gemm of cfg, or gemm_sm90 of hp when not nil.
func benchGemm(d *jit.Device, cfg kernels.GemmConfig, hp *kernels.GemmSM90Config, m, n, k, reps int, dir string) error {
	if hp != nil && hp.FP8() {
		return benchGemmFP8(d, *hp, m, n, k, reps, dir)
	}
	if m%8 != 0 || n%8 != 0 || k%8 != 0 {
		cfg.Aligned = false
	}
	target := ptx.Target(d.Info().Arch)
	if !target.Valid() {
		target = ptx.SM90
	}
	name := cfg.Name()
	if hp != nil {
		if err := hp.CheckShape(m, n, k); err != nil {
			return err
		}
		name, target = hp.Name(), ptx.SM90a
	} else if err := cfg.CheckShape(m, n, k); err != nil {
		return err
	}
	kb := dsl.New(name, dsl.WithTarget(target))
	if hp != nil {
		kernels.GemmSM90(kb, *hp)
	} else {
		kernels.Gemm(kb, cfg)
	}
	mod, err := kb.Build()
	if err != nil {
		return err
	}
	jm, err := d.Load(jit.Source{Module: mod, Params: map[string][]jit.ParamInfo{name: jit.ParamInfos(kb.Params())}})
	if err != nil {
		return err
	}
	defer jm.Close()
	fn, err := jm.Function(name)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewSource(int64(m*31 + n*7 + k)))
	conv := func(x float32) uint16 {
		if cfg.In == dsl.F16 {
			return uint16(fp.F16Of(x))
		}
		return uint16(fp.BF16Of(x))
	}
	back := func(h uint16) float64 {
		if cfg.In == dsl.F16 {
			return float64(fp.F16(h).Float32())
		}
		return float64(fp.BF16(h).Float32())
	}
	host := func(len int) []uint16 {
		v := make([]uint16, len)
		for i := range v {
			v[i] = conv(2*rng.Float32() - 1)
		}
		return v
	}
	ha, hb := host(m*k), host(k*n)
	a, err := jit.Alloc[uint16](d, m*k)
	if err != nil {
		return err
	}
	defer a.Free()
	b, err := jit.Alloc[uint16](d, k*n)
	if err != nil {
		return err
	}
	defer b.Free()
	out, err := jit.Alloc[uint16](d, m*n)
	if err != nil {
		return err
	}
	defer out.Free()
	if err := a.CopyFromHost(ha); err != nil {
		return err
	}
	if err := b.CopyFromHost(hb); err != nil {
		return err
	}
	hd := make([]uint16, m*n)
	if gemmFull {
		// D starts as NaN: an element no launch writes fails the full check.
		nan := uint16(0x7fc0) // bf16
		if cfg.In == dsl.F16 {
			nan = 0x7e00
		}
		for i := range hd {
			hd[i] = nan
		}
		if err := out.CopyFromHost(hd); err != nil {
			return err
		}
	}
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	readD := out.CopyToHost
	lc := jit.LaunchConfig{Grid: jit.D1(cfg.Grid(m, n)), Block: jit.D1(cfg.Threads()), SharedMem: cfg.SharedBytes(), Stream: s}
	// The buffers hold the 16-bit patterns; the kernel's parameters point to cfg's types.
	pa, pb, po := jit.AnyPtr{Addr: a.DevPtr(), Elem: cfg.In}, jit.AnyPtr{Addr: b.DevPtr(), Elem: cfg.In}, jit.AnyPtr{Addr: out.DevPtr(), Elem: cfg.Out}
	run := func() error {
		return fn.LaunchArgs(lc, launch.Gemm{A: pa, B: pb, M: uint32(m), N: uint32(n), K: uint32(k), Alpha: 1, C: po, D: po})
	}
	if hp != nil {
		var tmA, tmB jit.TensorMap
		var free func()
		var l kernels.GemmSM90Launch
		var err error
		if lc, l, err = sm90Launch(d, *hp, m, n, k, s); err != nil {
			return err
		}
		if hp.In == dsl.F16 {
			tmA, tmB, free, err = sm90Maps[fp.F16](d, l, ha, hb)
		} else {
			tmA, tmB, free, err = sm90Maps[fp.BF16](d, l, ha, hb)
		}
		if err != nil {
			return err
		}
		defer free()
		po := jit.AnyPtr{Addr: out.DevPtr(), Elem: hp.Out}
		var args any = launch.GemmSM90{TmA: tmA, TmB: tmB, M: uint32(m), N: uint32(n), K: uint32(k), Alpha: 1, C: po, D: po}
		if hp.TMAStore {
			var ob jit.AnyPtr
			var tmD jit.TensorMap
			var freeD func()
			if hp.Out == dsl.F16 {
				ob, tmD, readD, freeD, err = sm90OutMap[fp.F16](d, l)
			} else {
				ob, tmD, readD, freeD, err = sm90OutMap[fp.BF16](d, l)
			}
			if err != nil {
				return err
			}
			defer freeD()
			args = launch.GemmSM90Store{TmA: tmA, TmB: tmB, M: uint32(m), N: uint32(n), K: uint32(k), Alpha: 1, C: ob, D: ob, TmD: tmD}
		}
		run = func() error { return fn.LaunchArgs(lc, args) }
	}
	t, err := timeIt(d, s, reps, run)
	if err != nil {
		return err
	}
	if err := readD(hd); err != nil {
		return err
	}
	// A sample of D against float64 sums.
	worst := 0.0
	for i := 0; i < 256; i++ {
		r, c := rng.Intn(m), rng.Intn(n)
		sum, abs := 0.0, 0.0
		for l := 0; l < k; l++ {
			x := back(ha[r*k+l]) * back(hb[l*n+c])
			sum += x
			abs += math.Abs(x)
		}
		tol := float64(k+4)*0x1p-23*abs + 0x1p-7*math.Abs(sum) + 1e-30
		worst = math.Max(worst, math.Abs(back(hd[r*n+c])-sum)/tol)
	}
	if gemmFull {
		bad, fworst, first := fullCheck(ha, hb, hd, m, n, k, back)
		fmt.Printf("gemm %dx%dx%d %s: full check of all %d elements of D: %d outside the tolerance, worst %.3g of it\n", m, n, k, cfg.In, int64(m)*int64(n), bad, fworst)
		if bad > 0 {
			return fmt.Errorf("%d of %d elements of D differ from the float64 reference; first: %s", bad, int64(m)*int64(n), first)
		}
	}
	tflops := 2 * float64(m) * float64(n) * float64(k) / t.Seconds() / 1e12
	fmt.Printf("gemm %dx%dx%d %s: kgen %9.1f us %7.1f TFLOP/s (median of %d), sampled error %.3g of tolerance\n",
		m, n, k, cfg.In, float64(t.Nanoseconds())/1e3, tflops, reps, worst)
	fmt.Printf("  kernel %s\n", name)
	if worst > 1 {
		return fmt.Errorf("sampled D differs from the float64 reference (%.3g x tolerance)", worst)
	}
	if !gemmEpi.IsZero() {
		if err := benchGemmEpi(d, s, cfg, hp, m, n, k, reps, dir, ha, hb, float64(t.Nanoseconds())/1e3, conv, back); err != nil {
			return err
		}
	}
	if dir == "" {
		return nil
	}
	sub := filepath.Join(dir, fmt.Sprintf("%dx%dx%d", m, n, k))
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return err
	}
	for name, v := range map[string][]uint16{"a.bin": ha, "b.bin": hb, "d.bin": hd} {
		if err := os.WriteFile(filepath.Join(sub, name), unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 2*len(v)), 0o644); err != nil {
			return err
		}
	}
	rec, _ := json.Marshal(gemmRecord{M: m, N: n, K: k, DType: cfg.In.String(), Kernel: name,
		KgenUS: float64(t.Nanoseconds()) / 1e3, SampleErr: worst})
	return os.WriteFile(filepath.Join(sub, "kgen.json"), rec, 0o644)
}

// sm90Maps copies A (M x K) and B (K x N), row-major 16-bit values, into buffers of T (the
// type the kernel's tensor maps are over) and makes gemm_sm90's tensor maps of them as the
// launch l (GemmSM90Config.Launch) specifies them.
func sm90Maps[T interface {
	jit.Elem
	~uint16
}](d *jit.Device, l kernels.GemmSM90Launch, ha, hb []uint16) (tmA, tmB jit.TensorMap, free func(), err error) {
	var bufs []*jit.Buffer[T]
	free = func() {
		for _, b := range bufs {
			b.Free()
		}
	}
	load := func(h []uint16) (*jit.Buffer[T], error) {
		b, err := jit.Alloc[T](d, len(h))
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, b)
		return b, b.CopyFromHost(unsafe.Slice((*T)(unsafe.Pointer(&h[0])), len(h)))
	}
	a, err := load(ha)
	if err == nil {
		tmA, err = tensorMap(a, l.A)
	}
	var b *jit.Buffer[T]
	if err == nil {
		b, err = load(hb)
	}
	if err == nil {
		tmB, err = tensorMap(b, l.B)
	}
	if err != nil {
		free()
	}
	return tmA, tmB, free, err
}

// tensorMap encodes the tensor map s (from GemmSM90Config.Launch) over b.
func tensorMap[T jit.Elem](b *jit.Buffer[T], s kernels.TMASpec) (jit.TensorMap, error) {
	if et := jit.ElemType[T](); et != s.Elem {
		return jit.TensorMap{}, fmt.Errorf("a tensor map over %s elements on a buffer of %s", s.Elem, et)
	}
	return jit.NewTensorMap(b, s.Dims[:], s.Strides[:], s.Box[:], jit.Swizzle(s.Swizzle))
}

// sm90GridSMs is -sm90-grid-sms: the SMs gemm_sm90's persistent grid is sized for (0: the
// device's).
var sm90GridSMs int

// sm90Launch is gemm_sm90's launch of hp for an M x N x K problem on stream s, from
// hp.Launch: its persistent grid (for sm90GridSMs SMs when set), block, shared memory and
// clusters, and the tensor maps' specs.
func sm90Launch(d *jit.Device, hp kernels.GemmSM90Config, m, n, k int, s *jit.Stream) (jit.LaunchConfig, kernels.GemmSM90Launch, error) {
	sms := d.Info().Multiproc
	if sm90GridSMs > 0 {
		sms = sm90GridSMs
	}
	l, err := hp.Launch(m, n, k, max(sms, 1))
	if err != nil {
		return jit.LaunchConfig{}, l, err
	}
	lc := jit.LaunchConfig{Grid: jit.D1(l.Grid), Block: jit.D1(l.Block), SharedMem: l.SharedBytes, Stream: s}
	if l.Cluster > 1 {
		lc.Cluster = jit.D1(l.Cluster)
	}
	return lc, l, nil
}

// sm90OutMap allocates D (M x N of T) for the TMA-store epilogue and makes its tensor map as
// the launch l specifies it (l.D); read copies D to the host as 16-bit words.
func sm90OutMap[T interface {
	jit.Elem
	~uint16
}](d *jit.Device, l kernels.GemmSM90Launch) (ptr jit.AnyPtr, tm jit.TensorMap, read func([]uint16) error, free func(), err error) {
	if !l.HasD {
		return ptr, tm, nil, nil, fmt.Errorf("the configuration has no TMA store (no D map)")
	}
	b, err := jit.Alloc[T](d, int(l.D.Dims[0]*l.D.Dims[1]))
	if err != nil {
		return ptr, tm, nil, nil, err
	}
	if tm, err = tensorMap(b, l.D); err != nil {
		b.Free()
		return ptr, tm, nil, nil, err
	}
	read = func(h []uint16) error { return b.CopyToHost(unsafe.Slice((*T)(unsafe.Pointer(&h[0])), len(h))) }
	return jit.AnyOf[T](b), tm, read, func() { b.Free() }, nil
}

// fullCheck compares every element of D (m x n, row-major, 16-bit values read by back)
// with the float64 sum over K of A's and B's (row-major, m x k and k x n) products, within
// the sampled check's tolerance, on every core of the host: rows are cut into runs of
// columns, each accumulated along K over a contiguous row of B. It returns the number of
// elements outside the tolerance (NaN among them), the worst error in units of it, and the
// first bad element.
func fullCheck(ha, hb, hd []uint16, m, n, k int, back func(uint16) float64) (bad int64, worst float64, first string) {
	var val [1 << 16]float64
	for i := range val {
		val[i] = back(uint16(i))
	}
	const run = 4096
	type task struct{ r, c0 int }
	tasks := make(chan task, 1024)
	type result struct {
		bad   int64
		worst float64
		first string
		at    int64 // index of first, for the smallest
	}
	results := make(chan result)
	workers := runtime.NumCPU()
	for w := 0; w < workers; w++ {
		go func() {
			res := result{at: -1}
			var sum, abs [run]float64
			for t := range tasks {
				c1 := min(t.c0+run, n)
				w := c1 - t.c0
				clear(sum[:w])
				clear(abs[:w])
				for l := 0; l < k; l++ {
					a := val[ha[t.r*k+l]]
					row := hb[l*n+t.c0 : l*n+c1]
					for j, b := range row {
						x := a * val[b]
						sum[j] += x
						abs[j] += math.Abs(x)
					}
				}
				for j := 0; j < w; j++ {
					at := int64(t.r)*int64(n) + int64(t.c0+j)
					tol := float64(k+4)*0x1p-23*abs[j] + 0x1p-7*math.Abs(sum[j]) + 1e-30
					got := val[hd[at]]
					e := math.Abs(got-sum[j]) / tol
					if !(e <= 1) {
						res.bad++
						if res.at < 0 || at < res.at {
							res.at, res.first = at, fmt.Sprintf("D[%d,%d] = %v, want %v (tolerance %.3g)", t.r, t.c0+j, got, sum[j], tol)
						}
					}
					if !math.IsNaN(e) {
						res.worst = math.Max(res.worst, e)
					}
				}
			}
			results <- res
		}()
	}
	go func() {
		for r := 0; r < m; r++ {
			for c0 := 0; c0 < n; c0 += run {
				tasks <- task{r, c0}
			}
		}
		close(tasks)
	}()
	firstAt := int64(-1)
	for w := 0; w < workers; w++ {
		res := <-results
		bad += res.bad
		worst = math.Max(worst, res.worst)
		if res.at >= 0 && (firstAt < 0 || res.at < firstAt) {
			firstAt, first = res.at, res.first
		}
	}
	return bad, worst, first
}
