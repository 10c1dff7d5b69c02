package kernels_test

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/ptx"
)

// sm90VarLenProblem is one packed attention problem for the VarLen AttentionSM90: the
// sequences' query and key lengths, or (cuQ, cuK set) raw offsets over totalQ and totalK
// rows.
type sm90VarLenProblem struct {
	cfg            kernels.AttentionSM90Config
	h, hk          int
	lensQ, lensK   []int
	cuQ, cuK       []int32
	totalQ, totalK int
	scale          float64
	sms            int // Persistent: the SMs LaunchVarLenPersistent is given
}

func (p sm90VarLenProblem) String() string {
	if p.cuQ != nil {
		return fmt.Sprintf("%s/h%d-%d/cuq%v/cuk%v", p.cfg.Name(), p.h, p.hk, p.cuQ, p.cuK)
	}
	return fmt.Sprintf("%s/h%d-%d/q%v/k%v", p.cfg.Name(), p.h, p.hk, p.lensQ, p.lensK)
}

// offsets returns p's cu_seqlens, the packed rows and the grid's max_seqlen_q.
func (p sm90VarLenProblem) offsets() (cuQ, cuK []int32, totalQ, totalK, maxQ int) {
	if p.cuQ != nil {
		for i := 0; i+1 < len(p.cuQ); i++ {
			maxQ = max(maxQ, int(p.cuQ[i+1]-p.cuQ[i]))
		}
		return p.cuQ, p.cuK, p.totalQ, p.totalK, max(maxQ, 1)
	}
	cuQ, cuK = []int32{0}, []int32{0}
	for i := range p.lensQ {
		cuQ = append(cuQ, cuQ[i]+int32(p.lensQ[i]))
		cuK = append(cuK, cuK[i]+int32(p.lensK[i]))
		maxQ = max(maxQ, p.lensQ[i])
	}
	return cuQ, cuK, int(cuQ[len(p.lensQ)]), int(cuK[len(p.lensK)]), max(maxQ, 1)
}

// runSM90VarLen runs p on d and checks every element of O and LSE against
// ref.AttentionVarLenRef; O starts at a sentinel that rows of no sequence keep. An
// AttentionDynamic p gets a zeroed tile counter of its own.
func runSM90VarLen(t *testing.T, d *jit.Device, p sm90VarLenProblem, seed int64) {
	t.Helper()
	r := prepSM90VarLen(t, d, p, seed)
	var sched *jit.Buffer[uint32]
	if p.cfg.Schedule == kernels.AttentionDynamic {
		sched = sm90Sched(t, d)
	}
	if err := r.launch(nil, sched); err != nil {
		t.Fatal(err)
	}
	r.check(t)
}

// prepSM90VarLen builds and loads p's kernel on d and allocates its random inputs, its
// offsets and its outputs.
func prepSM90VarLen(t *testing.T, d *jit.Device, p sm90VarLenProblem, seed int64) sm90Runner {
	t.Helper()
	if p.cfg.In == dsl.F16 {
		return prepSM90VarLenT[fp.F16](t, d, p, seed)
	}
	return prepSM90VarLenT[fp.BF16](t, d, p, seed)
}

// sm90VarLenRun is prepSM90VarLen's runner for element type T.
type sm90VarLenRun[T interface {
	fp.BF16 | fp.F16
	Float32() float32
}] struct {
	p        sm90VarLenProblem
	fn       *jit.Function
	lc       kernels.AttentionSM90Launch
	args     launch.AttentionSM90VarLen[T]
	gO       *jit.Buffer[T]
	gL       *jit.Buffer[float32]
	q, kk, v []float64
	scale    float64
}

func prepSM90VarLenT[T interface {
	fp.BF16 | fp.F16
	Float32() float32
}](t *testing.T, d *jit.Device, p sm90VarLenProblem, seed int64) *sm90VarLenRun[T] {
	t.Helper()
	cfg := p.cfg
	k := dsl.New(cfg.Name(), dsl.WithTarget(ptx.SM90a))
	kernels.AttentionSM90(k, cfg)
	mod, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	jm, err := d.Load(jit.Source{Module: mod, Params: map[string][]jit.ParamInfo{cfg.Name(): jit.ParamInfos(k.Params())}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jm.Close() })
	fn, err := jm.Function(cfg.Name())
	if err != nil {
		t.Fatal(err)
	}
	cuQ, cuK, TQ, TK, maxQ := p.offsets()
	B, H, HK, D := len(cuQ)-1, p.h, p.hk, cfg.HeadDim
	lc, err := cfg.LaunchVarLen(B, H, HK, maxQ, TQ, TK)
	if cfg.Persistent {
		lc, err = cfg.LaunchVarLenPersistent(B, H, HK, maxQ, TQ, TK, p.sms)
		if tiles := cfg.Grid(B, H, maxQ); err == nil && lc.Grid != min(tiles, p.sms) {
			t.Fatalf("LaunchVarLenPersistent on %d SMs: grid %d, want min(%d tiles, %d)", p.sms, lc.Grid, tiles, p.sms)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	scale := p.scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(D))
	}
	rng := rand.New(rand.NewSource(seed))
	rnd := func(n int) ([]float64, []T) {
		f, h := make([]float64, n), make([]T, n)
		for i := range f {
			h[i] = fp.Of[T](float32(2*rng.Float64() - 1))
			f[i] = float64(h[i].Float32())
		}
		return f, h
	}
	q, qh := rnd(TQ * H * D)
	kk, kh := rnd(TK * HK * D)
	v, vh := rnd(TK * HK * D)
	const sentinel = sm90VarLenSentinel
	oInit := make([]T, TQ*H*D)
	for i := range oInit {
		oInit[i] = fp.Of[T](sentinel)
	}
	buf := func(h []T) *jit.Buffer[T] {
		x, err := jit.Alloc[T](d, max(len(h), 1))
		if err == nil && len(h) > 0 {
			err = x.CopyFromHost(h)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { x.Free() })
		return x
	}
	ints := func(h []int32) *jit.Buffer[int32] {
		x, err := jit.Alloc[int32](d, len(h))
		if err == nil {
			err = x.CopyFromHost(h)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { x.Free() })
		return x
	}
	gq, gk, gv, gO := buf(qh), buf(kh), buf(vh), buf(oInit)
	gL, err := jit.Alloc[float32](d, max(H*TQ, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gL.Free() })
	tmap := func(x *jit.Buffer[T], s kernels.AttentionTMASpec) jit.TensorMap {
		m, err := jit.NewTensorMap(x, s.Dims[:], s.Strides[:], s.Box[:], jit.Swizzle(s.Swizzle))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	args := launch.AttentionSM90VarLen[T]{Q: gq, K: gk, V: gv, O: gO, LSE: gL, Batch: uint32(B), Heads: uint32(H), KVHeads: uint32(HK),
		SeqQ: uint32(maxQ), SeqK: 0, Scale: float32(scale), TmQ: tmap(gq, lc.Q), TmK: tmap(gk, lc.K), TmV: tmap(gv, lc.V),
		CuQ: ints(cuQ), CuK: ints(cuK), TotalQ: uint32(TQ), TotalK: uint32(TK)}
	return &sm90VarLenRun[T]{p: p, fn: fn, lc: lc, args: args, gO: gO, gL: gL, q: q, kk: kk, v: v, scale: scale}
}

func (r *sm90VarLenRun[T]) launch(s *jit.Stream, sched *jit.Buffer[uint32]) error {
	lc := jit.LaunchConfig{Grid: jit.D1(r.lc.Grid), Block: jit.D1(r.lc.Block), SharedMem: r.lc.SharedBytes, Stream: s}
	if r.p.cfg.Schedule != kernels.AttentionDynamic {
		return r.fn.LaunchArgs(lc, r.args)
	}
	a := r.args
	return r.fn.LaunchArgs(lc, launch.AttentionSM90VarLenDynamic[T]{Q: a.Q, K: a.K, V: a.V, O: a.O, LSE: a.LSE, Batch: a.Batch,
		Heads: a.Heads, KVHeads: a.KVHeads, SeqQ: a.SeqQ, SeqK: a.SeqK, Scale: a.Scale, TmQ: a.TmQ, TmK: a.TmK, TmV: a.TmV,
		CuQ: a.CuQ, CuK: a.CuK, TotalQ: a.TotalQ, TotalK: a.TotalK, Sched: sched})
}

// sm90VarLenSentinel is O's value before the launch, which rows of no sequence keep.
const sm90VarLenSentinel = 7

func (r *sm90VarLenRun[T]) reset() error {
	o := make([]T, r.gO.Len())
	for i := range o {
		o[i] = fp.Of[T](sm90VarLenSentinel)
	}
	if err := r.gO.CopyFromHost(o); err != nil {
		return err
	}
	return r.gL.CopyFromHost(make([]float32, r.gL.Len()))
}

func (r *sm90VarLenRun[T]) check(t *testing.T) {
	t.Helper()
	r.compare(t, true)
}

// compare compares every element of O and LSE with ref.AttentionVarLenRef.
func (r *sm90VarLenRun[T]) compare(t *testing.T, report bool) int {
	t.Helper()
	p, cfg := r.p, r.p.cfg
	cuQ, cuK, TQ, _, _ := p.offsets()
	B, H, HK, D := len(cuQ)-1, p.h, p.hk, cfg.HeadDim
	q, kk, v, scale, gO, gL := r.q, r.kk, r.v, r.scale, r.gO, r.gL
	const sentinel = sm90VarLenSentinel
	oh := make([]T, TQ*H*D)
	gotL := make([]float32, H*TQ)
	if TQ > 0 {
		if err := gO.CopyToHost(oh); err != nil {
			t.Fatal(err)
		}
		if err := gL.CopyToHost(gotL); err != nil {
			t.Fatal(err)
		}
	}
	want := ref.AttentionVarLenRef(q, kk, v, cuQ, cuK, H, HK, D, scale, cfg.Causal)
	covered := make([]bool, TQ) // rows of some sequence (the rest keep the sentinel)
	for b := 0; b < B; b++ {
		s := min(max(int(cuQ[b]), 0), TQ)
		for i := s; i < min(max(int(cuQ[b+1]), s), TQ); i++ {
			covered[i] = true
		}
	}
	bad := 0
	fail := func(format string, a ...any) {
		if report && bad < 5 {
			t.Errorf(format, a...)
		}
		bad++
	}
	for i, w := range want.O {
		g := float64(oh[i].Float32())
		if !covered[i/(H*D)] {
			if g != sentinel {
				fail("O[row %d, h %d, d %d] = %v: the row is in no sequence, its sentinel %v was overwritten", i/(H*D), i/D%H, i%D, g, float64(sentinel))
			}
			continue
		}
		if tol := ref.AttentionTolerance(cfg.In, want.Abs[i/D], w); !(math.Abs(g-w) <= tol) {
			fail("O[row %d, h %d, d %d] = %v, want %v (tolerance %.3g)", i/(H*D), i/D%H, i%D, g, w, tol)
		}
	}
	for i, w := range want.LSE {
		if !covered[i%TQ] {
			continue
		}
		g := float64(gotL[i])
		if math.IsInf(w, -1) {
			if !math.IsInf(g, -1) {
				fail("LSE[h %d, row %d] = %v, want -Inf (a row that sees no key)", i/TQ, i%TQ, g)
			}
			continue
		}
		if tol := 1e-5 * (1 + math.Abs(w)); !(math.Abs(g-w) <= tol) {
			fail("LSE[h %d, row %d] = %v, want %v", i/TQ, i%TQ, g, w)
		}
	}
	if report && bad > 0 {
		t.Errorf("%s: %d of %d values differ", p, bad, len(want.O)+len(want.LSE))
	}
	return bad
}

// sm90VarLenCfg is sm90Cfg with VarLen.
func sm90VarLenCfg(dt dsl.Type, d int, causal, overlap, pingPong bool) kernels.AttentionSM90Config {
	c := sm90Cfg(dt, d, causal, overlap, pingPong)
	c.VarLen = true
	return c
}

// TestAttentionSM90VarLen checks the VarLen sm_90a attention on the emulator against
// float64, sequence by sequence: lengths {1, 70, 0, 130} of queries over {90, 1, 5, 200}
// keys (an empty query sequence, a one-key one, tiles that read the next sequence's rows,
// causal rows that see no key), causal and not, GQA 4, head dims 64 and 128, each overlap,
// one consumer warpgroup and three, an empty key sequence, and non-monotone offsets (clamped: the
// rows of no sequence keep their values).
func TestAttentionSM90VarLen(t *testing.T) {
	bf, f16 := dsl.BF16, dsl.F16
	lq, lk := []int{1, 70, 0, 130}, []int{90, 1, 5, 200}
	one := sm90VarLenCfg(f16, 64, true, true, false)
	one.Consumers, one.BN = 1, 64
	three := sm90VarLenCfg(bf, 64, true, true, false)
	three.Consumers, three.Stages = 3, 3
	cases := []sm90VarLenProblem{
		{cfg: sm90VarLenCfg(bf, 64, false, false, true), h: 4, hk: 1, lensQ: lq, lensK: lk},
		{cfg: sm90VarLenCfg(bf, 64, true, false, true), h: 4, hk: 1, lensQ: lq, lensK: lk},
		{cfg: sm90VarLenCfg(bf, 128, false, true, true), h: 4, hk: 1, lensQ: lq, lensK: lk, scale: 0.3},
		{cfg: sm90VarLenCfg(f16, 128, true, false, false), h: 4, hk: 1, lensQ: lq, lensK: lk},
		{cfg: one, h: 2, hk: 2, lensQ: []int{130, 33, 64}, lensK: []int{20, 0, 64}},
		{cfg: three, h: 2, hk: 1, lensQ: []int{200, 1, 0, 70}, lensK: []int{250, 90, 5, 1}}, // 192-row tiles
		// Offsets out of order, negative and past the tensors: clamped, no fault. Queries
		// [0,10) over keys [0,40), [10,30) over none (O 0, LSE -Inf), none over [20,60); rows
		// 30..39 are in no sequence.
		{cfg: sm90VarLenCfg(bf, 64, true, false, true), h: 1, hk: 1, cuQ: []int32{-5, 10, 30, 20}, cuK: []int32{-5, 40, 20, 90},
			totalQ: 40, totalK: 60},
		// The last sequence's offsets past the tensors: queries [25,40) over keys [30,50).
		{cfg: sm90VarLenCfg(bf, 64, false, false, true), h: 2, hk: 1, cuQ: []int32{0, 25, 99}, cuK: []int32{0, 30, 99},
			totalQ: 40, totalK: 50},
	}
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) { runSM90VarLen(t, d, c, 9) })
	}
}

// TestAttentionSM90VarLenPersistent is TestAttentionSM90VarLen's packed problems with
// Persistent on grids of 2-5 blocks: blocks walk tiles of several sequences and heads, and
// skip (both roles alike) the tiles that start past their sequence.
func TestAttentionSM90VarLenPersistent(t *testing.T) {
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range sm90VarLenPersistentCases() {
		t.Run(fmt.Sprintf("%s/sms%d", c, c.sms), func(t *testing.T) { runSM90VarLen(t, d, c, 9) })
	}
}

// sm90VarLenPersistentCases are TestAttentionSM90VarLenPersistent's problems
// (AttentionStrided).
func sm90VarLenPersistentCases() []sm90VarLenProblem {
	bf, f16 := dsl.BF16, dsl.F16
	lq, lk := []int{1, 70, 0, 130}, []int{90, 1, 5, 200}
	p := func(c kernels.AttentionSM90Config) kernels.AttentionSM90Config { c.Persistent = true; return c }
	one := p(sm90VarLenCfg(f16, 64, true, true, false))
	one.Consumers, one.BN = 1, 64
	return []sm90VarLenProblem{
		{cfg: p(sm90VarLenCfg(bf, 64, false, false, true)), h: 4, hk: 1, lensQ: lq, lensK: lk, sms: 3},
		{cfg: p(sm90VarLenCfg(bf, 64, true, true, false)), h: 4, hk: 1, lensQ: lq, lensK: lk, sms: 5},
		{cfg: p(sm90VarLenCfg(bf, 128, false, true, true)), h: 4, hk: 1, lensQ: lq, lensK: lk, scale: 0.3, sms: 3},
		{cfg: p(sm90VarLenCfg(f16, 128, true, false, false)), h: 4, hk: 1, lensQ: lq, lensK: lk, sms: 2},
		{cfg: p(sm90VarLenCfg(bf, 256, true, true, false)), h: 2, hk: 1, lensQ: lq, lensK: lk, sms: 3},
		{cfg: one, h: 2, hk: 2, lensQ: []int{130, 33, 64}, lensK: []int{20, 0, 64}, sms: 4},
		{cfg: p(sm90VarLenCfg(bf, 64, true, false, true)), h: 1, hk: 1, cuQ: []int32{-5, 10, 30, 20}, cuK: []int32{-5, 40, 20, 90},
			totalQ: 40, totalK: 60, sms: 2},
	}
}

// TestAttentionSM90VarLenRefuses: a VarLen configuration has no dense launch, a dense one no
// packed launch, and bad packed shapes are errors naming the rule.
func TestAttentionSM90VarLenRefuses(t *testing.T) {
	vl := sm90VarLenCfg(dsl.BF16, 128, false, false, true)
	if _, err := vl.Launch(1, 1, 1, 1, 1); err == nil || !strings.Contains(err.Error(), "LaunchVarLen") {
		t.Errorf("VarLen Launch = %v, want an error naming LaunchVarLen", err)
	}
	dense := kernels.DefaultAttentionSM90Config(dsl.BF16, 128, false)
	dense.Persistent = false
	if _, err := dense.LaunchVarLen(1, 1, 1, 1, 1, 1); err == nil || !strings.Contains(err.Error(), "not a VarLen") {
		t.Errorf("dense LaunchVarLen = %v, want an error naming VarLen", err)
	}
	pvl := vl
	pvl.Persistent = true
	if _, err := pvl.LaunchVarLen(1, 1, 1, 1, 1, 1); err == nil || !strings.Contains(err.Error(), "LaunchVarLenPersistent") {
		t.Errorf("Persistent LaunchVarLen = %v, want an error naming LaunchVarLenPersistent", err)
	}
	if _, err := pvl.LaunchVarLenPersistent(1, 1, 1, 1, 1, 1, 0); err == nil || !strings.Contains(err.Error(), "0 SMs") {
		t.Errorf("LaunchVarLenPersistent on 0 SMs = %v, want an error naming the SM count", err)
	}
	for _, s := range []struct {
		b, h, hk, maxQ, tq, tk int
		want                   string
	}{
		{0, 1, 1, 1, 1, 1, "must be positive"},
		{1, 6, 4, 1, 1, 1, "not a multiple of 4 kv heads"},
		{1, 1, 1, 1, -1, 1, "must not be negative"},
		{1, 1, 1, 1, 1 << 24, 1, "reaches 2^31"},
	} {
		if _, err := vl.LaunchVarLen(s.b, s.h, s.hk, s.maxQ, s.tq, s.tk); err == nil || !strings.Contains(err.Error(), s.want) {
			t.Errorf("LaunchVarLen(%v) = %v, want an error naming %q", s, err, s.want)
		}
	}
}
