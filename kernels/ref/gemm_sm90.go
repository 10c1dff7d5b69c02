package ref

import (
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
)

func init() { registerOwn("gemm_sm90", oneGPU, gemmSM90Harness) }

// gemmSM90Harness runs `kgen run gemm_sm90`: about size elements per matrix, M odd, N and K
// rounded up to multiples of 8 (K of 16 for fp8; the kernel's rule), on two persistent blocks.
func gemmSM90Harness(r *run) error {
	side := max(int(math.Cbrt(float64(r.size(0)))), 1)
	up8 := func(x int) int { return (x + 7) / 8 * 8 }
	m, n, kk := side+1, up8(side+17), up8(side+33)
	if kernels.DefaultGemmSM90Config(r.p.DType).FP8() {
		kk = (side + 33 + 15) / 16 * 16 // fp8: K a multiple of 16
	}
	if r.p.Size == 0 {
		m, n, kk = 257, 136, 304
	}
	res, err := RunGemmSM90(GemmSM90Problem{Config: kernels.DefaultGemmSM90Config(r.p.DType), M: m, N: n, K: kk,
		Alpha: 1.5, Beta: -0.5, Seed: r.p.Seed, Blocks: 2})
	r.res = res
	return err
}

// GemmSM90Problem is one sm_90a gemm run on the emulator: D = Alpha*A*B + Beta*C for an
// M x N x K problem (row-major A; row-major B, K x N, or N x K for fp8 inputs) on Blocks
// persistent blocks (0: one per tile; a multiple of the cluster size), through the epilogue
// Config.Epilogue (random operands) or Hook.
type GemmSM90Problem struct {
	Config      kernels.GemmSM90Config
	M, N, K     int
	Alpha, Beta float64
	Seed        int64
	Blocks      int
	// Hook, when not nil, builds the kernel with kernels.GemmSM90With (Config.Epilogue zero).
	Hook *GemmHook
	// ResidualInD passes D as Epilogue.Residual's matrix, holding the residual at launch.
	ResidualInD bool
	// PieceRows is the piece size of a Config.Pieces kernel. The counters start at
	// (PieceEpoch-1)*PieceSignals (PieceEpoch 0 is 1: zeroed), as after earlier launches,
	// and must end at PieceEpoch*PieceSignals. With one block (Blocks 1) the run is also
	// watched while the kernel runs: a piece's counter moves only once every earlier piece
	// is complete (piece-major order), and some piece completes before the kernel ends.
	PieceRows, PieceEpoch int
	// RowShift is the Pieces kernel's rotation of A's rows (D's row i from A's row
	// (i + RowShift) mod M).
	RowShift int
}

// RunGemmSM90 builds the problem's kernel, runs it on one emulated GPU with random inputs
// (the tensor maps built from the config's boxes) and checks D element by element against
// the float64 reference within GemmTolerance.
func RunGemmSM90(p GemmSM90Problem) (Result, error) {
	cfg := p.Config
	res := Result{Kernel: cfg.Name(), DType: cfg.In, Shape: fmt.Sprintf("%dx%dx%d", p.M, p.N, p.K)}
	if err := cfg.CheckShape(p.M, p.N, p.K); err != nil {
		return res, err
	}
	if err := checkEmuGemm(cfg.Name(), p.M, p.N, p.K, 1); err != nil {
		return res, err
	}
	if err := scalars(cfg.Name(), p.Alpha, p.Beta); err != nil {
		return res, err
	}
	if err := count(cfg.Name(), "Blocks", p.Blocks, "the configuration's grid"); err != nil {
		return res, err
	}
	if err := count(cfg.Name(), "PieceEpoch", p.PieceEpoch, "1"); err != nil {
		return res, err
	}
	k := dsl.New(cfg.Name(), dsl.WithTarget(ptx.SM90a))
	if p.Hook != nil {
		kernels.GemmSM90With(k, cfg, p.Hook.Hook)
	} else {
		kernels.GemmSM90(k, cfg)
	}
	mod, err := k.Build()
	if err != nil {
		return res, err
	}
	sys, err := emu.New(1)
	if err != nil {
		return res, err
	}
	M, N, K := p.M, p.N, p.K
	g, err := newGemmData(sys, cfg.In, cfg.Out, M, N, K, p.Seed)
	if err != nil {
		return res, err
	}
	ptrs := g.ptrs
	// The configuration's launch: block, shared memory, cluster and the maps (the grid is
	// Blocks when set: sized as for a GPU of more multiprocessors than tiles).
	l, err := cfg.Launch(M, N, K, 1<<20)
	if err != nil {
		return res, err
	}
	blocks := p.Blocks
	if blocks <= 0 {
		blocks = l.Grid
	}
	if blocks%l.Cluster != 0 {
		return res, fmt.Errorf("%s: %d blocks is not a multiple of the cluster's %d", cfg.Name(), blocks, l.Cluster)
	}
	maps := []emu.TensorMap{emuMap(ptrs[0], l.A), emuMap(ptrs[1], l.B)}
	if l.HasD { // D's map: (N, M) of Out elements
		maps = append(maps, emuMap(ptrs[3], l.D))
	}
	epi, err := newEpiData(sys, cfg.Epilogue, p.Hook, cfg.Out, M, N, p.Seed, p.ResidualInD, ptrs[3])
	if err != nil {
		return res, err
	}
	fn, err := entry(mod, cfg.Name())
	if err != nil {
		return res, err
	}
	var pcs *gemmPieces
	if cfg.Pieces {
		if pcs, err = newGemmPieces(sys, cfg, p); err != nil {
			return res, err
		}
	}
	args, err := gemmSM90Args(fn, k.Params(), cfg, M, N, K, p.Alpha, p.Beta, ptrs[2], ptrs[3], maps, epi, pcs)
	if err != nil {
		return res, err
	}
	var cluster emu.Dim3
	if l.Cluster > 1 {
		cluster = emu.D1(l.Cluster)
	}
	kl := emu.Launch{Module: mod, Entry: cfg.Name(), Grid: emu.D1(blocks), Block: emu.D1(l.Block),
		Cluster: cluster, SharedBytes: l.SharedBytes, Args: args, Options: emu.Options{Seed: p.Seed}}
	if pcs != nil {
		err = pcs.run(sys, kl, blocks == 1)
	} else {
		err = sys.Launch(kl)
	}
	if err != nil {
		return res, err
	}
	got, err := read(sys, ptrs[3], cfg.Out, M*N)
	if err != nil {
		return res, err
	}
	at := func(i, l int) float64 { return g.a[(i+p.RowShift)%M*K+l] }
	bt := func(l, j int) float64 { return g.b[l*N+j] }
	if cfg.FP8() { // B is N x K row-major
		bt = func(l, j int) float64 { return g.b[j*K+l] }
	}
	if p.Hook != nil || !cfg.Epilogue.IsZero() {
		return res, g.checkEpi(&res, cfg.Name(), cfg.Out, got, p.Alpha, p.Beta, epi, at, bt)
	}
	return res, g.check(&res, cfg.Name(), cfg.Out, got, p.Alpha, p.Beta, at, bt)
}

// emuMap is the emulator's tensor map s (from GemmSM90Config.Launch) over the tensor at
// address global.
func emuMap(global uint64, s kernels.TMASpec) emu.TensorMap {
	return emu.TensorMap{Elem: ptx.Type(s.Elem), Rank: 2, Global: global, Dims: [5]uint64{s.Dims[0], s.Dims[1]},
		Strides: [5]uint64{0, s.Strides[0]}, Box: [5]uint32{s.Box[0], s.Box[1]}, Swizzle: s.Swizzle}
}

// gemmSM90Args is gemm_sm90's argument list on the emulator: the twin of cfg's variant
// (launch.GemmSM90, GemmSM90Store, GemmSM90Epi or GemmSM90StoreEpi) with its tensor maps,
// then a hook's own parameters.
func gemmSM90Args(fn *ptx.Func, info []dsl.ParamInfo, cfg kernels.GemmSM90Config, m, n, k int, alpha, beta float64, c, d uint64,
	maps []emu.TensorMap, epi *epiData, pcs *gemmPieces) ([]any, error) {
	M, N, K, a, b := uint32(m), uint32(n), uint32(k), float32(alpha), float32(beta)
	C, D, e := anyPtr(c, cfg.Out), anyPtr(d, cfg.Out), epi.ptrs
	var twin any
	switch {
	case cfg.Pieces && (!cfg.Epilogue.IsZero() || epi.hookArgs != nil):
		return nil, fmt.Errorf("%s: the runner passes piece counters only with the plain epilogue", cfg.Name())
	case cfg.Pieces && !cfg.TMAStore:
		twin = launch.GemmSM90Pieces{M: M, N: N, K: K, Alpha: a, Beta: b, C: C, D: D, Counters: anyPtr(pcs.addr, dsl.U32), PieceRows: uint32(pcs.rows), RowShift: uint32(pcs.shift)}
	case cfg.Pieces:
		twin = launch.GemmSM90StorePieces{M: M, N: N, K: K, Alpha: a, Beta: b, C: C, D: D, Counters: anyPtr(pcs.addr, dsl.U32), PieceRows: uint32(pcs.rows), RowShift: uint32(pcs.shift)}
	case cfg.Epilogue.IsZero() && !cfg.TMAStore:
		twin = launch.GemmSM90{M: M, N: N, K: K, Alpha: a, Beta: b, C: C, D: D}
	case cfg.Epilogue.IsZero():
		twin = launch.GemmSM90Store{M: M, N: N, K: K, Alpha: a, Beta: b, C: C, D: D}
	case !cfg.TMAStore:
		twin = launch.GemmSM90Epi{M: M, N: N, K: K, Alpha: a, Beta: b, C: C, D: D, Bias: e[0], ScaleA: e[1], ScaleB: e[2], Residual: e[3]}
	default:
		twin = launch.GemmSM90StoreEpi{M: M, N: N, K: K, Alpha: a, Beta: b, C: C, D: D, Bias: e[0], ScaleA: e[1], ScaleB: e[2], Residual: e[3]}
	}
	return emuArgsMaps(fn, info, twin, maps, epi.hookArgs)
}

// gemmPieces is a Pieces run's counters.
type gemmPieces struct {
	addr        uint64
	rows, n     int // piece rows, pieces
	shift       int // RowShift
	base, delta uint32
}

func newGemmPieces(sys *emu.System, cfg kernels.GemmSM90Config, p GemmSM90Problem) (*gemmPieces, error) {
	if err := cfg.CheckPieces(p.M, p.PieceRows); err != nil {
		return nil, err
	}
	if p.RowShift < 0 || p.RowShift >= p.M || p.RowShift%p.PieceRows != 0 {
		return nil, fmt.Errorf("%s: RowShift %d: want a multiple of the %d rows of a piece below M %d", cfg.Name(), p.RowShift, p.PieceRows, p.M)
	}
	g := &gemmPieces{rows: p.PieceRows, n: cfg.NumPieces(p.M, p.PieceRows), delta: uint32(cfg.PieceSignals(p.PieceRows, p.N)), shift: p.RowShift}
	g.base = uint32(max(p.PieceEpoch, 1)-1) * g.delta
	var err error
	if g.addr, err = sys.Malloc(0, 4*g.n); err != nil {
		return nil, err
	}
	init := make([]uint32, g.n)
	for i := range init {
		init[i] = g.base
	}
	return g, emu.WriteSlice(sys, g.addr, init)
}

// run runs the kernel, then checks every counter ended at base + delta. watch (one block)
// also samples the counters while the kernel runs: no piece's counter moves before the
// earlier pieces are complete, and some piece completes before the kernel ends.
func (g *gemmPieces) run(sys *emu.System, kl emu.Launch, watch bool) error {
	r, err := sys.Start(kl)
	if err != nil {
		return err
	}
	early := false
	for !r.Done() {
		sys.Run(2000)
		if !watch || r.Done() {
			continue
		}
		c := make([]uint32, g.n)
		for i := range c { // Load32: not a host synchronization
			if c[i], err = sys.Load32(g.addr + 4*uint64(i)); err != nil {
				return err
			}
		}
		for i := range c {
			done := c[i] == g.base+g.delta
			if c[i]-g.base > g.delta {
				return fmt.Errorf("%s: piece %d's counter is %d mid-run, past %d", kl.Entry, i, c[i], g.base+g.delta)
			}
			if i > 0 && c[i] != g.base && c[i-1] != g.base+g.delta {
				return fmt.Errorf("%s: piece %d's counter moved (%d) before piece %d was complete (%d of %d): not piece-major", kl.Entry, i, c[i]-g.base, i-1, c[i-1]-g.base, g.delta)
			}
			if done && i < g.n-1 {
				early = true
			}
		}
	}
	if err := r.Err(); err != nil {
		return err
	}
	c, err := emu.ReadSlice[uint32](sys, g.addr, g.n)
	if err != nil {
		return err
	}
	for i, v := range c {
		if v != g.base+g.delta {
			return fmt.Errorf("%s: piece %d's counter is %d after the launch, want %d (%d + %d signals)", kl.Entry, i, v, g.base+g.delta, g.base, g.delta)
		}
	}
	if watch && g.n > 1 && !early {
		return fmt.Errorf("%s: no piece was seen complete before the kernel ended", kl.Entry)
	}
	return nil
}
