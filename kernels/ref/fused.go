package ref

import (
	"fmt"
	"math"
	"math/rand"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/nvshmem/shmemu"
	"github.com/kgen-dev/kgen/ptx"
)

func init() {
	registerOwn(string(kernels.FamilyAGGemm), ownFused, func(r *run) error { return fusedHarness(r, kernels.FamilyAGGemm) })
	registerOwn(string(kernels.FamilyGemmRS), ownFused, func(r *run) error { return fusedHarness(r, kernels.FamilyGemmRS) })
	registerOwn(string(kernels.FamilyGemmAR), ownFused, func(r *run) error { return fusedHarness(r, kernels.FamilyGemmAR) })
	registerOwn(string(kernels.FamilyAGGemmNVSHMEM), ownFused, func(r *run) error { return fusedHarness(r, kernels.FamilyAGGemmNVSHMEM) })
	registerOwn(string(kernels.FamilyGemmARMC), ownFused, func(r *run) error { return fusedHarness(r, kernels.FamilyGemmARMC) })
}

// FusedProblem is one fused GEMM run on the emulator over GPUs simulated GPUs, Launches
// launches in a row with fresh inputs each and no reset of the signals in between. M is
// the whole output's rows (a multiple of GPUs); K is ag_gemm's K, and gemm_rs's K per GPU.
type FusedProblem struct {
	Family   kernels.Family
	Config   kernels.GemmConfig
	GPUs     int
	M, N, K  int
	Launches int // 0: 2
	Seed     int64
	Weak     bool
	Epoch    uint32 // the signals' epoch before the first launch (they start as if that many ran)
	// BackToBack writes the inputs once and runs the launches with no host memory operation
	// between them (checking the output after the last), so that the weak-memory detector
	// checks one launch's accesses against the next's on other GPUs (docs/emu.md).
	BackToBack bool
	// Build, when set, builds the kernel in place of the library's (a deliberately broken
	// variant).
	Build func(k *dsl.Kernel, cfg kernels.GemmConfig)
}

// fusedHarness runs `kgen run ag_gemm|gemm_rs`: the registry's configuration over r's
// ranks, a shape with a partial row tile per GPU.
func fusedHarness(r *run, f kernels.Family) error {
	g := max(r.p.Ranks, 1)
	side := max(int(math.Cbrt(float64(r.size(0))))/8*8, 8)
	cfg := kernels.DefaultFusedConfig(r.p.DType)
	cfg.Aligned = f == kernels.FamilyGemmARMC // its only configuration
	res, err := RunFused(FusedProblem{Family: f, Config: cfg, GPUs: g, M: g * (side + 1), N: side + 8, K: side + 16, Seed: r.p.Seed, Weak: r.p.Weak, Epoch: r.p.Epoch})
	r.res = res
	return err
}

// RunFused builds the problem's kernel, runs it on the emulator and checks every GPU's
// output against a float64 reference: ag_gemm's D_r = gather(A) * B_r, gemm_rs's rows
// [r*M/GPUs, (r+1)*M/GPUs) of sum over GPUs g of A_g * B_g, within GemmTolerance (gemm_rs:
// of the whole K, plus one f32 rounding per partial).
func RunFused(p FusedProblem) (Result, error) {
	cfg, g := p.Config, p.GPUs
	name := kernels.FusedName(p.Family, cfg)
	res := Result{Kernel: name, DType: cfg.In, Shape: fmt.Sprintf("%dx%dx%d/%d GPUs", p.M, p.N, p.K, g)}
	if g < 1 || g > kernels.CollMaxGPUs || p.M%g != 0 {
		return res, fmt.Errorf("%s: %d GPUs for M = %d", name, g, p.M)
	}
	if cfg.Aligned && (p.N%8 != 0 || p.K%8 != 0) {
		return res, fmt.Errorf("%s needs N, K multiples of 8; got %s", name, res.Shape)
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
	build := p.Build
	if build == nil {
		build = map[kernels.Family]func(*dsl.Kernel, kernels.GemmConfig){kernels.FamilyAGGemm: kernels.AGGemm, kernels.FamilyGemmRS: kernels.GemmRS, kernels.FamilyGemmAR: kernels.GemmAR, kernels.FamilyAGGemmNVSHMEM: kernels.AGGemmNVSHMEM, kernels.FamilyGemmARMC: kernels.GemmARMC}[p.Family]
	}
	if build == nil {
		return res, fmt.Errorf("RunFused: family %q is not a fused GEMM", p.Family)
	}
	isMC := p.Family == kernels.FamilyGemmARMC
	target := ptx.SM80
	if isMC {
		target = ptx.SM90 // multimem
	}
	k := dsl.New(name, dsl.WithTarget(target))
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
	shmem := p.Family == kernels.FamilyAGGemmNVSHMEM
	ag := p.Family == kernels.FamilyAGGemm || shmem
	// Per GPU: A_r (rows x K for ag_gemm, M x K for gemm_rs), B_r (K x N), D_r.
	aLen, dLen, words := rows*K, M*N, kernels.AGGemmSignalWords(cfg, M, g)
	ar := p.Family == kernels.FamilyGemmAR || isMC
	switch {
	case ar:
		aLen, dLen, words = M*K, M*N, kernels.GemmARSignalWords(cfg, M, N, g)
	case !ag:
		aLen, dLen, words = M*K, rows*N, kernels.GemmRSSignalWords(cfg, M, N, g)
	}
	sym := func(bytes int) (*emu.Symmetric, *emu.Symmetric, error) { return symWithTable(sys, g, bytes) }
	bufA, _, err := sym(aLen * cfg.In.Bytes())
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
	xfer, xferTab, err := sym(map[bool]int{true: M * K * cfg.In.Bytes(), false: g * rows * N * 4}[ag])
	if err != nil {
		return res, err
	}
	sigs, sigTab, err := sym(map[bool]int{true: 8, false: 4}[shmem] * words)
	if err != nil {
		return res, err
	}
	// Signals as if Epoch launches had run: ready/free slots hold Epoch, ag_gemm's consumed
	// counters Epoch*tilesN.
	if p.Epoch != 0 && shmem {
		return res, fmt.Errorf("%s: the NVSHMEM kernel's signals are u64 and never wrap: no Epoch", name)
	}
	var shmemEmu *shmemu.Emulator
	if shmem {
		if shmemEmu, err = shmemu.Emulate(sys); err != nil {
			return res, err
		}
	}
	if p.Epoch != 0 {
		tn := (N + cfg.BN - 1) / cfg.BN
		tiles := (rows + cfg.BM - 1) / cfg.BM * tn
		w := make([]uint32, words)
		for i := range w {
			w[i] = p.Epoch
			if ag && i >= words/2 {
				w[i] = p.Epoch * uint32(tn)
			}
			if isMC && i >= 2*kernels.CollMaxGPUs*tiles && i < 2*kernels.CollMaxGPUs*tiles+tiles {
				w[i] = p.Epoch * uint32(g) // gemm_ar_mc's done counters
			}
		}
		for i := 0; i < g; i++ {
			if err := emu.WriteSlice(sys, sigs.On(i), w); err != nil {
				return res, err
			}
		}
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
			as[i], bs[i] = rnd(aLen), rnd(K*N)
			if err := write(sys, bufA.On(i), cfg.In, as[i]); err != nil {
				return res, err
			}
			if err := write(sys, bufB.On(i), cfg.In, bs[i]); err != nil {
				return res, err
			}
		}
		twin := func(i int) any {
			a, b, n := on(bufA, i, cfg.In), on(bufB, i, cfg.In), uint32(g)
			d := on(bufD, i, cfg.Out)
			if ar {
				d = table(dTab, i)
			}
			switch {
			case shmem:
				return launch.AGGemmNVSHMEM{A: a, B: b, Gathered: on(xfer, i, cfg.In), Signals: on(sigs, i, dsl.U64),
					M: uint32(M), N: uint32(N), K: uint32(K), Epoch: uint64(epoch), D: d}
			case isMC:
				return launch.GemmARMC{A: a, B: b, Scratch: on(xfer, i, dsl.F32), ScratchMC: mc(xfer, dsl.F32), Signals: table(sigTab, i),
					SignalsMC: mc(sigs, dsl.U32), Rank: uint32(i), NGPUs: n, M: uint32(M), N: uint32(N), K: uint32(K), Epoch: epoch,
					D: on(bufD, i, cfg.Out), DMC: mc(bufD, cfg.Out)}
			case ag:
				return launch.AGGemm{A: a, B: b, Gathered: table(xferTab, i), Signals: table(sigTab, i),
					Rank: uint32(i), NGPUs: n, M: uint32(M), N: uint32(N), K: uint32(K), Epoch: epoch, D: d}
			}
			return launch.GemmRS{A: a, B: b, Scratch: table(xferTab, i), Signals: table(sigTab, i),
				Rank: uint32(i), NGPUs: n, M: uint32(M), N: uint32(N), K: uint32(K), Epoch: epoch, D: d}
		}
		all := make([][]any, g)
		for i := range all {
			if all[i], err = emuArgs(fn, k.Params(), twin(i)); err != nil {
				return res, err
			}
		}
		args := func(i int) []any { return all[i] }
		err = sys.Launch(emu.Launch{Module: mod, Entry: name, GPUs: sys.All(), Grid: emu.D1(kernels.FusedGrid(cfg, M, N, g)), Block: emu.D1(cfg.Threads()),
			SharedBytes: cfg.SharedBytes(), ArgsFor: args, Options: emu.Options{Seed: p.Seed + int64(l), Weak: p.Weak}})
		if err != nil {
			return res, fmt.Errorf("%s %s launch %d: %w", name, res.Shape, l, err)
		}
		if shmem && shmemEmu.Pending() != 0 {
			return res, fmt.Errorf("%s %s launch %d: %d non-blocking puts still pending at the kernel's end", name, res.Shape, l, shmemEmu.Pending())
		}
		epoch++
		for i := 0; i < g && (l == launches-1 || !p.BackToBack); i++ {
			got, err := read(sys, bufD.On(i), cfg.Out, dLen)
			if err != nil {
				return res, err
			}
			outRows := M
			if !ag && !ar {
				outRows = rows
			}
			bad, first := 0, ""
			for r := 0; r < outRows; r++ {
				for c := 0; c < N; c++ {
					s, abs, terms := 0.0, 0.0, K
					if ag {
						src, lr := r/rows, r%rows
						for l := 0; l < K; l++ {
							x := as[src][lr*K+l] * bs[i][l*N+c]
							s, abs = s+x, abs+math.Abs(x)
						}
					} else {
						gr := i*rows + r
						if ar {
							gr = r
						}
						for src := 0; src < g; src++ {
							for l := 0; l < K; l++ {
								x := as[src][gr*K+l] * bs[src][l*N+c]
								s, abs = s+x, abs+math.Abs(x)
							}
						}
						terms = g*K + g
					}
					tol := GemmTolerance(cfg.Out, terms, abs, s)
					d := math.Abs(got[r*N+c] - s)
					res.MaxError = math.Max(res.MaxError, d/tol)
					if !(d <= tol) {
						if bad == 0 {
							first = fmt.Sprintf("D[%d,%d] = %v, want %v (tolerance %.3g)", r, c, got[r*N+c], s, tol)
						}
						bad++
					}
				}
			}
			res.Checked += outRows * N
			if bad > 0 {
				return res, fmt.Errorf("%s %s launch %d, GPU %d: %d of %d values differ; first: %s", name, res.Shape, l, i, bad, outRows*N, first)
			}
		}
	}
	return res, nil
}

// symWithTable allocates a symmetric buffer of bytes (at least 16) on the g GPUs of sys and
// its peer table: on every GPU, CollMaxGPUs addresses whose entry i reaches GPU i's copy.
func symWithTable(sys *emu.System, g, bytes int) (*emu.Symmetric, *emu.Symmetric, error) {
	s, err := sys.MallocSymmetric(max(bytes, 16))
	if err != nil {
		return nil, nil, err
	}
	t, err := sys.MallocSymmetric(8 * kernels.CollMaxGPUs)
	if err != nil {
		return nil, nil, err
	}
	addrs := make([]uint64, kernels.CollMaxGPUs)
	for i := 0; i < g; i++ {
		addrs[i] = s.On(i)
	}
	for i := 0; i < g; i++ {
		if err := emu.WriteSlice(sys, t.On(i), addrs); err != nil {
			return nil, nil, err
		}
	}
	return s, t, nil
}
