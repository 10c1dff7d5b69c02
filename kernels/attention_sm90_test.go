package kernels_test

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/ptx"
)

// sm90Problem is one attention problem for AttentionSM90 on the emulator.
type sm90Problem struct {
	cfg              kernels.AttentionSM90Config
	b, h, hk, sq, sk int
	scale            float64 // 0: 1/sqrt(d)
	sms              int     // Persistent: the SMs LaunchPersistent is given
}

func (p sm90Problem) String() string {
	s := fmt.Sprintf("%s/b%dh%d-%dsq%dsk%d", p.cfg.Name(), p.b, p.h, p.hk, p.sq, p.sk)
	if p.cfg.Persistent {
		s += fmt.Sprintf("/sms%d", p.sms)
	}
	return s
}

// sm90Launch is cfg.Launch, or LaunchPersistent on sms SMs for a Persistent cfg (checked to
// give min(tiles, sms) blocks).
func sm90Launch(t *testing.T, cfg kernels.AttentionSM90Config, b, h, hk, sq, sk, sms int) kernels.AttentionSM90Launch {
	t.Helper()
	if !cfg.Persistent {
		lc, err := cfg.Launch(b, h, hk, sq, sk)
		if err != nil {
			t.Fatal(err)
		}
		return lc
	}
	lc, err := cfg.LaunchPersistent(b, h, hk, sq, sk, sms)
	if err != nil {
		t.Fatal(err)
	}
	if tiles := cfg.Grid(b, h, sq); lc.Grid != min(tiles, sms) {
		t.Fatalf("LaunchPersistent on %d SMs: grid %d, want min(%d tiles, %d)", sms, lc.Grid, tiles, sms)
	}
	return lc
}

// runSM90 runs p on d (the emulator or a GPU) and checks O and LSE against the float64
// reference; an AttentionDynamic p gets a zeroed tile counter of its own.
func runSM90(t *testing.T, d *jit.Device, p sm90Problem, seed int64) {
	t.Helper()
	r := prepSM90(t, d, p, seed)
	var sched *jit.Buffer[uint32]
	if p.cfg.Schedule == kernels.AttentionDynamic {
		sched = sm90Sched(t, d)
	}
	if err := r.launch(nil, sched); err != nil {
		t.Fatal(err)
	}
	r.check(t)
}

// sm90Sched returns a zeroed AttentionSchedArgs buffer on d, freed with the test.
func sm90Sched(t *testing.T, d *jit.Device) *jit.Buffer[uint32] {
	t.Helper()
	x, err := jit.Alloc[uint32](d, kernels.AttentionSchedWords)
	if err == nil {
		err = x.CopyFromHost(make([]uint32, kernels.AttentionSchedWords))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Free() })
	return x
}

// sm90Runner is one attention problem's kernel, inputs and outputs on a device: launch
// enqueues the kernel on s (nil: the default stream) with sched as its AttentionSchedArgs
// (AttentionDynamic only); compare copies O and LSE back and counts the values that differ
// from the float64 reference (reporting the first few when report is set); check is
// compare, reporting; reset sets the outputs back to their values before the first launch.
type sm90Runner interface {
	launch(s *jit.Stream, sched *jit.Buffer[uint32]) error
	compare(t *testing.T, report bool) int
	check(t *testing.T)
	reset() error
}

// prepSM90 builds and loads p's kernel on d and allocates its random inputs and outputs.
func prepSM90(t *testing.T, d *jit.Device, p sm90Problem, seed int64) sm90Runner {
	t.Helper()
	if p.cfg.In == dsl.F16 {
		return prepSM90T[fp.F16](t, d, p, seed)
	}
	return prepSM90T[fp.BF16](t, d, p, seed)
}

// refKey identifies a reference result: the inputs are a function of the dtype, the shape
// and the seed.
type refKey struct {
	in                  dsl.Type
	b, h, hk, sq, sk, d int
	scale               float64
	causal              bool
	seed                int64
}

var sm90Refs struct {
	sync.Mutex
	m map[refKey]ref.AttentionOut
}

// sm90Ref returns the reference of key, computed once (the GPU test runs each real shape
// under several configurations; its float64 reference takes seconds).
func sm90Ref(key refKey, compute func() ref.AttentionOut) ref.AttentionOut {
	sm90Refs.Lock()
	defer sm90Refs.Unlock()
	if r, ok := sm90Refs.m[key]; ok {
		return r
	}
	if sm90Refs.m == nil {
		sm90Refs.m = map[refKey]ref.AttentionOut{}
	}
	r := compute()
	sm90Refs.m[key] = r
	return r
}

// sm90Run is prepSM90's runner for element type T.
type sm90Run[T interface {
	fp.BF16 | fp.F16
	Float32() float32
}] struct {
	p        sm90Problem
	fn       *jit.Function
	lc       kernels.AttentionSM90Launch
	args     launch.AttentionSM90[T]
	gO       *jit.Buffer[T]
	gL       *jit.Buffer[float32]
	q, kk, v []float64
	scale    float64
	seed     int64
}

// prepSM90T builds and loads p's kernel on d, makes random inputs in [-1, 1] and the tensor
// maps of cfg.Launch (LaunchPersistent) over the same buffers as AttentionArgs.
func prepSM90T[T interface {
	fp.BF16 | fp.F16
	Float32() float32
}](t *testing.T, d *jit.Device, p sm90Problem, seed int64) *sm90Run[T] {
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
	lc := sm90Launch(t, cfg, p.b, p.h, p.hk, p.sq, p.sk, p.sms)
	want := 0
	if cfg.Schedule == kernels.AttentionDynamic {
		want = kernels.AttentionSchedWords
	}
	if lc.SchedWords != want {
		t.Fatalf("%s: launch SchedWords %d, want %d", cfg.Name(), lc.SchedWords, want)
	}
	B, H, HK, SQ, SK, D := p.b, p.h, p.hk, p.sq, p.sk, cfg.HeadDim
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
	q, qh := rnd(B * SQ * H * D)
	kk, kh := rnd(B * SK * HK * D)
	v, vh := rnd(B * SK * HK * D)
	buf := func(h []T) *jit.Buffer[T] {
		x, err := jit.Alloc[T](d, len(h))
		if err == nil {
			err = x.CopyFromHost(h)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { x.Free() })
		return x
	}
	gq, gk, gv, gO := buf(qh), buf(kh), buf(vh), buf(make([]T, B*SQ*H*D))
	gL, err := jit.Alloc[float32](d, B*H*SQ)
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
	args := launch.AttentionSM90[T]{Q: gq, K: gk, V: gv, O: gO, LSE: gL, Batch: uint32(B), Heads: uint32(H), KVHeads: uint32(HK),
		SeqQ: uint32(SQ), SeqK: uint32(SK), Scale: float32(scale), TmQ: tmap(gq, lc.Q), TmK: tmap(gk, lc.K), TmV: tmap(gv, lc.V)}
	return &sm90Run[T]{p: p, fn: fn, lc: lc, args: args, gO: gO, gL: gL, q: q, kk: kk, v: v, scale: scale, seed: seed}
}

func (r *sm90Run[T]) launch(s *jit.Stream, sched *jit.Buffer[uint32]) error {
	lc := jit.LaunchConfig{Grid: jit.D1(r.lc.Grid), Block: jit.D1(r.lc.Block), SharedMem: r.lc.SharedBytes, Stream: s}
	if r.p.cfg.Schedule != kernels.AttentionDynamic {
		return r.fn.LaunchArgs(lc, r.args)
	}
	a := r.args
	return r.fn.LaunchArgs(lc, launch.AttentionSM90Dynamic[T]{Q: a.Q, K: a.K, V: a.V, O: a.O, LSE: a.LSE, Batch: a.Batch, Heads: a.Heads,
		KVHeads: a.KVHeads, SeqQ: a.SeqQ, SeqK: a.SeqK, Scale: a.Scale, TmQ: a.TmQ, TmK: a.TmK, TmV: a.TmV, Sched: sched})
}

func (r *sm90Run[T]) reset() error {
	if err := r.gO.CopyFromHost(make([]T, r.gO.Len())); err != nil {
		return err
	}
	return r.gL.CopyFromHost(make([]float32, r.gL.Len()))
}

func (r *sm90Run[T]) check(t *testing.T) {
	t.Helper()
	r.compare(t, true)
}

// compare compares O and LSE element by element with ref.AttentionRef within
// ref.AttentionTolerance (LSE within 1e-5 relative; -Inf where a row sees no key).
func (r *sm90Run[T]) compare(t *testing.T, report bool) int {
	t.Helper()
	p, cfg := r.p, r.p.cfg
	B, H, HK, SQ, SK, D := p.b, p.h, p.hk, p.sq, p.sk, cfg.HeadDim
	oh := make([]T, B*SQ*H*D)
	gotL := make([]float32, B*H*SQ)
	if err := r.gO.CopyToHost(oh); err != nil {
		t.Fatal(err)
	}
	if err := r.gL.CopyToHost(gotL); err != nil {
		t.Fatal(err)
	}
	want := sm90Ref(refKey{cfg.In, B, H, HK, SQ, SK, D, r.scale, cfg.Causal, r.seed}, func() ref.AttentionOut {
		return ref.AttentionRef(r.q, r.kk, r.v, B, H, HK, SQ, SK, D, r.scale, cfg.Causal)
	})
	bad := 0
	fail := func(format string, a ...any) {
		if report && bad < 5 {
			t.Errorf(format, a...)
		}
		bad++
	}
	for i, w := range want.O {
		g := float64(oh[i].Float32())
		if tol := ref.AttentionTolerance(cfg.In, want.Abs[i/D], w); !(math.Abs(g-w) <= tol) {
			fail("O[b %d, s %d, h %d, d %d] = %v, want %v (tolerance %.3g)", i/(SQ*H*D), i/(H*D)%SQ, i/D%H, i%D, g, w, tol)
		}
	}
	for i, w := range want.LSE {
		g := float64(gotL[i])
		if math.IsInf(w, -1) {
			if !math.IsInf(g, -1) {
				fail("LSE[%d] = %v, want -Inf (a row that sees no key)", i, g)
			}
			continue
		}
		if tol := 1e-5 * (1 + math.Abs(w)); !(math.Abs(g-w) <= tol) {
			fail("LSE[b %d, h %d, s %d] = %v, want %v", i/(H*SQ), i/SQ%H, i%SQ, g, w)
		}
	}
	if report && bad > 0 {
		t.Errorf("%s: %d of %d values differ", p, bad, len(want.O)+len(want.LSE))
	}
	return bad
}

// sm90Cfg is the library's configuration for dt, d and causal with the FlashAttention-3
// overlaps set as given, not persistent (TestAttentionSM90Persistent has those).
func sm90Cfg(dt dsl.Type, d int, causal, overlap, pingPong bool) kernels.AttentionSM90Config {
	c := kernels.DefaultAttentionSM90Config(dt, d, causal)
	c.Overlap, c.PingPong, c.Persistent = overlap, pingPong, false
	if pingPong && d > 128 { // the ping-pong's register bound: 64 keys a step at d 256
		c.BN = 64
	}
	return c
}

// sm90Three is c with three consumer warpgroups (no ping-pong) and stages K/V stages.
func sm90Three(c kernels.AttentionSM90Config, stages int) kernels.AttentionSM90Config {
	c.Consumers, c.PingPong, c.Stages = 3, false, stages
	return c
}

// TestAttentionSM90 checks the sm_90a attention on the emulator against float64 at odd
// shapes: one token, sequence lengths off the tiles (70, 90, 130, 200), GQA 1, 4 and 8, causal
// with seqQ < seqK and seqQ > seqK (rows that see no key), f16 and bf16, head dims 64 and
// 128 (and 256), one consumer warpgroup and two, each FlashAttention-3 overlap alone and
// both, 3 stages, and blocks that see no key.
func TestAttentionSM90(t *testing.T) {
	bf, f16 := dsl.BF16, dsl.F16
	var cases []sm90Problem
	for _, o := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		cases = append(cases,
			sm90Problem{cfg: sm90Cfg(bf, 64, false, o[0], o[1]), b: 1, h: 1, hk: 1, sq: 130, sk: 200, scale: 0.5},
			sm90Problem{cfg: sm90Cfg(bf, 64, true, o[0], o[1]), b: 1, h: 4, hk: 1, sq: 70, sk: 200},
		)
	}
	one := sm90Cfg(f16, 64, false, true, false)
	one.Consumers, one.BN = 1, 64
	three := sm90Cfg(bf, 64, true, true, true) // a 3-stage ring, 32 keys per step: many tiles
	three.Stages, three.BN = 3, 32
	// The widest key tiles the register bound admits (80 keys at d 256: not a power of two).
	wide256, wide128 := sm90Cfg(bf, 256, true, true, false), sm90Cfg(bf, 128, false, true, false)
	wide256.BN, wide128.BN = 80, 192
	cases = append(cases,
		sm90Problem{cfg: wide256, b: 1, h: 2, hk: 1, sq: 130, sk: 200, scale: 0.2},
		sm90Problem{cfg: wide128, b: 1, h: 1, hk: 1, sq: 70, sk: 200},
		sm90Problem{cfg: sm90Cfg(bf, 64, false, false, false), b: 2, h: 1, hk: 1, sq: 1, sk: 90},
		sm90Problem{cfg: sm90Cfg(f16, 64, true, true, true), b: 1, h: 1, hk: 1, sq: 130, sk: 90, scale: 0.5},
		sm90Problem{cfg: sm90Cfg(bf, 128, false, true, true), b: 1, h: 2, hk: 2, sq: 70, sk: 130},
		sm90Problem{cfg: sm90Cfg(f16, 128, true, true, true), b: 1, h: 4, hk: 1, sq: 90, sk: 200},
		sm90Problem{cfg: one, b: 1, h: 2, hk: 1, sq: 70, sk: 90},
		sm90Problem{cfg: sm90Cfg(bf, 256, false, true, true), b: 1, h: 1, hk: 1, sq: 70, sk: 130, scale: 0.2},
		sm90Problem{cfg: sm90Cfg(bf, 256, true, false, false), b: 1, h: 2, hk: 1, sq: 130, sk: 70},
		sm90Problem{cfg: three, b: 2, h: 1, hk: 1, sq: 65, sk: 200, scale: 0.5},
		sm90Problem{cfg: sm90Cfg(f16, 64, false, true, true), b: 1, h: 8, hk: 1, sq: 33, sk: 70}, // GQA 8
		// Three consumer warpgroups (192 query rows), causal and not, 3 stages too.
		sm90Problem{cfg: sm90Three(sm90Cfg(bf, 64, true, true, false), 3), b: 1, h: 4, hk: 1, sq: 200, sk: 250},
		sm90Problem{cfg: sm90Three(sm90Cfg(f16, 64, false, false, false), 2), b: 2, h: 1, hk: 1, sq: 70, sk: 130, scale: 0.5},
		// Causal, seqQ far above seqK: the first block sees no key at all (no tiles; O 0,
		// LSE -Inf), with and without the overlaps.
		sm90Problem{cfg: sm90Cfg(bf, 64, true, true, true), b: 1, h: 1, hk: 1, sq: 200, sk: 20},
		sm90Problem{cfg: sm90Cfg(bf, 64, true, false, false), b: 1, h: 1, hk: 1, sq: 200, sk: 20},
	)
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) { runSM90(t, d, c, 5) })
	}
}

// TestAttentionSM90Refuses: configurations the kernel cannot build and shapes it cannot run
// are errors naming the rule (Check and CheckShape, and Build for a bad target).
func TestAttentionSM90Refuses(t *testing.T) {
	base := kernels.DefaultAttentionSM90Config(dsl.BF16, 128, false)
	base.Persistent = false
	mod := func(f func(*kernels.AttentionSM90Config)) kernels.AttentionSM90Config {
		c := base
		f(&c)
		return c
	}
	for _, c := range []struct {
		cfg  kernels.AttentionSM90Config
		want string
	}{
		{mod(func(c *kernels.AttentionSM90Config) { c.In = dsl.F32 }), "input type f32"},
		{mod(func(c *kernels.AttentionSM90Config) { c.HeadDim = 96 }), "head dim 96"},
		{mod(func(c *kernels.AttentionSM90Config) { c.Consumers = 4; c.PingPong = false }), "4 consumer warpgroups"},
		{mod(func(c *kernels.AttentionSM90Config) { c.Consumers = 3; c.PingPong = false }), "accumulator and P registers"},
		{mod(func(c *kernels.AttentionSM90Config) { c.BN = 72 }), "BN 72"},
		{mod(func(c *kernels.AttentionSM90Config) { c.Stages = 1 }), "1 stages"},
		{mod(func(c *kernels.AttentionSM90Config) { c.Consumers, c.BN, c.PingPong = 1, 64, true }), "PingPong alternates two"},
		{mod(func(c *kernels.AttentionSM90Config) { c.HeadDim = 256 }), "accumulator and P registers"},
		{mod(func(c *kernels.AttentionSM90Config) { c.Stages = 4 }), "shared memory"},
		{mod(func(c *kernels.AttentionSM90Config) { c.HeadDim, c.BN, c.PingPong, c.Persistent = 256, 64, true, true }), "Persistent with Overlap and PingPong"},
		{mod(func(c *kernels.AttentionSM90Config) { c.Schedule = kernels.AttentionDynamic }), "AttentionDynamic hands tiles to Persistent blocks"},
		{mod(func(c *kernels.AttentionSM90Config) { c.Schedule, c.Persistent = 3, true }), "schedule AttentionSchedule(3)"},
		{mod(func(c *kernels.AttentionSM90Config) { c.Schedule = -1 }), "schedule AttentionSchedule(-1)"},
	} {
		if err := c.cfg.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: Check = %v, want an error naming %q", c.cfg, err, c.want)
		}
		k := dsl.New("a", dsl.WithTarget(ptx.SM90a))
		kernels.AttentionSM90(k, c.cfg)
		if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: Build = %v, want an error naming %q", c.cfg, err, c.want)
		}
	}
	pers := base
	pers.Persistent = true
	if _, err := pers.Launch(1, 1, 1, 1, 1); err == nil || !strings.Contains(err.Error(), "LaunchPersistent") {
		t.Errorf("Persistent Launch = %v, want an error naming LaunchPersistent", err)
	}
	if _, err := pers.LaunchPersistent(1, 1, 1, 1, 1, 0); err == nil || !strings.Contains(err.Error(), "0 SMs") {
		t.Errorf("LaunchPersistent on 0 SMs = %v, want an error naming the SM count", err)
	}
	if _, err := pers.LaunchPersistent(1, 6, 4, 1, 1, 132); err == nil || !strings.Contains(err.Error(), "not a multiple of 4 kv heads") {
		t.Errorf("LaunchPersistent(heads 6, kv 4) = %v, want CheckShape's error", err)
	}
	if l, err := base.LaunchPersistent(2, 16, 16, 2048, 2048, 132); err != nil || l.Grid != 512 {
		t.Errorf("LaunchPersistent without Persistent = grid %d, %v; want Launch's 512 blocks", l.Grid, err)
	}
	if l, err := pers.LaunchPersistent(2, 16, 16, 2048, 2048, 132); err != nil || l.Grid != 132 || l.SharedBytes != base.SharedBytes()+32*1024 {
		t.Errorf("LaunchPersistent = grid %d, %d B shared, %v; want 132 blocks and a second Q tile (%d B)", l.Grid, l.SharedBytes, err, base.SharedBytes()+32*1024)
	}
	// Every head dim's Persistent default fits an H100's 227 KiB; at d 256 with one Q tile.
	for _, d := range []int{64, 128, 256} {
		c := kernels.DefaultAttentionSM90Config(dsl.BF16, d, false)
		c.Persistent = false
		p := c
		p.Persistent = true
		q := 128 * d * 2
		if d == 256 {
			q = 0
		}
		if err := p.Check(); err != nil || p.SharedBytes() != c.SharedBytes()+q {
			t.Errorf("d %d Persistent: %d B shared (%v), want %d + %d", d, p.SharedBytes(), err, c.SharedBytes(), q)
		}
	}
	k := dsl.New("a", dsl.WithTarget(ptx.SM90))
	kernels.AttentionSM90(k, base)
	if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), "sm_90a") {
		t.Errorf("on sm_90: Build = %v, want an error naming sm_90a", err)
	}
	for _, s := range []struct {
		b, h, hk, sq, sk int
		want             string
	}{
		{0, 1, 1, 1, 1, "must be positive"},
		{1, 6, 4, 1, 1, "not a multiple of 4 kv heads"},
	} {
		if _, err := base.Launch(s.b, s.h, s.hk, s.sq, s.sk); err == nil || !strings.Contains(err.Error(), s.want) {
			t.Errorf("Launch(%d, %d, %d, %d, %d) = %v, want an error naming %q", s.b, s.h, s.hk, s.sq, s.sk, err, s.want)
		}
	}
}

// sm90Variants is every configuration the library and the benchmark use: both dtypes, head
// dims 64, 128 and 256, causal or not, each FlashAttention-3 overlap on or off, one
// consumer warpgroup, and the VarLen ones ops.AttentionVarLen picks; each also Persistent,
// and that with AttentionLPT and AttentionDynamic (the causal bf16 ones also with
// AttentionLPT's grid order).
func sm90Variants() []kernels.AttentionSM90Config {
	var cfgs []kernels.AttentionSM90Config
	for _, dt := range []dsl.Type{dsl.BF16, dsl.F16} {
		for _, d := range []int{64, 128, 256} {
			for _, causal := range []bool{false, true} {
				for _, o := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
					if dt == dsl.F16 && (o != [2]bool{true, true}) {
						continue // f16 differs from bf16 in the conversions only
					}
					cfgs = append(cfgs, sm90Cfg(dt, d, causal, o[0], o[1]))
				}
				if dt == dsl.BF16 { // ops' choice for seqQ <= 64
					one := sm90Cfg(dt, d, causal, true, false)
					one.Consumers = 1
					if d > 128 { // one consumer's register bound
						one.BN = 64
					}
					cfgs = append(cfgs, one)
				}
			}
		}
	}
	for _, d := range []int{64, 128, 256} {
		for _, causal := range []bool{false, true} {
			vl := kernels.DefaultAttentionSM90Config(dsl.BF16, d, causal)
			vl.VarLen, vl.Persistent = true, false
			one := vl
			one.Consumers, one.PingPong = 1, false
			if d > 128 { // one consumer's register bound
				one.BN = 64
			}
			cfgs = append(cfgs, vl, one)
		}
	}
	// The widest BN Check admits at each head dim, with and without PingPong and with one
	// consumer: the register rule's edge (attentionSM90AccRegs).
	for _, d := range []int{64, 128, 256} {
		for _, causal := range []bool{false, true} {
			for _, v := range []struct {
				pp        bool
				consumers int
			}{{false, 2}, {true, 2}, {false, 1}, {false, 3}} {
				c := sm90Cfg(dsl.BF16, d, causal, true, v.pp)
				c.Consumers = v.consumers
				for bn := 256; bn >= 16; bn -= 16 {
					if c.BN = bn; c.Check() == nil {
						break
					}
				}
				if c.Check() == nil { // three consumers: none at d 256
					cfgs = append(cfgs, c)
				}
			}
		}
	}
	for _, c := range cfgs { // each with Persistent, as gpubench -persistent runs them
		if p := sm90Persist(c); p.Check() == nil { // not Overlap + PingPong at d 256
			cfgs = append(cfgs, p)
		}
	}
	for _, c := range cfgs { // each Persistent one with the balanced schedules (gpubench -schedule)
		if c.Persistent {
			for _, s := range []kernels.AttentionSchedule{kernels.AttentionLPT, kernels.AttentionDynamic} {
				x := c
				x.Schedule = s
				cfgs = append(cfgs, x)
			}
		} else if c.Causal && c.In == dsl.BF16 { // AttentionLPT's grid order
			x := c
			x.Schedule = kernels.AttentionLPT
			cfgs = append(cfgs, x)
		}
	}
	// The library's pick per shape (ops.Attention, gpubench), where no variant above is it.
	seen := map[string]bool{}
	for _, c := range cfgs {
		seen[c.Name()] = true
	}
	for _, d := range []int{64, 128, 256} {
		for _, causal := range []bool{false, true} {
			for _, s := range []int{32, 1024, 2048, 4096, 8192, 16384} {
				if c := kernels.AttentionSM90ConfigForShape(dsl.BF16, d, causal, s, s); !seen[c.Name()] {
					seen[c.Name()] = true
					cfgs = append(cfgs, c)
				}
			}
		}
	}
	return cfgs
}

var (
	sm90SpillRE = regexp.MustCompile(`(\d+) bytes spill stores, (\d+) bytes spill loads`)
	sm90UsedRE  = regexp.MustCompile(`Used \d+ registers[^\n]*`)
)

// TestAttentionSM90Ptxas assembles every variant for sm_90a with ptxas -v: no spills, no
// wgmma performance warning (serialized wgmmas, injected waits, setmaxnreg ignored); it logs
// the register counts.
func TestAttentionSM90Ptxas(t *testing.T) {
	ptxas := tooltest.Ptxas(t)
	dir := t.TempDir()
	for _, cfg := range sm90Variants() {
		k := dsl.New(cfg.Name(), dsl.WithTarget(ptx.SM90a))
		kernels.AttentionSM90(k, cfg)
		m, err := k.Build()
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, cfg.Name()+".ptx")
		if err := os.WriteFile(f, []byte(m.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(ptxas, "-arch=sm_90a", "-v", f, "-o", f+".cubin").CombinedOutput()
		if err != nil {
			t.Fatalf("%s: ptxas: %v: %s", cfg.Name(), err, out)
		}
		for _, w := range []string{"C7508", "C7517", "C7510", "Potential Performance Loss"} {
			if strings.Contains(string(out), w) {
				t.Errorf("%s: ptxas warns: %s", cfg.Name(), out)
				break
			}
		}
		s := sm90SpillRE.FindStringSubmatch(string(out))
		if s == nil {
			t.Fatalf("%s: no spill counts in ptxas -v: %s", cfg.Name(), out)
		}
		if s[1] != "0" || s[2] != "0" {
			t.Errorf("%s spills: %s", cfg.Name(), s[0])
		}
		t.Logf("%s: %s", cfg.Name(), sm90UsedRE.FindString(string(out)))
	}
}

// BenchmarkAttentionSM90Build builds and prints the library's sm_90a attention (bf16,
// causal: the default, one block a tile, and the picks at 4k tokens, d 128 Persistent with
// the dynamic schedule and d 64 with three consumer warpgroups; issue 27: under 5 ms).
func BenchmarkAttentionSM90Build(b *testing.B) {
	cfgs := []kernels.AttentionSM90Config{kernels.DefaultAttentionSM90Config(dsl.BF16, 128, true)}
	for _, d := range []int{128, 64} {
		cfgs = append(cfgs, kernels.AttentionSM90ConfigForShape(dsl.BF16, d, true, 4096, 4096))
	}
	for _, cfg := range cfgs {
		b.Run(cfg.Name(), func(b *testing.B) { benchSM90Build(b, cfg) })
	}
}

// benchSM90Build builds and prints cfg's kernel b.N times.
func benchSM90Build(b *testing.B, cfg kernels.AttentionSM90Config) {
	for b.Loop() {
		k := dsl.New(cfg.Name(), dsl.WithTarget(ptx.SM90a))
		kernels.AttentionSM90(k, cfg)
		m, err := k.Build()
		if err != nil {
			b.Fatal(err)
		}
		_ = m.String()
	}
}

// sm90Persist is c with Persistent.
func sm90Persist(c kernels.AttentionSM90Config) kernels.AttentionSM90Config {
	c.Persistent = true
	return c
}

// TestAttentionSM90Persistent checks the Persistent sm_90a attention on the emulator against
// float64 with grids smaller than the tile count, so that blocks walk several tiles across
// heads and batches (the K/V rings and the Q ring running on from tile to tile) and the
// tile count is not a multiple of the grid: odd lengths, one token, GQA 4 and 8, causal with
// seqQ < seqK and seqQ > seqK (tiles that see no key), f16 and bf16, head dims 64, 128 and
// 256 (one Q buffer there, two below), every overlap combination, one consumer, 3 stages.
func TestAttentionSM90Persistent(t *testing.T) {
	d, err := jit.OpenBackend(jit.Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range sm90PersistentCases() {
		t.Run(c.String(), func(t *testing.T) { runSM90(t, d, c, 5) })
	}
}

// sm90PersistentCases are TestAttentionSM90Persistent's problems (AttentionStrided).
func sm90PersistentCases() []sm90Problem {
	bf, f16 := dsl.BF16, dsl.F16
	var cases []sm90Problem
	for _, o := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		cases = append(cases,
			// 2 x 3 x 2 = 12 tiles over 5 blocks.
			sm90Problem{cfg: sm90Persist(sm90Cfg(bf, 64, false, o[0], o[1])), b: 2, h: 3, hk: 3, sq: 130, sk: 200, scale: 0.5, sms: 5},
			// 2 x 4 x 2 = 16 tiles over 3 blocks, GQA 4.
			sm90Problem{cfg: sm90Persist(sm90Cfg(bf, 64, true, o[0], o[1])), b: 2, h: 4, hk: 1, sq: 200, sk: 130, sms: 3},
		)
	}
	one := sm90Persist(sm90Cfg(f16, 64, false, true, false))
	one.Consumers, one.BN = 1, 64
	// A 3-stage ring, 32 keys per step: 6 tiles over 5 blocks.
	three := sm90Persist(sm90Cfg(bf, 64, true, true, true))
	three.Stages, three.BN = 3, 32
	lpt3 := sm90Persist(sm90Three(sm90Cfg(bf, 64, true, true, false), 2))
	lpt3.Schedule = kernels.AttentionLPT
	cases = append(cases,
		sm90Problem{cfg: sm90Persist(sm90Cfg(bf, 64, false, true, false)), b: 11, h: 1, hk: 1, sq: 1, sk: 90, sms: 3},
		sm90Problem{cfg: sm90Persist(sm90Cfg(f16, 64, true, true, true)), b: 3, h: 2, hk: 2, sq: 130, sk: 90, scale: 0.5, sms: 4},
		sm90Problem{cfg: sm90Persist(sm90Cfg(bf, 128, false, true, false)), b: 2, h: 4, hk: 2, sq: 70, sk: 130, sms: 3},
		sm90Problem{cfg: sm90Persist(sm90Cfg(f16, 128, true, true, true)), b: 2, h: 4, hk: 1, sq: 90, sk: 200, sms: 3},
		sm90Problem{cfg: one, b: 2, h: 2, hk: 1, sq: 70, sk: 90, sms: 3},
		sm90Problem{cfg: sm90Persist(sm90Cfg(bf, 256, false, true, false)), b: 2, h: 4, hk: 1, sq: 70, sk: 130, scale: 0.2, sms: 3},
		sm90Problem{cfg: sm90Persist(sm90Cfg(bf, 256, true, false, false)), b: 2, h: 3, hk: 1, sq: 130, sk: 70, sms: 5},
		sm90Problem{cfg: three, b: 3, h: 2, hk: 2, sq: 65, sk: 200, scale: 0.5, sms: 5},
		sm90Problem{cfg: sm90Persist(sm90Cfg(f16, 64, false, true, true)), b: 1, h: 8, hk: 1, sq: 33, sk: 70, sms: 3}, // GQA 8
		// Causal, seqQ far above seqK: tiles that see no key (O 0, LSE -Inf) between ones
		// that do, on the same blocks.
		sm90Problem{cfg: sm90Persist(sm90Cfg(bf, 64, true, true, false)), b: 3, h: 2, hk: 2, sq: 300, sk: 20, sms: 4},
		sm90Problem{cfg: sm90Persist(sm90Cfg(bf, 64, true, false, true)), b: 3, h: 2, hk: 2, sq: 300, sk: 20, sms: 4},
		// Three consumer warpgroups: 192-row tiles, causal ones that see no key among them;
		// LPT and the dynamic schedule's sections.
		sm90Problem{cfg: sm90Persist(sm90Three(sm90Cfg(bf, 64, true, true, false), 3)), b: 2, h: 2, hk: 1, sq: 450, sk: 300, sms: 3},
		sm90Problem{cfg: lpt3, b: 3, h: 2, hk: 2, sq: 200, sk: 200, sms: 4},
		// More SMs than tiles: one tile a block, as without Persistent.
		sm90Problem{cfg: sm90Persist(sm90Cfg(bf, 128, true, true, false)), b: 1, h: 2, hk: 2, sq: 130, sk: 130, sms: 132},
	)
	return cases
}
