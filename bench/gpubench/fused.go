package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// runFused is `gpubench fused`: on every rank of a multi-GPU program (one process per GPU,
// `kgen launch -n N --backend cuda -- gpubench fused`; run directly it is one rank), for each
// problem MxNxK (every rank's GEMM: ag_gemm's gathered M x K times K x N, gemm_rs's and
// gemm_ar's K slice) and each fused op, times the fused kernel (collectives'
// AllGatherMatmul, MatmulReduceScatter, MatmulAllReduce), the unfused kgen pair (AllGather
// then gemm; gemm then ReduceScatter; gemm then AllReduce) and the plain gemm of the same
// problem, with CUDA events on one stream (3 warm-ups, median of -reps), after checking a
// sample of each output against a float64 reference. bf16 in and out. Prints one line per
// measurement, or with -json one object per line for scripts/bench/fused_join.py.
func runFused(args []string) error { return fused(os.Stdout, args) }

// syncWriter serializes the ranks' lines (on the emulator the ranks are goroutines).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// fused is runFused writing its lines to w.
func fused(w io.Writer, args []string) error {
	sw := &syncWriter{w: w}
	fs := flag.NewFlagSet("fused", flag.ContinueOnError)
	sizes := fs.String("sizes", "4096,8192,8192x4096x14336", "problems: N (N^3) or MxNxK, comma-separated")
	ops := fs.String("ops", "ag_gemm,gemm_rs,gemm_ar", "fused ops to time")
	reps := fs.Int("reps", 20, "timed repetitions (after 3 warm-ups)")
	asJSON := fs.Bool("json", false, "print one JSON object per measurement")
	soak := fs.Int("soak", 0, "after timing each implementation, this many calls back to back (no host synchronize between them), the output checked after the last")
	rounds := fs.String("ar-rounds", "", "also time MatmulAllReduce on the copy engines in these rounds (comma-separated counts: impl kgen/overlap-rN)")
	rsSignal := fs.Bool("rs-signal", false, "also time MatmulReduceScatter on the copy engines with one persistent piece-signalling gemm_sm90 and stream waits (Options.OverlapSignals: impl kgen/overlap-signal; gemm_rs only)")
	sm90 := fs.Bool("sm90", false, "target sm_90a: the fused ops run ag_gemm_sm90, gemm_rs_sm90, gemm_ar_sm90 (TMA + wgmma) and the plain and unfused gemm is gemm_sm90")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if *soak < 0 {
		return usagef("-soak %d: want 0 or more calls", *soak)
	}
	var roundList []int
	for _, f := range strings.Split(*rounds, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		r, err := strconv.Atoi(f)
		if err != nil || r < 1 {
			return usagef("-ar-rounds %q: want positive round counts", *rounds)
		}
		roundList = append(roundList, r)
	}
	var probs [][3]int
	for _, s := range strings.Split(*sizes, ",") {
		m, n, k, err := parseSize(s)
		if err != nil {
			return usageError{err}
		}
		probs = append(probs, [3]int{m, n, k})
	}
	var opList []string
	for _, o := range strings.Split(*ops, ",") {
		o = strings.TrimSpace(o)
		if o != "ag_gemm" && o != "gemm_rs" && o != "gemm_ar" {
			return usagef("-ops: unknown op %q (want ag_gemm, gemm_rs, gemm_ar)", o)
		}
		opList = append(opList, o)
	}
	return jit.RunRanks(jit.RanksOptions{NVSHMEM: true}, func(r *jit.Rank) error {
		if r.Rank == 0 && !*asJSON {
			fmt.Fprintf(sw, "device: %s (%s); %d rank(s); bf16, median of %d after 3 warm-ups\n", r.Device.Info().Name, r.Device.Info().Arch, r.World, *reps)
		}
		for _, p := range probs {
			// A communicator per problem: closing it frees the problem's buffers.
			fb, err := newFusedBench(r, sw, *reps, *asJSON, *sm90, roundList, *rsSignal)
			if err != nil {
				return err
			}
			fb.soak = *soak
			for _, op := range opList {
				if err = fb.run(op, p[0], p[1], p[2]); err != nil {
					err = fmt.Errorf("%s %dx%dx%d: %w", op, p[0], p[1], p[2], err)
					break
				}
			}
			if cerr := fb.close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// fusedResult is one measurement; scripts/bench/fused_join.py joins them with
// scripts/bench/torch_fused.py's over (op, gpus, m, n, k), the slowest rank's time counting.
type fusedResult struct {
	Impl   string  `json:"impl"` // kgen/fused, kgen/comm (default options), kgen/overlap(-rN, -signal), kgen/unfused, kgen/gemm
	Op     string  `json:"op"`
	GPUs   int     `json:"gpus"`
	Rank   int     `json:"rank"`
	M      int     `json:"m"`
	N      int     `json:"n"`
	K      int     `json:"k"`
	TimeUS float64 `json:"time_us"`
	// Err is the largest sampled |out - ref| / tolerance (at most 1 when it passed).
	Err    float64 `json:"err"`
	Kernel string  `json:"kernel,omitempty"`
}

// otherComm is a Comm of another matmul mode and the impl name its times get.
type otherComm struct {
	impl string
	c    *collectives.Comm
	only string // the one op it times ("": all)
}

// fusedBench holds one rank's communicator, stream and gemm kernel.
type fusedBench struct {
	r      *jit.Rank
	c      *collectives.Comm // MatmulFused: the fused kernels
	others []otherComm       // Comms of other matmul modes, timed on buffers of their own
	s      *jit.Stream
	cfg    kernels.GemmConfig
	gemms  map[bool]*jit.Function // by cfg.Aligned
	sm90   *jit.Function          // gemm_sm90 of hp (-sm90)
	hp     kernels.GemmSM90Config
	mods   []*jit.Module
	reps   int
	soak   int // calls back to back after timing, checked after the last (-soak)
	asJSON bool
	w      io.Writer
}

func newFusedBench(r *jit.Rank, w io.Writer, reps int, asJSON, sm90 bool, rounds []int, rsSignal bool) (*fusedBench, error) {
	s, err := r.Device.NewStream()
	if err != nil {
		return nil, err
	}
	target := ptx.Target(r.Device.Info().Arch)
	if !target.Valid() {
		target = ptx.SM90
	}
	if sm90 {
		target = ptx.SM90a
	}
	c, err := collectives.New(context.Background(), r, collectives.Options{Target: target, Stream: s, DisableMulticast: true, Matmuls: collectives.MatmulFused})
	if err != nil {
		return nil, err
	}
	fb := &fusedBench{r: r, c: c, s: s, cfg: kernels.DefaultFusedConfig(dsl.BF16), gemms: map[bool]*jit.Function{}, reps: reps, asJSON: asJSON, w: w}
	type other struct {
		impl    string
		mode    collectives.MatmulMode
		rounds  int
		signals bool   // Options.OverlapSignals (else DisableOverlapSignals where mode is MatmulOverlap)
		only    string // the one op it times ("": all)
	}
	others := []other{{impl: "kgen/comm", mode: collectives.MatmulAuto}, {impl: "kgen/overlap", mode: collectives.MatmulOverlap}}
	for _, n := range rounds {
		others = append(others, other{impl: fmt.Sprintf("kgen/overlap-r%d", n), mode: collectives.MatmulOverlap, rounds: n})
	}
	if rsSignal {
		others = append(others, other{impl: "kgen/overlap-signal", mode: collectives.MatmulOverlap, signals: true, only: "gemm_rs"})
	}
	for _, x := range others {
		// kgen/overlap times the piece launches; kgen/overlap-signal the signals; kgen/comm
		// the Comm's own choice between them.
		noSignals := x.mode == collectives.MatmulOverlap && !x.signals
		cm, err := collectives.New(context.Background(), r, collectives.Options{Target: target, Stream: s, DisableMulticast: true, Matmuls: x.mode, OverlapRounds: x.rounds, OverlapSignals: x.signals, DisableOverlapSignals: noSignals})
		if err != nil {
			return nil, errors.Join(err, fb.close())
		}
		fb.others = append(fb.others, otherComm{x.impl, cm, x.only})
	}
	if sm90 {
		fb.hp = kernels.DefaultGemmSM90Config(dsl.BF16)
		kb := dsl.New(fb.hp.Name(), dsl.WithTarget(ptx.SM90a))
		kernels.GemmSM90(kb, fb.hp)
		if err := fb.load(kb, &fb.sm90); err != nil {
			return nil, errors.Join(err, fb.close())
		}
	}
	return fb, nil
}

// load builds kb and loads its kernel into *fn.
func (fb *fusedBench) load(kb *dsl.Kernel, fn **jit.Function) error {
	mod, err := kb.Build()
	if err != nil {
		return err
	}
	jm, err := fb.r.Device.Load(jit.Source{Module: mod, Params: map[string][]jit.ParamInfo{kb.Name(): jit.ParamInfos(kb.Params())}})
	if err != nil {
		return err
	}
	fb.mods = append(fb.mods, jm)
	*fn, err = jm.Function(kb.Name())
	return err
}

func (fb *fusedBench) close() error {
	var errs []error
	for _, m := range fb.mods {
		errs = append(errs, m.Close())
	}
	for _, x := range fb.others {
		errs = append(errs, x.c.Close())
	}
	errs = append(errs, fb.c.Close(), fb.s.Close())
	return errors.Join(errs...)
}

// gemm returns the plain gemm kernel (the fused kernels' tile configuration) for aligned.
func (fb *fusedBench) gemm(aligned bool) (*jit.Function, error) {
	if fn := fb.gemms[aligned]; fn != nil {
		return fn, nil
	}
	cfg := fb.cfg
	cfg.Aligned = aligned
	target := ptx.Target(fb.r.Device.Info().Arch)
	if !target.Valid() {
		target = ptx.SM90
	}
	kb := dsl.New(cfg.Name(), dsl.WithTarget(target))
	kernels.Gemm(kb, cfg)
	mod, err := kb.Build()
	if err != nil {
		return nil, err
	}
	jm, err := fb.r.Device.Load(jit.Source{Module: mod})
	if err != nil {
		return nil, err
	}
	fb.mods = append(fb.mods, jm)
	fn, err := jm.Function(cfg.Name())
	if err != nil {
		return nil, err
	}
	fb.gemms[aligned] = fn
	return fn, nil
}

// fusedVal is element (i, j) of matrix mat of rank g: a multiple of 1/4 in [-1, 1], exact
// in bf16, so that every product and every f32 sum of the problems here is exact and only
// the output's rounding (and the unfused pairs' bf16 reductions) differ from the reference.
func fusedVal(g, mat, i, j int) float64 {
	h := uint64(g)*0x9E3779B97F4A7C15 ^ uint64(mat)*0xC2B2AE3D27D4EB4F ^ uint64(i)*0x165667B19E3779F9 ^ uint64(j)*0x27D4EB2F165667C5
	h ^= h >> 29
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 32
	return float64(int(h%9)-4) / 4
}

// fill returns rank g's rows x cols matrix mat as bf16 bits, row-major.
func fusedFill(g, mat, rows, cols int) []byte {
	v := make([]uint16, rows*cols)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			v[i*cols+j] = uint16(fp.BF16Of(float32(fusedVal(g, mat, i, j))))
		}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 2*len(v))
}

const (
	matA = iota
	matB
)

func (fb *fusedBench) alloc(n int) (*collectives.Buffer, error) { return fb.c.Alloc(dsl.BF16, n) }

func (fb *fusedBench) run(op string, m, n, k int) (err error) {
	ctx := context.Background()
	g, rank := fb.r.World, fb.r.Rank
	if m%g != 0 {
		return fmt.Errorf("m = %d is not divisible by the %d ranks", m, g)
	}
	rows := m / g
	aligned := n%8 == 0 && k%8 == 0
	gemmFn, err := fb.gemm(aligned)
	if err != nil {
		return err
	}
	cfg := fb.cfg
	lc := jit.LaunchConfig{Grid: jit.D1(cfg.Grid(m, n)), Block: jit.D1(cfg.Threads()), SharedMem: cfg.SharedBytes(), Stream: fb.s}
	ptr := func(b *collectives.Buffer) jit.AnyPtr { return jit.AnyPtr{Addr: b.DevPtr(), Elem: dsl.BF16} }
	gemm := func(a, b, d *collectives.Buffer) error {
		return gemmFn.Launch(lc, ptr(a), ptr(b), uint32(m), uint32(n), uint32(k), float32(1), float32(0), ptr(d), ptr(d))
	}
	if fb.sm90 != nil {
		// gemm_sm90, its tensor maps made once per input buffer.
		if err := fb.hp.CheckShape(m, n, k); err != nil {
			return err
		}
		maps := map[*collectives.Buffer]jit.TensorMap{}
		tmap := func(x *collectives.Buffer, cols, rows int, box [2]int) (jit.TensorMap, error) {
			if tm, ok := maps[x]; ok {
				return tm, nil
			}
			tm, err := x.TensorMap(cols, rows, box)
			maps[x] = tm
			return tm, err
		}
		lc90 := jit.LaunchConfig{Grid: jit.D1(fb.hp.Grid(m, n, max(fb.r.Device.Info().Multiproc, 1))), Block: jit.D1(fb.hp.Threads()), SharedMem: fb.hp.SharedBytes(), Stream: fb.s}
		gemm = func(a, b, d *collectives.Buffer) error {
			tmA, err := tmap(a, k, m, fb.hp.TMABoxA())
			if err != nil {
				return err
			}
			tmB, err := tmap(b, n, k, fb.hp.TMABoxB())
			if err != nil {
				return err
			}
			return fb.sm90.Launch(lc90, tmA, tmB, uint32(m), uint32(n), uint32(k), float32(1), float32(0), ptr(d), ptr(d))
		}
	}
	var made []*collectives.Buffer // freed when the run ends (every rank frees the same, in order)
	defer func() {
		for _, b := range made {
			if e := b.Free(); e != nil && err == nil {
				err = e
			}
		}
	}()
	mk := func(nelem int, init []byte) (*collectives.Buffer, error) {
		b, err := fb.alloc(nelem)
		if err != nil {
			return nil, err
		}
		made = append(made, b)
		if init != nil {
			return b, b.Write(init)
		}
		return b, nil
	}
	// Every rank's B is its own (a weight shard); A: ag_gemm's rows of the gathered A, or
	// gemm_rs's and gemm_ar's M x K (its K slice).
	aRows := m
	if op == "ag_gemm" {
		aRows = rows
	}
	a, err := mk(aRows*k, fusedFill(rank, matA, aRows, k))
	if err != nil {
		return err
	}
	b, err := mk(k*n, fusedFill(rank, matB, k, n))
	if err != nil {
		return err
	}
	full := a // ag_gemm's gathered A (unfused)
	if op == "ag_gemm" {
		if full, err = mk(m*k, nil); err != nil {
			return err
		}
	}
	tmp, err := mk(m*n, nil) // the plain gemm's D, the unfused gemm_rs's partial
	if err != nil {
		return err
	}
	outRows := m
	if op == "gemm_rs" {
		outRows = rows
	}
	out, err := mk(outRows*n, nil)
	if err != nil {
		return err
	}
	s := collectives.MatmulShape{M: m, N: n, K: k}
	var fused, unfused func() error
	switch op {
	case "ag_gemm":
		fused = func() error { return fb.c.AllGatherMatmul(ctx, a, b, out, s) }
		unfused = func() error {
			if err := fb.c.AllGather(ctx, full, a); err != nil {
				return err
			}
			return gemm(full, b, out)
		}
	case "gemm_rs":
		fused = func() error { return fb.c.MatmulReduceScatter(ctx, a, b, out, s) }
		unfused = func() error {
			if err := gemm(a, b, tmp); err != nil {
				return err
			}
			return fb.c.ReduceScatter(ctx, out, tmp, collectives.Sum)
		}
	default:
		fused = func() error { return fb.c.MatmulAllReduce(ctx, a, b, out, s) }
		unfused = func() error {
			if err := gemm(a, b, out); err != nil {
				return err
			}
			return fb.c.AllReduce(ctx, out, collectives.Sum)
		}
	}
	// ref returns out's element (i, j) in float64 and the sum of the partials' magnitudes.
	ref := func(i, j int) (float64, float64) {
		part := func(src, ai int) float64 {
			p := 0.0
			for l := 0; l < k; l++ {
				p += fusedVal(src, matA, ai, l) * fusedVal(src, matB, l, j)
			}
			return p
		}
		switch op {
		case "ag_gemm":
			p := 0.0
			src, ai := i/rows, i%rows
			for l := 0; l < k; l++ {
				p += fusedVal(src, matA, ai, l) * fusedVal(rank, matB, l, j)
			}
			return p, math.Abs(p)
		case "gemm_rs":
			i += rank * rows
		}
		sum, abs := 0.0, 0.0
		for src := 0; src < g; src++ {
			p := part(src, i)
			sum += p
			abs += math.Abs(p)
		}
		return sum, abs
	}
	check := func(impl string, out *collectives.Buffer) (float64, error) {
		if err := fb.s.Synchronize(); err != nil {
			return 0, err
		}
		raw := make([]byte, out.Bytes())
		if err := out.Read(raw); err != nil {
			return 0, err
		}
		got := unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), len(raw)/2)
		worst := 0.0
		for t := 0; t < 64; t++ {
			i, j := (t*7919+rank*131)%outRows, (t*104729+17)%n
			if t == 0 {
				i, j = outRows-1, n-1
			}
			want, abs := ref(i, j)
			// One bf16 rounding per reduction step (g of them in the unfused pairs).
			tol := float64(g+1)*0x1p-8*abs + 1e-6
			worst = math.Max(worst, math.Abs(float64(fp.BF16(got[i*n+j]).Float32())-want)/tol)
		}
		if worst > 1 {
			return worst, fmt.Errorf("%s: sampled output differs from the float64 reference (%.3g x tolerance)", impl, worst)
		}
		return worst, nil
	}
	report := func(impl string, f func() error, kernel string, out *collectives.Buffer) (time.Duration, error) {
		if err := f(); err != nil {
			return 0, err
		}
		e := 0.0
		if impl != "kgen/gemm" {
			var err error
			if e, err = check(impl, out); err != nil {
				return 0, err
			}
		}
		t, err := timeIt(fb.r.Device, fb.s, fb.reps, f)
		if err != nil {
			return 0, err
		}
		if impl != "kgen/gemm" {
			if _, err := check(impl+" (after timing)", out); err != nil {
				return 0, err
			}
			if fb.soak > 0 {
				t0 := time.Now()
				for i := 0; i < fb.soak; i++ {
					if err := f(); err != nil {
						return 0, fmt.Errorf("%s: back-to-back call %d of %d: %w", impl, i+1, fb.soak, err)
					}
				}
				se, err := check(fmt.Sprintf("%s (after %d back-to-back calls)", impl, fb.soak), out)
				if err != nil {
					return 0, err
				}
				fmt.Fprintf(os.Stderr, "soak %s %s %dx%dx%d rank %d: %d calls back to back in %.1f ms, output checked (%.3g x tolerance)\n",
					impl, op, m, n, k, rank, fb.soak, float64(time.Since(t0).Microseconds())/1e3, se)
			}
		}
		if kernel == "" && impl == "kgen/fused" {
			kernel = fb.c.LastAlgorithm()
		}
		for _, x := range fb.others {
			if kernel == "" && impl == x.impl {
				kernel = x.c.LastAlgorithm()
			}
		}
		res := fusedResult{Impl: impl, Op: op, GPUs: g, Rank: rank, M: m, N: n, K: k, TimeUS: float64(t.Nanoseconds()) / 1e3, Err: e, Kernel: kernel}
		if fb.asJSON {
			line, _ := json.Marshal(res)
			fmt.Fprintln(fb.w, string(line))
		}
		return t, nil
	}
	tf, err := report("kgen/fused", fused, "", out)
	if err != nil {
		return err
	}
	kernel := fb.c.LastAlgorithm()
	tu, err := report("kgen/unfused", unfused, "", out)
	if err != nil {
		return err
	}
	for _, x := range fb.others {
		if x.only != "" && x.only != op {
			continue
		}
		// The same op on a Comm of other options (kgen/comm: the defaults, what a caller
		// gets; kgen/overlap: MatmulOverlap), on buffers of that Comm.
		cm := x.c
		mk2 := func(like *collectives.Buffer, init []byte) (*collectives.Buffer, error) {
			b, err := cm.Alloc(dsl.BF16, like.Len())
			if err == nil && init != nil {
				err = b.Write(init)
			}
			return b, err
		}
		a2, err := mk2(a, fusedFill(rank, matA, aRows, k))
		if err != nil {
			return err
		}
		b2, err := mk2(b, fusedFill(rank, matB, k, n))
		if err != nil {
			return err
		}
		out2, err := mk2(out, nil)
		if err != nil {
			return err
		}
		var call func() error
		switch op {
		case "ag_gemm":
			call = func() error { return cm.AllGatherMatmul(ctx, a2, b2, out2, s) }
		case "gemm_rs":
			call = func() error { return cm.MatmulReduceScatter(ctx, a2, b2, out2, s) }
		default:
			call = func() error { return cm.MatmulAllReduce(ctx, a2, b2, out2, s) }
		}
		if _, err := report(x.impl, call, "", out2); err != nil {
			return err
		}
		for _, buf := range []*collectives.Buffer{a2, b2, out2} {
			if err := buf.Free(); err != nil {
				return err
			}
		}
	}
	// The plain gemm of the same problem (A: M x K; ag_gemm's gathered A).
	ga := a
	if op == "ag_gemm" {
		ga = full
	}
	gemmName := ""
	if fb.sm90 != nil {
		gemmName = fb.hp.Name()
	}
	tg, err := report("kgen/gemm", func() error { return gemm(ga, b, tmp) }, gemmName, nil)
	if err != nil {
		return err
	}
	if !fb.asJSON {
		us := func(t time.Duration) float64 { return float64(t.Nanoseconds()) / 1e3 }
		tflops := 2 * float64(m) * float64(n) * float64(k) / tf.Seconds() / 1e12
		fmt.Fprintf(fb.w, "rank %d/%d %-7s %5dx%5dx%5d: fused %9.1f us (%5.1f TFLOP/s, %s) | unfused %9.1f us | gemm %9.1f us | fused/gemm %.3f | fused/unfused %.3f\n",
			rank, g, op, m, n, k, us(tf), tflops, kernel, us(tu), us(tg), tf.Seconds()/tg.Seconds(), tf.Seconds()/tu.Seconds())
	}
	return nil
}
