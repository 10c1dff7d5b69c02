package collectives

import (
	"context"
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/ptx"
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
	if err := kernels.FusedCheckShape(s.M, s.N, s.K, g); err != nil {
		return fmt.Errorf("collectives: %s: %w", what, err)
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
	fn, err := c.loadMatmul(key, name, k)
	return fn, name, err
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

// MatmulAllReduce computes the sum over GPUs g of A_g * B_g into every GPU's out (s.M x s.N),
// A_g (s.M x s.K) and B_g (s.K x s.N) being GPU g's a and b (its K slice): gemm_rs whose
// owners store each summed tile into every GPU's out (gemm_ar, peer stores; with multicast
// and N, K multiples of 8, gemm_ar_mc or on sm_90a gemm_ar_mc_sm90: multimem.ld_reduce of
// the partials, multimem.st of the sums). Across nodes it runs split (see splitMatmul). out
// must be a Buffer of this Comm (symmetric: the peers write into it). Types
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
	if r := c.arOverlap(a.dt, s); r > 0 {
		return c.gemmAROverlap(ctx, cl, a, b, out, s, r)
	}
	if c.node.topo.Nodes > 1 || !c.fuseMatmul() {
		return c.splitMatmul(ctx, cl, kernels.FamilyGemmAR, a, b, out, s)
	}
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
	var args any = launch.GemmRS{A: a.s.at(a.dt), B: b.s.at(b.dt), Scratch: st.buf.table(), Signals: st.sig.table(),
		Rank: uint32(c.rank), NGPUs: uint32(c.g), M: uint32(s.M), N: uint32(s.N), K: uint32(s.K), Epoch: st.epoch, D: out.s.table()}
	if f == kernels.FamilyGemmARMC {
		args = launch.GemmARMC{A: a.s.at(a.dt), B: b.s.at(b.dt), Scratch: st.buf.at(dsl.F32), ScratchMC: st.buf.multicast(dsl.F32),
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
// f32; N and K multiples of 8 take the 16-byte cp.async kernel. Across nodes it runs split:
// the all-gather of a, then the gemm (see splitMatmul). Every rank makes the same call.
func (c *Comm) AllGatherMatmul(ctx context.Context, a, b, out *Buffer, s MatmulShape) error {
	const what = "AllGatherMatmul"
	if err := c.begin(ctx, what, a, b, out); err != nil {
		return err
	}
	if err := c.checkMatmul(what, a, b, out, s, s.M/c.g, s.M); err != nil {
		return err
	}
	cl := &call{what: fmt.Sprintf("%s %dx%dx%d %s->%s", what, s.M, s.N, s.K, a.dt, out.dt), dt: a.dt, n: a.n, root: -1}
	if c.overlapMatmul(true, a.dt, out.dt, s) {
		return c.agGemmOverlap(ctx, cl, a, b, out, s)
	}
	if c.node.topo.Nodes > 1 || !c.fuseMatmul() {
		return c.splitMatmul(ctx, cl, kernels.FamilyAGGemm, a, b, out, s)
	}
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
	args := launch.AGGemm{A: a.s.at(a.dt), B: b.s.at(b.dt), Gathered: st.buf.table(), Signals: st.sig.table(),
		Rank: uint32(c.rank), NGPUs: uint32(c.g), M: uint32(s.M), N: uint32(s.N), K: uint32(s.K), Epoch: st.epoch, D: out.s.at(out.dt)}
	return c.fusedLaunch(ctx, cl, fn, name, cfg.Threads(), cfg.SharedBytes(), kernels.FusedGrid(cfg, s.M, s.N, c.g), st, args)
}

// MatmulReduceScatter computes the sum over GPUs g of A_g * B_g, A_g (s.M x s.K) and B_g
// (s.K x s.N) being GPU g's a and b (its K slice), and leaves rows [r*s.M/NumGPUs,
// (r+1)*s.M/NumGPUs) of it in GPU r's out (s.M/NumGPUs x s.N): the reduce-scatter fused into
// the GEMM (gemm_rs; each output tile's f32 partial goes to its owner's scratch as soon as
// it is computed, and the owner sums the partials in rank order, so the result does not
// depend on timing). Types and alignment as AllGatherMatmul. Across nodes it runs split:
// the gemm, then the reduce-scatter (see splitMatmul). Every rank makes the same call.
func (c *Comm) MatmulReduceScatter(ctx context.Context, a, b, out *Buffer, s MatmulShape) error {
	const what = "MatmulReduceScatter"
	if err := c.begin(ctx, what, a, b, out); err != nil {
		return err
	}
	if err := c.checkMatmul(what, a, b, out, s, s.M, s.M/c.g); err != nil {
		return err
	}
	cl := &call{what: fmt.Sprintf("%s %dx%dx%d %s->%s", what, s.M, s.N, s.K, a.dt, out.dt), dt: a.dt, n: a.n, root: -1}
	if c.overlapMatmul(false, a.dt, out.dt, s) {
		if cfg, ok := c.rsSignalConfig(a.dt, out.dt, s); ok {
			return c.gemmRSSignal(ctx, cl, cfg, a, b, out, s)
		}
		return c.gemmRSOverlap(ctx, cl, a, b, out, s)
	}
	if c.node.topo.Nodes > 1 || !c.fuseMatmul() {
		return c.splitMatmul(ctx, cl, kernels.FamilyGemmRS, a, b, out, s)
	}
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
	args := launch.GemmRS{A: a.s.at(a.dt), B: b.s.at(b.dt), Scratch: st.buf.table(), Signals: st.sig.table(),
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

// splitMatmul runs fused family f across nodes, where the fused kernels (peer pointers to
// every rank) cannot: the collective across nodes (as AllGather, ReduceScatter and
// AllReduce choose it) and the plain gemm (kernels.Gemm with the Options.Matmul tiles), in
// stream order. AllGatherMatmul gathers a into a Comm buffer, then multiplies;
// MatmulReduceScatter multiplies into a Comm buffer of out's type, then reduce-scatters it
// into out; MatmulAllReduce multiplies into out, then all-reduces it in place. The
// products are rounded to out's type before the reduction (the fused kernels sum f32
// partials and round once), so f16 and bf16 outputs may differ from them in the last bit.
func (c *Comm) splitMatmul(ctx context.Context, cl *call, f kernels.Family, a, b, out *Buffer, s MatmulShape) error {
	cfg := c.matmulConfig(a.dt, out.dt, s)
	gemm := func(a, d *Buffer, m int) (string, error) {
		if ok, _ := kernels.UseSM90(c.o.Target, s.N, s.K); ok {
			return c.gemmSM90(ctx, cl, a, b, d, MatmulShape{M: m, N: s.N, K: s.K})
		}
		cfg := cfg
		cfg.Aligned = cfg.Aligned && m%8 == 0
		fn, name, err := c.gemmFunction(cfg)
		if err != nil {
			return "", err
		}
		lc := jit.LaunchConfig{Grid: jit.D1(cfg.Grid(m, s.N)), Block: jit.D1(cfg.Threads()), SharedMem: cfg.SharedBytes(), Stream: c.o.Stream, Context: ctx}
		args := launch.Gemm{A: a.s.at(a.dt), B: b.s.at(b.dt), M: uint32(m), N: uint32(s.N), K: uint32(s.K), Alpha: 1, C: d.s.at(d.dt), D: d.s.at(d.dt)}
		if err := c.launchFn(fn, lc, args); err != nil {
			return "", fmt.Errorf("collectives: %s (%s): %w", cl.what, name, err)
		}
		return name, nil
	}
	var coll, mm string
	switch f {
	case kernels.FamilyAGGemm:
		gathered, err := c.partBuffer(ctx, cl, a.dt, s.M*s.K)
		if err != nil {
			return err
		}
		if err := c.AllGather(ctx, gathered, a); err != nil {
			return err
		}
		coll = c.last
		if mm, err = gemm(gathered, out, s.M); err != nil {
			return err
		}
		c.last = coll + "+" + mm
		return nil
	case kernels.FamilyGemmRS:
		prod, err := c.partBuffer(ctx, cl, out.dt, s.M*s.N)
		if err != nil {
			return err
		}
		if mm, err = gemm(a, prod, s.M); err != nil {
			return err
		}
		if err := c.ReduceScatter(ctx, out, prod, Sum); err != nil {
			return err
		}
	default:
		var err error
		if mm, err = gemm(a, out, s.M); err != nil {
			return err
		}
		if err := c.AllReduce(ctx, out, Sum); err != nil {
			return err
		}
	}
	c.last = mm + "+" + c.last
	return nil
}

// gemmSM90 runs d = a * b on gemm_sm90 in the configuration kernels.GemmSM90For picks for
// the shape and the device's SMs, fed by the Comm's cached tensor maps.
func (c *Comm) gemmSM90(ctx context.Context, cl *call, a, b, d *Buffer, s MatmulShape) (string, error) {
	return c.gemmSM90On(ctx, cl, gemmOperands{a: a.s, b: b.s, in: a.dt, d: d.s, out: d.dt}, s, c.o.Stream)
}

// gemmOperands are a gemm_sm90 call's matrices: A (M x K) and B (K x N) of type in, D (M x
// N) of type out, each row-major in its symmetric allocation from the element offset aOff,
// 0, dOff (a chunk of rows of a larger matrix).
type gemmOperands struct {
	a, b, d    *sym
	in, out    dsl.Type
	aOff, dOff int
}

// gemmSM90On is gemmSM90 on operands x, on stream.
func (c *Comm) gemmSM90On(ctx context.Context, cl *call, x gemmOperands, s MatmulShape, stream *jit.Stream) (string, error) {
	sms := max(c.r.Device.Info().Multiproc, 1)
	out := x.out
	cfg, err := kernels.GemmSM90For(x.in, out, s.M, s.N, s.K, sms)
	if err != nil {
		return "", fmt.Errorf("collectives: %s: %w", cl.what, err)
	}
	if cfg.TMAStore && out != dsl.F16 && out != dsl.BF16 {
		cfg.TMAStore = false // the Comm's tensor maps are of 16-bit types: store from registers
	}
	if err := cfg.CheckShape(s.M, s.N, s.K); err != nil {
		return "", fmt.Errorf("collectives: %s: %w", cl.what, err)
	}
	name := cfg.Name()
	fn, err := c.gemmSM90Function(cfg)
	if err != nil {
		return "", err
	}
	tmA, err := c.tensorMapAt(x.a, x.aOff, x.in, s.K, s.M, cfg.TMABoxA())
	if err != nil {
		return "", fmt.Errorf("collectives: %s: A's tensor map: %w", cl.what, err)
	}
	tmB, err := c.tensorMapAt(x.b, 0, x.in, s.N, s.K, cfg.TMABoxB())
	if err != nil {
		return "", fmt.Errorf("collectives: %s: B's tensor map: %w", cl.what, err)
	}
	lc := jit.LaunchConfig{Grid: jit.D1(cfg.Grid(s.M, s.N, sms)), Block: jit.D1(cfg.Threads()), SharedMem: cfg.SharedBytes(),
		Stream: stream, Context: ctx}
	if cl := cfg.Cluster(); cl > 1 {
		lc.Cluster = jit.D1(cl)
	}
	d := jit.AnyPtr{Addr: x.d.own + jit.DevicePtr(x.dOff*out.Bytes()), Elem: out}
	var args any = launch.GemmSM90{TmA: tmA, TmB: tmB, M: uint32(s.M), N: uint32(s.N), K: uint32(s.K), Alpha: 1, C: d, D: d}
	if cfg.TMAStore {
		tmD, err := c.tensorMapAt(x.d, x.dOff, out, s.N, s.M, cfg.TMABoxD())
		if err != nil {
			return "", fmt.Errorf("collectives: %s: D's tensor map: %w", cl.what, err)
		}
		args = launch.GemmSM90Store{TmA: tmA, TmB: tmB, M: uint32(s.M), N: uint32(s.N), K: uint32(s.K), Alpha: 1, C: d, D: d, TmD: tmD}
	}
	if err := c.launchFn(fn, lc, args); err != nil {
		return "", fmt.Errorf("collectives: %s (%s): %w", cl.what, name, err)
	}
	return name, nil
}

// gemmFunction builds and loads (once) the plain gemm for cfg.
func (c *Comm) gemmFunction(cfg kernels.GemmConfig) (*jit.Function, string, error) {
	key := fusedKey{"gemm", cfg.In, cfg.Out, cfg.Aligned}
	name := cfg.Name()
	if fn, ok := c.fused[key]; ok {
		return fn, name, nil
	}
	if err := cfg.Check(); err != nil {
		return nil, "", fmt.Errorf("collectives: Options.Matmul: %w", err)
	}
	k := dsl.New(name, dsl.WithTarget(c.o.Target))
	kernels.Gemm(k, cfg)
	fn, err := c.loadMatmul(key, name, k)
	return fn, name, err
}

// gemmSM90Function loads (once) gemm_sm90 in configuration cfg for the Comm's aligned
// buffers.
func (c *Comm) gemmSM90Function(cfg kernels.GemmSM90Config) (*jit.Function, error) {
	name := cfg.Name()
	key := fusedKey{f: kernels.Family(name), in: cfg.In, out: cfg.Out, aligned: true}
	if fn, ok := c.fused[key]; ok {
		return fn, nil
	}
	k := dsl.New(name, dsl.WithTarget(ptx.SM90a))
	kernels.GemmSM90(k, cfg)
	return c.loadMatmul(key, name, k)
}

// loadMatmul builds kernel k (entry name), loads it and keeps its function in the Comm's
// matmul cache under key.
func (c *Comm) loadMatmul(key fusedKey, name string, k *dsl.Kernel) (*jit.Function, error) {
	m, err := k.Build()
	if err != nil {
		return nil, fmt.Errorf("collectives: building %s: %w", name, err)
	}
	mod, err := c.r.Device.Load(jit.Source{Module: m, Params: map[string][]jit.ParamInfo{name: jit.ParamInfos(k.Params())}})
	if err != nil {
		return nil, fmt.Errorf("collectives: loading %s: %w", name, err)
	}
	c.mods = append(c.mods, mod)
	fn, err := mod.Function(name)
	if err != nil {
		return nil, err
	}
	if c.fused == nil {
		c.fused = map[fusedKey]*jit.Function{}
	}
	c.fused[key] = fn
	return fn, nil
}
