package ref

import (
	"fmt"
	"math"
	"math/rand"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

func init() {
	for _, f := range []kernels.Family{kernels.FamilyAGGemmSM90, kernels.FamilyGemmRSSM90, kernels.FamilyGemmARSM90, kernels.FamilyGemmARMCSM90} {
		registerOwn(string(f), ownFused, func(r *run) error { return fusedSM90Harness(r, f) })
	}
}

// FusedSM90Problem is one sm_90a fused GEMM run on the emulator (FusedProblem's fields, a
// GemmSM90Config, and the persistent grid).
type FusedSM90Problem struct {
	Family     kernels.Family // FamilyAGGemmSM90, FamilyGemmRSSM90, FamilyGemmARSM90 or FamilyGemmARMCSM90
	Config     kernels.GemmSM90Config
	GPUs       int
	M, N, K    int // M a multiple of GPUs; N and K multiples of 8
	Blocks     int // persistent blocks per GPU (0: one per tile)
	Launches   int // 0: 2
	Seed       int64
	Weak       bool
	Epoch      uint32
	BackToBack bool
	// Build, when set, builds the kernel in place of the library's (a deliberately broken
	// variant).
	Build func(k *dsl.Kernel, cfg kernels.GemmSM90Config)
}

// fusedSM90Harness runs `kgen run ag_gemm_sm90|gemm_rs_sm90|gemm_ar_sm90|gemm_ar_mc_sm90`: the registry's
// configuration over r's ranks, a partial row tile per GPU, N and K odd multiples of 8, on
// two persistent blocks per GPU.
func fusedSM90Harness(r *run, f kernels.Family) error {
	g := max(r.p.Ranks, 1)
	side := max(int(math.Cbrt(float64(r.size(0))))/16*16+8, 8)
	res, err := RunFusedSM90(FusedSM90Problem{Family: f, Config: kernels.DefaultGemmSM90Config(r.p.DType), GPUs: g,
		M: g * (side + 1), N: side + 16, K: side + 32, Blocks: 2, Seed: r.p.Seed, Weak: r.p.Weak, Epoch: r.p.Epoch})
	r.res = res
	return err
}

// RunFusedSM90 builds the problem's kernel, runs it on the emulator (tensor maps over each
// GPU's buffers, as collectives builds them) and checks every GPU's output against the
// float64 reference as RunFused does.
func RunFusedSM90(p FusedSM90Problem) (Result, error) {
	cfg, g := p.Config, p.GPUs
	name := kernels.FusedSM90Name(p.Family, cfg)
	res := Result{Kernel: name, DType: cfg.In, Shape: fmt.Sprintf("%dx%dx%d/%d GPUs", p.M, p.N, p.K, g)}
	if g < 1 || g > kernels.CollMaxGPUs || p.M%g != 0 {
		return res, fmt.Errorf("%s: %d GPUs for M = %d", name, g, p.M)
	}
	if err := cfg.CheckShape(p.M, p.N, p.K); err != nil {
		return res, err
	}
	if err := kernels.FusedCheckShape(p.M, p.N, p.K, g); err != nil {
		return res, err
	}
	if err := checkEmuGemm(name, p.M, p.N, p.K, g); err != nil {
		return res, err
	}
	if err := count(name, "Launches", p.Launches, "2 launches"); err != nil {
		return res, err
	}
	if err := count(name, "Blocks", p.Blocks, "one per tile"); err != nil {
		return res, err
	}
	build := p.Build
	if build == nil {
		build = map[kernels.Family]func(*dsl.Kernel, kernels.GemmSM90Config){kernels.FamilyAGGemmSM90: kernels.AGGemmSM90,
			kernels.FamilyGemmRSSM90: kernels.GemmRSSM90, kernels.FamilyGemmARSM90: kernels.GemmARSM90, kernels.FamilyGemmARMCSM90: kernels.GemmARMCSM90}[p.Family]
	}
	if build == nil {
		return res, fmt.Errorf("RunFusedSM90: family %q is not an sm_90a fused GEMM", p.Family)
	}
	k := dsl.New(name, dsl.WithTarget(ptx.SM90a))
	build(k, cfg)
	mod, err := k.Build()
	if err != nil {
		return res, err
	}
	fn, err := entry(mod, name)
	if err != nil {
		return res, err
	}
	sys, err := emu.New(g)
	if err != nil {
		return res, err
	}
	M, N, K, rows := p.M, p.N, p.K, p.M/g
	ag := p.Family == kernels.FamilyAGGemmSM90
	isMC := p.Family == kernels.FamilyGemmARMCSM90
	ar := p.Family == kernels.FamilyGemmARSM90 || isMC
	tn := (N + cfg.BN - 1) / cfg.BN
	gRows := kernels.AGGemmSM90GatheredRows(cfg, M, g)
	// Per GPU: A_r (rows x K for ag_gemm, M x K otherwise), B_r (K x N), D_r.
	aRows, dLen, words, xferBytes := rows, M*N, kernels.AGGemmSM90SignalWords(cfg, M, g), gRows*K*cfg.In.Bytes()
	switch {
	case ar:
		aRows, words, xferBytes = M, kernels.GemmARSM90SignalWords(cfg, M, N, g), g*rows*N*4
	case !ag:
		aRows, dLen, words, xferBytes = M, rows*N, kernels.GemmRSSM90SignalWords(cfg, M, N, g), g*rows*N*4
	}
	sym := func(bytes int) (*emu.Symmetric, *emu.Symmetric, error) { return symWithTable(sys, g, bytes) }
	bufA, _, err := sym(aRows * K * cfg.In.Bytes())
	if err != nil {
		return res, err
	}
	bufB, _, err := sym(K * N * cfg.In.Bytes())
	if err != nil {
		return res, err
	}
	bufD, dTab, err := sym(dLen * cfg.Out.Bytes())
	if err != nil {
		return res, err
	}
	xfer, xferTab, err := sym(xferBytes)
	if err != nil {
		return res, err
	}
	sigs, sigTab, err := sym(4 * words)
	if err != nil {
		return res, err
	}
	// Signals as if Epoch launches had run: every slot holds Epoch but ag_gemm's consumed
	// counters, Epoch*tilesN*Consumers, and gemm_ar_mc's done counters, Epoch*GPUs.
	if p.Epoch != 0 {
		w := make([]uint32, words)
		tiles := (rows + cfg.BM() - 1) / cfg.BM() * tn
		for i := range w {
			w[i] = p.Epoch
			if ag && i >= words/2 {
				w[i] = p.Epoch * uint32(tn*cfg.Consumers)
			}
			if isMC && i >= 2*kernels.CollMaxGPUs*tiles && i < 2*kernels.CollMaxGPUs*tiles+tiles {
				w[i] = p.Epoch * uint32(g)
			}
		}
		for i := 0; i < g; i++ {
			if err := emu.WriteSlice(sys, sigs.On(i), w); err != nil {
				return res, err
			}
		}
	}
	es := uint64(cfg.In.Bytes())
	tmap := func(addr uint64, inner, outer int, box [2]int) emu.TensorMap {
		return emu.TensorMap{Elem: ptx.Type(cfg.In), Rank: 2, Global: addr, Dims: [5]uint64{uint64(inner), uint64(outer)},
			Strides: [5]uint64{0, uint64(inner) * es}, Box: [5]uint32{uint32(box[0]), uint32(box[1])}, Swizzle: cfg.SwizzleBytes()}
	}
	blocks := p.Blocks
	if blocks <= 0 {
		blocks = kernels.FusedSM90Tiles(cfg, M, N, g)
	}
	rng := rand.New(rand.NewSource(p.Seed + 1))
	rnd := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = round(cfg.In, 2*rng.Float64()-1)
		}
		return v
	}
	launches := p.Launches
	if launches == 0 {
		launches = 2
	}
	epoch := p.Epoch
	as, bs := make([][]float64, g), make([][]float64, g)
	for l := 0; l < launches; l++ {
		for i := 0; i < g && (l == 0 || !p.BackToBack); i++ {
			as[i], bs[i] = rnd(aRows*K), rnd(K*N)
			if err := write(sys, bufA.On(i), cfg.In, as[i]); err != nil {
				return res, err
			}
			if err := write(sys, bufB.On(i), cfg.In, bs[i]); err != nil {
				return res, err
			}
		}
		all := make([][]any, g)
		for i := range all {
			tmA := tmap(bufA.On(i), K, aRows, cfg.TMABoxA())
			tmB := tmap(bufB.On(i), N, K, cfg.TMABoxB())
			n, d := uint32(g), on(bufD, i, cfg.Out)
			if ar {
				d = table(dTab, i)
			}
			var twin any
			maps := []emu.TensorMap{tmA, tmB}
			switch {
			case ag:
				maps = []emu.TensorMap{tmA, tmap(xfer.On(i), K, gRows, cfg.TMABoxA()), tmB}
				twin = launch.AGGemmSM90{A: on(bufA, i, cfg.In), Gathered: table(xferTab, i), Signals: table(sigTab, i),
					Rank: uint32(i), NGPUs: n, M: uint32(M), N: uint32(N), K: uint32(K), Epoch: epoch, D: d}
			case isMC:
				twin = launch.GemmARMCSM90{Scratch: on(xfer, i, dsl.F32), ScratchMC: mc(xfer, dsl.F32), Signals: table(sigTab, i),
					SignalsMC: mc(sigs, dsl.U32), Rank: uint32(i), NGPUs: n, M: uint32(M), N: uint32(N), K: uint32(K), Epoch: epoch,
					D: on(bufD, i, cfg.Out), DMC: mc(bufD, cfg.Out)}
			default:
				twin = launch.GemmRSSM90{Scratch: table(xferTab, i), Signals: table(sigTab, i),
					Rank: uint32(i), NGPUs: n, M: uint32(M), N: uint32(N), K: uint32(K), Epoch: epoch, D: d}
			}
			if all[i], err = emuArgsMaps(fn, k.Params(), twin, maps, nil); err != nil {
				return res, err
			}
		}
		args := func(i int) []any { return all[i] }
		err = sys.Launch(emu.Launch{Module: mod, Entry: name, GPUs: sys.All(), Grid: emu.D1(blocks), Block: emu.D1(cfg.Threads()),
			SharedBytes: cfg.SharedBytes(), ArgsFor: args, Options: emu.Options{Seed: p.Seed + int64(l), Weak: p.Weak}})
		if err != nil {
			return res, fmt.Errorf("%s %s launch %d: %w", name, res.Shape, l, err)
		}
		epoch++
		for i := 0; i < g && (l == launches-1 || !p.BackToBack); i++ {
			got, err := read(sys, bufD.On(i), cfg.Out, dLen)
			if err != nil {
				return res, err
			}
			if err := checkFused(&res, fusedRef{ag: ag, ar: ar, gpu: i, gpus: g, m: M, n: N, k: K, out: cfg.Out, as: as, bs: bs}, got); err != nil {
				return res, fmt.Errorf("%s %s launch %d, GPU %d: %w", name, res.Shape, l, i, err)
			}
		}
	}
	return res, nil
}

// fusedRef is what GPU gpu's output of a fused GEMM should hold: ag_gemm's D = gather(A) *
// B_gpu (M rows), gemm_rs's rows [gpu*M/gpus, (gpu+1)*M/gpus) of sum_g A_g*B_g, gemm_ar's all
// M rows of that sum.
type fusedRef struct {
	ag, ar    bool
	gpu, gpus int
	m, n, k   int
	out       dsl.Type
	as, bs    [][]float64
}

// checkFused compares got (row-major, N columns) with the reference element by element
// within GemmTolerance (gemm_rs and gemm_ar: of the whole K, plus one f32 rounding per
// partial) and counts the checked values in res.
func checkFused(res *Result, f fusedRef, got []float64) error {
	rows := f.m / f.gpus
	outRows := f.m
	if !f.ag && !f.ar {
		outRows = rows
	}
	bad, first := 0, ""
	for r := 0; r < outRows; r++ {
		for c := 0; c < f.n; c++ {
			s, abs, terms := 0.0, 0.0, f.k
			if f.ag {
				src, lr := r/rows, r%rows
				for l := 0; l < f.k; l++ {
					x := f.as[src][lr*f.k+l] * f.bs[f.gpu][l*f.n+c]
					s, abs = s+x, abs+math.Abs(x)
				}
			} else {
				gr := f.gpu*rows + r
				if f.ar {
					gr = r
				}
				for src := 0; src < f.gpus; src++ {
					for l := 0; l < f.k; l++ {
						x := f.as[src][gr*f.k+l] * f.bs[src][l*f.n+c]
						s, abs = s+x, abs+math.Abs(x)
					}
				}
				terms = f.gpus*f.k + f.gpus
			}
			tol := GemmTolerance(f.out, terms, abs, s)
			d := math.Abs(got[r*f.n+c] - s)
			res.MaxError = math.Max(res.MaxError, d/tol)
			if !(d <= tol) {
				if bad == 0 {
					first = fmt.Sprintf("D[%d,%d] = %v, want %v (tolerance %.3g)", r, c, got[r*f.n+c], s, tol)
				}
				bad++
			}
		}
	}
	res.Checked += outRows * f.n
	if bad > 0 {
		return fmt.Errorf("%d of %d values differ; first: %s", bad, outRows*f.n, first)
	}
	return nil
}
