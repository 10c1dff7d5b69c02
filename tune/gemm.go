package tune

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// GemmKernel is the kernel family of the sm_90a GEMM's keys.
const GemmKernel = string(kernels.FamilyGemmSM90)

// GemmProblem is one GEMM to tune: D (M x N, Out) = A (M x K, In) times B (K x N, or N x K
// for fp8 inputs), row-major, as kernels.GemmSM90 computes it.
type GemmProblem struct {
	In, Out dsl.Type
	M, N, K int
	// Epilogue is the library epilogue fused into the stores (kernels.Epilogue): its
	// kernels are tuned as their own, since the epilogue's cost depends on the tile.
	Epilogue kernels.Epilogue
}

// String is "MxNxK in->out", then " +" and the epilogue's options when it has any.
func (p GemmProblem) String() string {
	s := fmt.Sprintf("%s %s->%s", ExactShape(p.M, p.N, p.K), p.In, p.Out)
	if !p.Epilogue.IsZero() {
		s += " +" + p.Epilogue.String()
	}
	return s
}

// Check returns an error, naming the rule, for element types no candidate builds or a shape
// gemm_sm90 cannot run.
func (p GemmProblem) Check() error {
	c := kernels.GemmSM90Config{In: p.In, Out: p.Out, BN: 64, Consumers: 1, Stages: 2}
	if err := c.Check(); err != nil {
		return fmt.Errorf("tune: %w", err)
	}
	if err := c.CheckShape(p.M, p.N, p.K); err != nil {
		return fmt.Errorf("tune: %w", err)
	}
	if !p.Epilogue.IsZero() {
		c.Epilogue = p.Epilogue
		if err := c.Check(); err != nil {
			return fmt.Errorf("tune: %w", err)
		}
	}
	return nil
}

// GemmKey returns p's key on the device info describes: the shape class is ExactShape, or
// Pow2Shape with bucket.
func GemmKey(info jit.Info, p GemmProblem, bucket bool) Key {
	shape := ExactShape(p.M, p.N, p.K)
	if bucket {
		shape = Pow2Shape(p.M, p.N, p.K)
	}
	kernel := GemmKernel
	if !p.Epilogue.IsZero() {
		kernel += "_ep_" + strings.ReplaceAll(p.Epilogue.String(), "+", "_")
	}
	return Key{Device: DeviceOf(info), Kernel: kernel, DTypes: p.In.String() + "->" + p.Out.String(), Shape: shape}
}

// GemmCandidates returns kernels.GemmSM90Candidates(in, out), each named by its kernel name.
func GemmCandidates(in, out dsl.Type) []Candidate[kernels.GemmSM90Config] {
	var cs []Candidate[kernels.GemmSM90Config]
	for _, c := range kernels.GemmSM90Candidates(in, out) {
		cs = append(cs, Candidate[kernels.GemmSM90Config]{Name: c.Name(), Config: c})
	}
	return cs
}

// gemmCandidates returns GemmCandidates for p's types with p's epilogue.
func gemmCandidates(p GemmProblem) []Candidate[kernels.GemmSM90Config] {
	cs := GemmCandidates(p.In, p.Out)
	for i := range cs {
		cs[i].Config.Epilogue = p.Epilogue
		cs[i].Name = cs[i].Config.Name()
	}
	return cs
}

// GemmConfig returns the configuration for p on the device info describes, never timing:
// the winner t has cached for p (its ExactShape key, else its Pow2Shape key; cached true),
// else kernels.GemmSM90For's estimate for the device's multiprocessors. A nil t is the
// tuner on DefaultDir as it is at the first such call; when that folder is refused, the
// estimate. It returns an error for a
// problem p.Check refuses.
func GemmConfig(t *Tuner, info jit.Info, p GemmProblem) (cfg kernels.GemmSM90Config, cached bool, err error) {
	if err := p.Check(); err != nil {
		return cfg, false, err
	}
	if t == nil {
		t, _ = defaultTuner()
	}
	if t != nil {
		cands := gemmCandidates(p)
		for _, bucket := range []bool{false, true} {
			if c, ok := Lookup(t, GemmKey(info, p, bucket), cands); ok {
				return c.Config, true, nil
			}
		}
	}
	cfg, err = kernels.GemmSM90For(p.In, p.Out, p.M, p.N, p.K, max(info.Multiproc, 1))
	return cfg.WithEpilogue(p.Epilogue), false, err
}

var (
	defaultOnce sync.Once
	defaultT    *Tuner
	defaultErr  error
)

// defaultTuner is the tuner on DefaultDir with the default schedule, made once.
func defaultTuner() (*Tuner, error) {
	defaultOnce.Do(func() { defaultT, defaultErr = New("", Schedule{}) })
	return defaultT, defaultErr
}

// GemmOptions set TuneGemm.
type GemmOptions struct {
	Bucket bool // key by Pow2Shape instead of ExactShape
	Force  bool // time even when a winner is cached, and replace it (Retune)
	Check  bool // compare a sample of each candidate's D with a float64 reference (GemmTimer.Check)
}

// TuneGemm returns the fastest of GemmCandidates(p.In, p.Out) for p on d (Tune with a
// GemmTimer): the cached winner when there is one (nothing allocated or timed, unless
// o.Force), else the winner of timings on d, then cached.
func TuneGemm(ctx context.Context, t *Tuner, d *jit.Device, p GemmProblem, o GemmOptions) (Result[kernels.GemmSM90Config], error) {
	if err := checkCtx(ctx, "TuneGemm"); err != nil {
		return Result[kernels.GemmSM90Config]{}, err
	}
	if t == nil || d == nil {
		return Result[kernels.GemmSM90Config]{}, errors.New("tune: TuneGemm needs a *Tuner (New) and a *jit.Device (jit.Open)")
	}
	if err := p.Check(); err != nil {
		return Result[kernels.GemmSM90Config]{}, err
	}
	k, cands := GemmKey(d.Info(), p, o.Bucket), gemmCandidates(p)
	if !o.Force {
		if c, ok := Lookup(t, k, cands); ok {
			return Result[kernels.GemmSM90Config]{Key: k, Winner: c, Cached: true, Path: t.Path(k)}, nil
		}
	}
	g, err := NewGemmTimer(d, p)
	if err != nil {
		return Result[kernels.GemmSM90Config]{Key: k}, err
	}
	defer g.Close()
	g.Check = o.Check
	if o.Force {
		return Retune(ctx, t, k, cands, g.Time)
	}
	return Tune(ctx, t, k, cands, g.Time)
}

// GemmTimer times gemm_sm90 configurations for one problem on one device: A and B hold
// random values in [-1, 1), D = A*B (alpha 1, beta 0). Each candidate's kernel is built and
// loaded on its first Time; every Time launches it Batch times back to back between two
// events on a stream of its own and returns the mean. A failure to build, load or launch a
// candidate skips it; a fault while it runs (the stream or an event fails) aborts the
// tuning (Abort: the device may be lost, so later timings would be wrong). It is a Timer for Tune (its Time
// method); Close frees what it holds.
type GemmTimer struct {
	// Batch is the launches per measurement; 0 picks, on a candidate's first call (after
	// one launch to warm up and one timed alone), as many as take about BatchTarget (at
	// most 64) on the GPU, and one on the emulator.
	Batch int
	// BatchTarget is the time a batch aims for when Batch is 0 (0: one millisecond).
	BatchTarget time.Duration
	// Check compares, on a candidate's first launch, a sample of D with float64 sums over A
	// and B: a candidate outside the tolerance fails (a fast wrong kernel never wins).
	Check bool

	mu     sync.Mutex
	d      *jit.Device
	p      GemmProblem
	s      *jit.Stream
	e0, e1 *jit.Event
	a, b   *jit.Memory
	out    *jit.Memory
	ha, hb []byte // A and B as the device holds them, for Check
	// The epilogue's operands (p.Epilogue): f32 vectors bias (N), scaleA (M), scaleB (N),
	// and the residual (M x N of Out), with their host copies; nil when unused.
	bias, scaleA, scaleB, res     *jit.Memory
	hbias, hscaleA, hscaleB, hres []byte
	runs                          map[string]*gemmRun
	closed                        bool
}

// gemmRun is one loaded candidate.
type gemmRun struct {
	mod    *jit.Module
	launch func(ctx context.Context) error
	batch  int
	err    error // why it cannot run (kept: a later call fails alike)
}

// NewGemmTimer allocates p's matrices on d and fills A and B.
func NewGemmTimer(d *jit.Device, p GemmProblem) (*GemmTimer, error) {
	if d == nil {
		return nil, errors.New("tune: NewGemmTimer: nil *jit.Device")
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	g := &GemmTimer{d: d, p: p, runs: map[string]*gemmRun{}}
	ok := false
	defer func() {
		if !ok {
			g.Close()
		}
	}()
	var err error
	if g.s, err = d.NewStream(); err != nil {
		return nil, err
	}
	if g.e0, err = d.NewEvent(); err != nil {
		return nil, err
	}
	if g.e1, err = d.NewEvent(); err != nil {
		return nil, err
	}
	in, out := float64(p.In.Bytes()), float64(p.Out.Bytes())
	m, n, k := float64(p.M), float64(p.N), float64(p.K)
	// Sizes in float64 first: M*K*4 overflows an int64 for the largest shapes Check takes.
	sa, sb, sd := m*k*in, k*n*in, m*n*out
	if p.Epilogue.Residual {
		sd *= 2 // and the residual
	}
	if sa+sb > maxGemmHost {
		return nil, fmt.Errorf("tune: NewGemmTimer: %s: A and B take %.4g bytes, held on the host too (the Check reference): at most %d (%d GiB)", p, sa+sb, int64(maxGemmHost), int64(maxGemmHost)>>30)
	}
	if mem := d.Info().TotalMem; mem > 0 && sa+sb+sd > float64(mem) {
		return nil, fmt.Errorf("tune: NewGemmTimer: %s: A, B and D take %.4g bytes, more than the device's %d", p, sa+sb+sd, mem)
	}
	// The device's memory first (it refuses what it cannot hold), then the host's copies.
	for _, x := range []struct {
		mem  **jit.Memory
		size int64
	}{{&g.a, int64(sa)}, {&g.b, int64(sb)}, {&g.out, int64(sd)}} {
		if *x.mem, err = d.Alloc(x.size); err != nil {
			return nil, fmt.Errorf("tune: %s: %w", p, err)
		}
	}
	g.ha, g.hb = randomMatrix(p.In, int64(p.M)*int64(p.K), 1), randomMatrix(p.In, int64(p.K)*int64(p.N), 2)
	if err := d.CopyHtoD(g.a.DevPtr(), g.ha); err != nil {
		return nil, err
	}
	if err := d.CopyHtoD(g.b.DevPtr(), g.hb); err != nil {
		return nil, err
	}
	// The epilogue's operands: random values in [-1, 1) like A and B.
	e := p.Epilogue
	for _, x := range []struct {
		on   bool
		mem  **jit.Memory
		host *[]byte
		t    dsl.Type
		n    int64
		seed uint64
	}{
		{e.Bias, &g.bias, &g.hbias, dsl.F32, int64(p.N), 3},
		{e.Scales, &g.scaleA, &g.hscaleA, dsl.F32, int64(p.M), 4},
		{e.Scales, &g.scaleB, &g.hscaleB, dsl.F32, int64(p.N), 5},
		{e.Residual, &g.res, &g.hres, p.Out, int64(p.M) * int64(p.N), 6},
	} {
		if !x.on {
			continue
		}
		*x.host = randomMatrix(x.t, x.n, x.seed)
		if *x.mem, err = d.Alloc(int64(len(*x.host))); err != nil {
			return nil, fmt.Errorf("tune: %s: %w", p, err)
		}
		if err := d.CopyHtoD((*x.mem).DevPtr(), *x.host); err != nil {
			return nil, err
		}
	}
	ok = true
	return g, nil
}

// maxGemmHost bounds the bytes of A and B a GemmTimer holds on the host (16 GiB).
const maxGemmHost = 1 << 34

// Close frees the matrices, modules, stream and events; a second Close does nothing.
func (g *GemmTimer) Close() error {
	if g == nil {
		return errors.New("tune: Close of a nil *GemmTimer")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	var errs []error
	if g.s != nil {
		errs = append(errs, g.s.Synchronize())
	}
	for _, r := range g.runs {
		if r.mod != nil {
			errs = append(errs, r.mod.Close())
		}
	}
	for _, m := range []*jit.Memory{g.a, g.b, g.out, g.bias, g.scaleA, g.scaleB, g.res} {
		if m != nil {
			errs = append(errs, m.Free())
		}
	}
	for _, e := range []*jit.Event{g.e0, g.e1} {
		if e != nil {
			errs = append(errs, e.Close())
		}
	}
	if g.s != nil {
		errs = append(errs, g.s.Close())
	}
	return errors.Join(errs...)
}

// Time measures candidate c once (see GemmTimer): the mean time of one launch of a batch.
func (g *GemmTimer) Time(ctx context.Context, c Candidate[kernels.GemmSM90Config]) (time.Duration, error) {
	if g == nil {
		return 0, errors.New("tune: GemmTimer.Time of a nil *GemmTimer: use NewGemmTimer")
	}
	if err := checkCtx(ctx, "GemmTimer.Time"); err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return 0, errors.New("tune: GemmTimer.Time after Close")
	}
	if g.d == nil || g.runs == nil {
		return 0, errors.New("tune: GemmTimer.Time on a GemmTimer not made by NewGemmTimer: use NewGemmTimer")
	}
	r := g.runs[c.Name]
	if r == nil {
		r = g.prepare(ctx, c.Config)
		g.runs[c.Name] = r
	}
	if r.err != nil {
		return 0, r.err
	}
	if r.batch == 0 { // the first call: one launch to warm up, one timed to size the batch
		r.batch = g.Batch
		if r.batch <= 0 {
			if _, err := g.timeBatch(ctx, r, 1); err != nil {
				r.batch = 0
				return 0, err
			}
			t, err := g.timeBatch(ctx, r, 1)
			if err != nil {
				r.batch = 0
				return 0, err
			}
			r.batch = 1
			if target := g.batchTarget(); g.d.Info().Backend != jit.Emulator && t < target {
				r.batch = min(64, int(target/t)+1)
			}
		}
	}
	return g.timeBatch(ctx, r, r.batch)
}

func (g *GemmTimer) batchTarget() time.Duration {
	if g.BatchTarget > 0 {
		return g.BatchTarget
	}
	return time.Millisecond
}

// timeBatch times n launches of r between the two events.
func (g *GemmTimer) timeBatch(ctx context.Context, r *gemmRun, n int) (time.Duration, error) {
	if err := g.e0.Record(g.s); err != nil {
		return 0, Abort(err)
	}
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			g.s.Synchronize()
			return 0, err
		}
		if err := r.launch(ctx); err != nil { // refused (resources, arguments): this candidate's
			if serr := g.s.Synchronize(); serr != nil {
				return 0, Abort(errors.Join(err, serr))
			}
			return 0, err
		}
	}
	if err := g.e1.Record(g.s); err != nil {
		return 0, Abort(err)
	}
	if err := g.s.SynchronizeContext(ctx); err != nil { // e1 is the stream's last work
		if ctx.Err() != nil {
			return 0, err // the caller gave up (on GPUs the kernel runs on)
		}
		return 0, Abort(err) // a kernel fault: the device is lost
	}
	t, err := g.e0.Elapsed(g.e1)
	if err != nil {
		return 0, Abort(err)
	}
	return t / time.Duration(n), nil
}

// prepare builds, loads and (with Check) checks cfg; a failure is kept in the run's err.
func (g *GemmTimer) prepare(ctx context.Context, cfg kernels.GemmSM90Config) *gemmRun {
	r := &gemmRun{}
	p := g.p
	if cfg.In != p.In || cfg.Out != p.Out {
		r.err = fmt.Errorf("tune: configuration %s is for %s->%s, the problem %s", cfg.Name(), cfg.In, cfg.Out, p)
		return r
	}
	lc, err := cfg.Launch(p.M, p.N, p.K, max(g.d.Info().Multiproc, 1))
	if err != nil {
		r.err = err
		return r
	}
	name := cfg.Name()
	kb := dsl.New(name, dsl.WithTarget(ptx.SM90a))
	kernels.GemmSM90(kb, cfg)
	mod, err := kb.Build()
	if err != nil {
		r.err = fmt.Errorf("building %s: %w", name, err)
		return r
	}
	if r.mod, err = g.d.Load(jit.Source{Module: mod, Params: map[string][]jit.ParamInfo{name: jit.ParamInfos(kb.Params())}}); err != nil {
		r.err = fmt.Errorf("loading %s: %w", name, err)
		return r
	}
	fn, err := r.mod.Function(name)
	if err != nil {
		r.err = err
		return r
	}
	tmA, err := tensorMap(g.a, lc.A)
	if err != nil {
		r.err = fmt.Errorf("%s: A's tensor map: %w", name, err)
		return r
	}
	tmB, err := tensorMap(g.b, lc.B)
	if err != nil {
		r.err = fmt.Errorf("%s: B's tensor map: %w", name, err)
		return r
	}
	d := jit.AnyPtr{Addr: g.out.DevPtr(), Elem: p.Out}
	args := []any{tmA, tmB, uint32(p.M), uint32(p.N), uint32(p.K), float32(1), float32(0), d, d}
	if lc.HasD {
		tmD, err := tensorMap(g.out, lc.D)
		if err != nil {
			r.err = fmt.Errorf("%s: D's tensor map: %w", name, err)
			return r
		}
		args = append(args, tmD)
	}
	if !cfg.Epilogue.IsZero() { // kernels.GemmEpilogueArgs: bias, scaleA, scaleB, residual
		ptr := func(m *jit.Memory, t dsl.Type) jit.AnyPtr {
			if m == nil {
				return jit.AnyPtr{Elem: t}
			}
			return jit.AnyPtr{Addr: m.DevPtr(), Elem: t}
		}
		args = append(args, ptr(g.bias, dsl.F32), ptr(g.scaleA, dsl.F32), ptr(g.scaleB, dsl.F32), ptr(g.res, p.Out))
	}
	jl := jit.LaunchConfig{Grid: jit.D1(lc.Grid), Block: jit.D1(lc.Block), SharedMem: lc.SharedBytes, Stream: g.s}
	if lc.Cluster > 1 {
		jl.Cluster = jit.D1(lc.Cluster)
	}
	r.launch = func(ctx context.Context) error {
		l := jl
		l.Context = ctx
		return fn.Launch(l, args...)
	}
	if g.Check {
		r.err = g.check(ctx, r, name)
	}
	return r
}

// tensorMap encodes s over mem.
func tensorMap(mem *jit.Memory, s kernels.TMASpec) (jit.TensorMap, error) {
	switch s.Elem {
	case dsl.BF16:
		return mapOf[fp.BF16](mem, s)
	case dsl.F16:
		return mapOf[fp.F16](mem, s)
	case dsl.E4M3:
		return mapOf[fp.E4M3](mem, s)
	case dsl.E5M2:
		return mapOf[fp.E5M2](mem, s)
	case dsl.F32:
		return mapOf[float32](mem, s)
	}
	return jit.TensorMap{}, fmt.Errorf("no tensor-map element type for %s", s.Elem)
}

func mapOf[T jit.Elem](mem *jit.Memory, s kernels.TMASpec) (jit.TensorMap, error) {
	b, err := jit.BufferOf[T](mem, int(mem.Size()/int64(s.Elem.Bytes())))
	if err != nil {
		return jit.TensorMap{}, err
	}
	return jit.NewTensorMap(b, s.Dims[:], s.Strides[:], s.Box[:], jit.Swizzle(s.Swizzle))
}

// checkSamples is how many elements of D Check compares.
const checkSamples = 64

// check sets checkSamples elements of D to NaN, launches r once and compares them with
// float64 sums over A and B.
func (g *GemmTimer) check(ctx context.Context, r *gemmRun, name string) error {
	p := g.p
	ob := p.Out.Bytes()
	rng := uint64(0x9e3779b97f4a7c15)
	next := func(n int) int {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return int(rng % uint64(n))
	}
	type at struct{ i, j int }
	pts := []at{{0, 0}, {p.M - 1, p.N - 1}}
	for len(pts) < checkSamples {
		pts = append(pts, at{next(p.M), next(p.N)})
	}
	nan := encode(p.Out, math.NaN())
	for _, q := range pts {
		if err := g.d.CopyHtoD(g.out.DevPtr().Add(int64(q.i*p.N+q.j)*int64(ob)), nan); err != nil {
			return Abort(err)
		}
	}
	if err := r.launch(ctx); err != nil {
		return err
	}
	if err := g.s.SynchronizeContext(ctx); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return Abort(err)
	}
	eps := map[dsl.Type]float64{dsl.BF16: 0x1p-7, dsl.F16: 0x1p-10, dsl.F32: 0x1p-20}[p.Out]
	buf := make([]byte, ob)
	for _, q := range pts {
		if err := g.d.CopyDtoH(buf, g.out.DevPtr().Add(int64(q.i*p.N+q.j)*int64(ob))); err != nil {
			return Abort(err)
		}
		got := decode(p.Out, buf)
		sum, abs := 0.0, 0.0
		for l := 0; l < p.K; l++ {
			bi := l*p.N + q.j
			if p.In == dsl.E4M3 || p.In == dsl.E5M2 { // B is N x K
				bi = q.j*p.K + l
			}
			x := decodeAt(p.In, g.ha, q.i*p.K+l) * decodeAt(p.In, g.hb, bi)
			sum += x
			abs += math.Abs(x)
		}
		want, tol := g.epilogueRef(q.i, q.j, sum, abs)
		tol += eps * math.Abs(want)
		if !(math.Abs(got-want) <= tol) {
			return fmt.Errorf("%s computes a wrong D for %s: D[%d][%d] = %g, the float64 reference %g (tolerance %.3g)", name, p, q.i, q.j, got, want, tol)
		}
	}
	return nil
}

// epilogueRef returns D[i][j]'s float64 value for the product's sum (over K, with absolute
// sum abs) through p's epilogue, and the bound on the kernel's error before Out's rounding:
// f32 accumulation, and 2^-11 |v| for the activations' tanh.approx.
func (g *GemmTimer) epilogueRef(i, j int, sum, abs float64) (float64, float64) {
	e, n := g.p.Epilogue, g.p.N
	v, tol := sum, float64(g.p.K+4)*0x1p-23*abs+1e-30
	if e.Scales {
		s := decodeAt(dsl.F32, g.hscaleA, i) * decodeAt(dsl.F32, g.hscaleB, j)
		v, tol = v*s, tol*math.Abs(s)
	}
	if e.Bias {
		v += decodeAt(dsl.F32, g.hbias, j)
	}
	switch e.Act {
	case kernels.ReLU:
		v = math.Max(v, 0)
	case kernels.SiLU:
		tol += 0x1p-11 * math.Abs(v)
		v = v / (1 + math.Exp(-v))
	case kernels.GELU:
		tol += 0x1p-11 * math.Abs(v)
		v = 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
	}
	if e.Residual {
		v += decodeAt(g.p.Out, g.hres, i*n+j)
	}
	return v, tol
}

// randomMatrix returns n values of t: multiples of 1/64 in [-1, 1) rounded to t, from a
// generator seeded by seed.
func randomMatrix(t dsl.Type, n int64, seed uint64) []byte {
	var table [128][]byte
	for i := range table {
		table[i] = encode(t, float64(i-64)/64)
	}
	es := int64(t.Bytes())
	b := make([]byte, n*es)
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := int64(0); i < n; i++ {
		if i%8 == 0 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		v := table[(x>>(8*(i%8)))&127]
		copy(b[i*es:], v)
	}
	return b
}

// encode returns v as t's little-endian bytes.
func encode(t dsl.Type, v float64) []byte {
	f := float32(v)
	switch t {
	case dsl.BF16:
		return binary.LittleEndian.AppendUint16(nil, uint16(fp.BF16Of(f)))
	case dsl.F16:
		return binary.LittleEndian.AppendUint16(nil, uint16(fp.F16Of(f)))
	case dsl.E4M3:
		return []byte{byte(fp.E4M3Of(f))}
	case dsl.E5M2:
		return []byte{byte(fp.E5M2Of(f))}
	}
	return binary.LittleEndian.AppendUint32(nil, math.Float32bits(f))
}

// decode reads one value of t from b.
func decode(t dsl.Type, b []byte) float64 {
	switch t {
	case dsl.BF16:
		return float64(fp.BF16(binary.LittleEndian.Uint16(b)).Float32())
	case dsl.F16:
		return float64(fp.F16(binary.LittleEndian.Uint16(b)).Float32())
	case dsl.E4M3:
		return float64(fp.E4M3(b[0]).Float32())
	case dsl.E5M2:
		return float64(fp.E5M2(b[0]).Float32())
	}
	return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
}

// decodeAt reads element i of a matrix of t.
func decodeAt(t dsl.Type, b []byte, i int) float64 {
	es := t.Bytes()
	return decode(t, b[i*es:(i+1)*es])
}

// VerifyGemm times winner beside every candidate of p on d (Verify with a GemmTimer and
// schedule s): the acceptance check that the pick is within noise of the best.
func VerifyGemm(ctx context.Context, d *jit.Device, p GemmProblem, winner string, s Schedule, check bool) (Verification, error) {
	if err := checkCtx(ctx, "VerifyGemm"); err != nil {
		return Verification{Winner: winner}, err
	}
	g, err := NewGemmTimer(d, p)
	if err != nil {
		return Verification{Winner: winner}, err
	}
	defer g.Close()
	g.Check = check
	return Verify(ctx, s, winner, gemmCandidates(p), g.Time)
}
