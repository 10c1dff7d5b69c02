package collectives

import (
	"context"
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
)

// MatmulShape is the problem of a fused matmul: the whole M x N output of an M x K by K x N
// product (row-major matrices), M split into NumGPUs row slices. K is the whole K of
// AllGatherMatmul and the K slice each GPU holds in MatmulReduceScatter.
type MatmulShape struct {
	M, N, K int
}

// fusedKey identifies a fused kernel variant the Comm has loaded.
type fusedKey struct {
	f       kernels.Family
	in, out dsl.Type
	aligned bool
}

// fusedState is the symmetric state of one fused family: its transfer buffer (ag_gemm's
// gathered A, gemm_rs's f32 partials), its signal slots and their epoch (launches made on
// them). Both grow together: new slots start at epoch 0 with a new buffer, so no peer can
// still be reading the buffer they guard.
type fusedState struct {
	buf, sig *sym
	epoch    uint32
}

// matmulConfig is the fused kernels' tile configuration for in, out and the shape.
func (c *Comm) matmulConfig(in, out dsl.Type, s MatmulShape) kernels.GemmConfig {
	cfg := c.o.Matmul
	if cfg.BM == 0 {
		cfg = kernels.DefaultFusedConfig(in)
	}
	cfg.In, cfg.Out, cfg.A, cfg.B = in, out, kernels.RowMajor, kernels.RowMajor
	cfg.Aligned = s.N%8 == 0 && s.K%8 == 0
	return cfg
}

// checkMatmul checks a fused matmul's buffers against its shape; the errors name the
// mismatch.
func (c *Comm) checkMatmul(what string, a, b, out *Buffer, s MatmulShape, aRows, outRows int) error {
	g := c.g
	switch {
	case s.M <= 0 || s.N <= 0 || s.K <= 0:
		return fmt.Errorf("collectives: %s: shape %dx%dx%d: M, N and K must be positive", what, s.M, s.N, s.K)
	case s.M%g != 0:
		return fmt.Errorf("collectives: %s: M = %d is not divisible by the %d ranks", what, s.M, g)
	case a.dt != b.dt:
		return fmt.Errorf("collectives: %s: a is %s but b is %s (want one input type)", what, a.dt, b.dt)
	case a.dt != dsl.F16 && a.dt != dsl.BF16:
		return fmt.Errorf("collectives: %s: inputs of %s (want f16 or bf16)", what, a.dt)
	case out.dt != dsl.F16 && out.dt != dsl.BF16 && out.dt != dsl.F32:
		return fmt.Errorf("collectives: %s: output of %s (want f16, bf16 or f32)", what, out.dt)
	case a.n != aRows*s.K:
		return fmt.Errorf("collectives: %s: a holds %d elements, want %d x K = %d x %d (K mismatch, or rows not M/%d = %d)", what, a.n, aRows, aRows, s.K, g, s.M/g)
	case b.n != s.K*s.N:
		return fmt.Errorf("collectives: %s: b holds %d elements, want K x N = %d x %d (K mismatch between a and b?)", what, b.n, s.K, s.N)
	case out.n != outRows*s.N:
		return fmt.Errorf("collectives: %s: out holds %d elements, want %d x N = %d x %d", what, out.n, outRows, outRows, s.N)
	case a == out || b == out:
		return fmt.Errorf("collectives: %s: out must not be an input", what)
	}
	if n := uint64(s.M) * uint64(max(s.N, s.K)) * uint64(g); n >= 1<<32 {
		return fmt.Errorf("collectives: %s: shape %dx%dx%d over %d GPUs: element offsets reach 2^32 (u32 indices)", what, s.M, s.N, s.K, g)
	}
	return nil
}

// fusedFunction builds and loads (once) the fused kernel of family f for cfg.
func (c *Comm) fusedFunction(f kernels.Family, cfg kernels.GemmConfig) (*jit.Function, string, error) {
	key := fusedKey{f, cfg.In, cfg.Out, cfg.Aligned}
	name := kernels.FusedName(f, cfg)
	if fn, ok := c.fused[key]; ok {
		return fn, name, nil
	}
	if err := kernels.FusedCheck(cfg); err != nil {
		return nil, "", fmt.Errorf("collectives: Options.Matmul: %w", err)
	}
	k := dsl.New(name, dsl.WithTarget(c.o.Target))
	switch f {
	case kernels.FamilyAGGemm:
		kernels.AGGemm(k, cfg)
	case kernels.FamilyGemmAR:
		kernels.GemmAR(k, cfg)
	case kernels.FamilyGemmARMC:
		kernels.GemmARMC(k, cfg)
	default:
		kernels.GemmRS(k, cfg)
	}
	m, err := k.Build()
	if err != nil {
		return nil, "", fmt.Errorf("collectives: building %s: %w", name, err)
	}
	mod, err := c.r.Device.Load(jit.Source{Module: m, Params: map[string][]jit.ParamInfo{name: jit.ParamInfos(k.Params())}})
	if err != nil {
		return nil, "", fmt.Errorf("collectives: loading %s: %w", name, err)
	}
	c.mods = append(c.mods, mod)
	fn, err := mod.Function(name)
	if err != nil {
		return nil, "", err
	}
	if c.fused == nil {
		c.fused = map[fusedKey]*jit.Function{}
	}
	c.fused[key] = fn
	return fn, name, nil
}

// fusedEnsure makes family f's state hold at least bufBytes and words signal slots.
func (c *Comm) fusedEnsure(ctx context.Context, cl *call, f kernels.Family, bufBytes, words int) (*fusedState, error) {
	if c.fusedStates == nil {
		c.fusedStates = map[kernels.Family]*fusedState{}
	}
	st := c.fusedStates[f]
	if st != nil && st.buf.bytes() >= bufBytes && st.sig.bytes() >= 4*words {
		return st, nil
	}
	buf, err := c.alloc(ctx, bufBytes, true)
	if err != nil {
		return nil, cl.wrap(err)
	}
	sig, err := c.alloc(ctx, 4*words, true)
	if err != nil {
		return nil, cl.wrap(err)
	}
	st = &fusedState{buf: buf, sig: sig}
	c.fusedStates[f] = st
	return st, nil
}

// gemmARMCLaunch is gemm_ar_mc's arguments (kernels.GemmARMCArgs, then kernels.FusedOutMC).
type gemmARMCLaunch struct {
	A, B, Scratch, ScratchMC    jit.AnyPtr
	Signals, SignalsMC          jit.AnyPtr
	Rank, NGPUs, M, N, K, Epoch uint32
	D, DMC                      jit.AnyPtr
}

// agGemmLaunch is ag_gemm's arguments (kernels.AGGemmArgs, then kernels.FusedOut).
type agGemmLaunch struct {
	A, B, Gathered, Signals     jit.AnyPtr
	Rank, NGPUs, M, N, K, Epoch uint32
	D                           jit.AnyPtr
}

// gemmRSLaunch is gemm_rs's arguments (kernels.GemmRSArgs, then kernels.FusedOut) and
// gemm_ar's (kernels.FusedOutTable: D is then a peer table).
type gemmRSLaunch struct {
	A, B, Scratch, Signals      jit.AnyPtr
	Rank, NGPUs, M, N, K, Epoch uint32
	D                           jit.AnyPtr
}

// MatmulAllReduce computes the sum over GPUs g of A_g * B_g into every GPU's out (s.M x s.N),
// A_g (s.M x s.K) and B_g (s.K x s.N) being GPU g's a and b (its K slice): gemm_rs whose
// owners store each summed tile into every GPU's out (gemm_ar, peer stores; with multicast
// and N, K multiples of 8, gemm_ar_mc or on sm_90a gemm_ar_mc_sm90: multimem.ld_reduce of
// the partials, multimem.st of the sums). out must be a Buffer of this Comm (symmetric: the peers write into it). Types
// and alignment as AllGatherMatmul. Every rank makes the same call.
func (c *Comm) MatmulAllReduce(ctx context.Context, a, b, out *Buffer, s MatmulShape) error {
	const what = "MatmulAllReduce"
	if err := c.begin(ctx, what, a, b, out); err != nil {
		return err
	}
	if err := c.checkMatmul(what, a, b, out, s, s.M, s.M); err != nil {
		return err
	}
	cl := &call{what: fmt.Sprintf("%s %dx%dx%d %s->%s", what, s.M, s.N, s.K, a.dt, out.dt), dt: a.dt, n: a.n, root: -1}
	if c.matmulSM90(ctx, what, s) {
		return c.fusedSM90(ctx, cl, kernels.FamilyGemmARSM90, a, b, out, s)
	}
	cfg := c.matmulConfig(a.dt, out.dt, s)
	f := kernels.FamilyGemmAR
	if c.mc && cfg.Aligned {
		f = kernels.FamilyGemmARMC
	}
	fn, name, err := c.fusedFunction(f, cfg)
	if err != nil {
		return err
	}
	st, err := c.fusedEnsure(ctx, cl, f, s.M*s.N*4, kernels.GemmARSignalWords(cfg, s.M, s.N, c.g))
	if err != nil {
		return err
	}
	var args any = gemmRSLaunch{A: a.s.at(a.dt), B: b.s.at(b.dt), Scratch: st.buf.table(), Signals: st.sig.table(),
		Rank: uint32(c.rank), NGPUs: uint32(c.g), M: uint32(s.M), N: uint32(s.N), K: uint32(s.K), Epoch: st.epoch, D: out.s.table()}
	if f == kernels.FamilyGemmARMC {
		args = gemmARMCLaunch{A: a.s.at(a.dt), B: b.s.at(b.dt), Scratch: st.buf.at(dsl.F32), ScratchMC: st.buf.multicast(dsl.F32),
			Signals: st.sig.table(), SignalsMC: st.sig.multicast(dsl.U32),
			Rank: uint32(c.rank), NGPUs: uint32(c.g), M: uint32(s.M), N: uint32(s.N), K: uint32(s.K), Epoch: st.epoch, D: out.s.at(out.dt), DMC: out.s.multicast(out.dt)}
	}
	return c.fusedLaunch(ctx, cl, fn, name, cfg.Threads(), cfg.SharedBytes(), kernels.FusedGrid(cfg, s.M, s.N, c.g), st, args)
}

// AllGatherMatmul computes out = A * b on every GPU, A (s.M x s.K) being the row slices a of
// every GPU in rank order (a holds this GPU's s.M/NumGPUs x s.K rows), b (s.K x s.N) and out
// (s.M x s.N) this GPU's: the all-gather of A fused into the GEMM (ag_gemm; each GPU pushes
// its rows to its peers tile by tile while it multiplies its own, and multiplies each peer's
// row tile as soon as it has arrived). a and b are f16 or bf16 (the same), out f16, bf16 or
// f32; N and K multiples of 8 take the 16-byte cp.async kernel. Every rank makes the same
// call.
func (c *Comm) AllGatherMatmul(ctx context.Context, a, b, out *Buffer, s MatmulShape) error {
	const what = "AllGatherMatmul"
	if err := c.begin(ctx, what, a, b, out); err != nil {
		return err
	}
	if err := c.checkMatmul(what, a, b, out, s, s.M/c.g, s.M); err != nil {
		return err
	}
	cl := &call{what: fmt.Sprintf("%s %dx%dx%d %s->%s", what, s.M, s.N, s.K, a.dt, out.dt), dt: a.dt, n: a.n, root: -1}
	if c.matmulSM90(ctx, what, s) {
		return c.fusedSM90(ctx, cl, kernels.FamilyAGGemmSM90, a, b, out, s)
	}
	cfg := c.matmulConfig(a.dt, out.dt, s)
	fn, name, err := c.fusedFunction(kernels.FamilyAGGemm, cfg)
	if err != nil {
		return err
	}
	st, err := c.fusedEnsure(ctx, cl, kernels.FamilyAGGemm, s.M*s.K*a.dt.Bytes(), kernels.AGGemmSignalWords(cfg, s.M, c.g))
	if err != nil {
		return err
	}
	args := agGemmLaunch{A: a.s.at(a.dt), B: b.s.at(b.dt), Gathered: st.buf.table(), Signals: st.sig.table(),
		Rank: uint32(c.rank), NGPUs: uint32(c.g), M: uint32(s.M), N: uint32(s.N), K: uint32(s.K), Epoch: st.epoch, D: out.s.at(out.dt)}
	return c.fusedLaunch(ctx, cl, fn, name, cfg.Threads(), cfg.SharedBytes(), kernels.FusedGrid(cfg, s.M, s.N, c.g), st, args)
}

// MatmulReduceScatter computes the sum over GPUs g of A_g * B_g, A_g (s.M x s.K) and B_g
// (s.K x s.N) being GPU g's a and b (its K slice), and leaves rows [r*s.M/NumGPUs,
// (r+1)*s.M/NumGPUs) of it in GPU r's out (s.M/NumGPUs x s.N): the reduce-scatter fused into
// the GEMM (gemm_rs; each output tile's f32 partial goes to its owner's scratch as soon as
// it is computed, and the owner sums the partials in rank order, so the result does not
// depend on timing). Types and alignment as AllGatherMatmul. Every rank makes the same call.
func (c *Comm) MatmulReduceScatter(ctx context.Context, a, b, out *Buffer, s MatmulShape) error {
	const what = "MatmulReduceScatter"
	if err := c.begin(ctx, what, a, b, out); err != nil {
		return err
	}
	if err := c.checkMatmul(what, a, b, out, s, s.M, s.M/c.g); err != nil {
		return err
	}
	cl := &call{what: fmt.Sprintf("%s %dx%dx%d %s->%s", what, s.M, s.N, s.K, a.dt, out.dt), dt: a.dt, n: a.n, root: -1}
	if c.matmulSM90(ctx, what, s) {
		return c.fusedSM90(ctx, cl, kernels.FamilyGemmRSSM90, a, b, out, s)
	}
	cfg := c.matmulConfig(a.dt, out.dt, s)
	fn, name, err := c.fusedFunction(kernels.FamilyGemmRS, cfg)
	if err != nil {
		return err
	}
	st, err := c.fusedEnsure(ctx, cl, kernels.FamilyGemmRS, s.M*s.N*4, kernels.GemmRSSignalWords(cfg, s.M, s.N, c.g))
	if err != nil {
		return err
	}
	args := gemmRSLaunch{A: a.s.at(a.dt), B: b.s.at(b.dt), Scratch: st.buf.table(), Signals: st.sig.table(),
		Rank: uint32(c.rank), NGPUs: uint32(c.g), M: uint32(s.M), N: uint32(s.N), K: uint32(s.K), Epoch: st.epoch, D: out.s.at(out.dt)}
	return c.fusedLaunch(ctx, cl, fn, name, cfg.Threads(), cfg.SharedBytes(), kernels.FusedGrid(cfg, s.M, s.N, c.g), st, args)
}

// fusedLaunch launches a fused kernel on every GPU's grid and advances its state's epoch.
func (c *Comm) fusedLaunch(ctx context.Context, cl *call, fn *jit.Function, name string, threads, shared, blocks int, st *fusedState, args any) error {
	c.last = name
	if c.debug(ctx) {
		c.log.DebugContext(ctx, "collectives: "+cl.what, "algorithm", name, "gpus", c.g, "blocks", blocks)
	}
	// Not CoResident: a block waits only on blocks of other GPUs that come earlier in their
	// grid's order (docs/collectives.md), so any grid size works.
	lc := jit.LaunchConfig{Grid: jit.D1(blocks), Block: jit.D1(threads), SharedMem: shared, Stream: c.o.Stream,
		Collective: jit.CollectiveOn, Context: ctx}
	if c.emu {
		lc.Call = cl.String()
	}
	if err := c.launchFn(fn, lc, args); err != nil {
		return fmt.Errorf("collectives: %s (%s): %w", cl.what, name, err)
	}
	st.epoch++
	return nil
}
