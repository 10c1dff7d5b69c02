package ops

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/ptx"
)

// attnCase is one attention problem: batch, heads, K/V heads, query and key lengths, head
// dim, causal, scale (0: the default).
type attnCase struct {
	b, h, hk, sq, sk, d int
	causal              bool
	scale               float32
}

// attnOperands are a problem's tensors on a device and their host values.
type attnOperands[T jit.Elem] struct {
	q, k, v, out Tensor[T]
	lse          Tensor[float32]
	outB         *jit.Buffer[T]
	lseB         *jit.Buffer[float32]
	qh, kh, vh   []float64
}

func newAttn[T jit.Elem](t *testing.T, d *jit.Device, c attnCase, seed int64) attnOperands[T] {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	rnd := func(n int) []float64 { // values in [-1, 1), rounded to T
		v := randoms[T](rng, n)
		for i := range v {
			v[i] = value(of[T](v[i] / 2))
		}
		return v
	}
	var o attnOperands[T]
	o.qh, o.kh, o.vh = rnd(c.b*c.sq*c.h*c.d), rnd(c.b*c.sk*c.hk*c.d), rnd(c.b*c.sk*c.hk*c.d)
	var err error
	must := func(x Tensor[T], e error) Tensor[T] {
		if e != nil {
			t.Fatal(e)
		}
		return x
	}
	o.q = must(New(upload[T](t, d, o.qh), c.b, c.sq, c.h, c.d))
	o.k = must(New(upload[T](t, d, o.kh), c.b, c.sk, c.hk, c.d))
	o.v = must(New(upload[T](t, d, o.vh), c.b, c.sk, c.hk, c.d))
	o.outB = upload[T](t, d, make([]float64, c.b*c.sq*c.h*c.d))
	o.out = must(New(o.outB, c.b, c.sq, c.h, c.d))
	o.lseB = upload[float32](t, d, make([]float64, c.b*c.h*c.sq))
	if o.lse, err = New(o.lseB, c.b, c.h, c.sq); err != nil {
		t.Fatal(err)
	}
	return o
}

// checkAttn compares out and (withLSE) the LSE with the float64 reference.
func checkAttn[T jit.Elem](t *testing.T, c attnCase, o attnOperands[T], withLSE bool) {
	t.Helper()
	scale := float64(c.scale)
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(c.d))
	}
	want := ref.AttentionRef(o.qh, o.kh, o.vh, c.b, c.h, c.hk, c.sq, c.sk, c.d, scale, c.causal)
	dt := dsl.Type(jit.ElemType[T]())
	got := download(t, o.outB)
	for i, w := range want.O {
		tl := ref.AttentionTolerance(dt, want.Abs[i/c.d], w)
		if d := math.Abs(got[i] - w); !(d <= tl) {
			t.Fatalf("%+v: out[b %d, s %d, h %d, d %d] = %v; want %v (tolerance %.3g)", c, i/(c.sq*c.h*c.d), i/(c.h*c.d)%c.sq, i/c.d%c.h, i%c.d, got[i], w, tl)
		}
	}
	if !withLSE {
		return
	}
	gotL := download(t, o.lseB)
	for i, w := range want.LSE {
		if math.IsInf(w, -1) {
			if !math.IsInf(gotL[i], -1) {
				t.Fatalf("%+v: LSE[%d] = %v; want -Inf (a row that sees no key)", c, i, gotL[i])
			}
			continue
		}
		if d := math.Abs(gotL[i] - w); !(d <= 1e-5*(1+math.Abs(w))) {
			t.Fatalf("%+v: LSE[%d] = %v; want %v", c, i, gotL[i], w)
		}
	}
}

func runAttn[T jit.Elem](t *testing.T, d *jit.Device, c attnCase, withLSE bool, kernel AttentionKernel) {
	o := newAttn[T](t, d, c, int64(c.sq*131+c.sk))
	opt := &AttentionOptions{Causal: c.causal, Scale: c.scale, Kernel: kernel}
	if withLSE {
		opt.LSE = o.lse
	}
	if err := Attention(context.Background(), nil, o.out, o.q, o.k, o.v, opt); err != nil {
		t.Fatal(err)
	}
	checkAttn(t, c, o, withLSE)
}

// TestAttention runs Attention on the emulator against the float64 reference at odd
// shapes: sequence lengths off the tiles, one token, GQA ratios 1, 4 and 8, causal with
// seqQ below and above seqK (rows that see no key), both dtypes, head dims 64, 128 and 256,
// with and without the LSE; each with the sm_90a kernel (the emulator's pick: it is a
// compute capability 9.0 device) and with FlashAttention-2 forced.
func TestAttention(t *testing.T) {
	d := emuDevice(t)
	cases := []struct {
		c   attnCase
		f16 bool
		lse bool
	}{
		{c: attnCase{b: 1, h: 1, hk: 1, sq: 1, sk: 1, d: 64}, lse: true},
		{c: attnCase{b: 2, h: 2, hk: 2, sq: 37, sk: 77, d: 64, scale: 0.5}, lse: true},
		{c: attnCase{b: 1, h: 4, hk: 1, sq: 33, sk: 45, d: 64, scale: 0.5}, f16: true, lse: true},
		{c: attnCase{b: 1, h: 4, hk: 1, sq: 1, sk: 70, d: 64}},
		{c: attnCase{b: 1, h: 2, hk: 1, sq: 21, sk: 70, d: 64, causal: true}, lse: true},
		{c: attnCase{b: 1, h: 1, hk: 1, sq: 70, sk: 33, d: 64, causal: true}, f16: true, lse: true},
		{c: attnCase{b: 1, h: 1, hk: 1, sq: 67, sk: 67, d: 128, causal: true}},
		{c: attnCase{b: 1, h: 8, hk: 1, sq: 65, sk: 30, d: 128, scale: 0.3}, f16: true, lse: true},
		{c: attnCase{b: 1, h: 2, hk: 1, sq: 66, sk: 70, d: 256}, lse: true},
	}
	for _, tc := range cases {
		for _, kernel := range []AttentionKernel{AttentionAuto, AttentionFA2} {
			name := fmt.Sprintf("b%dh%d-%dsq%dsk%dd%d-causal%v-f16%v-%s", tc.c.b, tc.c.h, tc.c.hk, tc.c.sq, tc.c.sk, tc.c.d, tc.c.causal, tc.f16, kernel)
			t.Run(name, func(t *testing.T) {
				if tc.f16 {
					runAttn[fp.F16](t, d, tc.c, tc.lse, kernel)
				} else {
					runAttn[fp.BF16](t, d, tc.c, tc.lse, kernel)
				}
			})
		}
	}
	names := strings.Join(Kernels(d), " ")
	for _, want := range []string{"attention_bf16_d64_64x64_4w2s", "attention_f16_d64_128x64_8w2s_causal", "attention_bf16_d128_128x64_8w2s_causal",
		"attention_sm90_bf16_d64_64x128_2s_ov", "attention_sm90_f16_d64_128x128_3s_causal_ov", "attention_sm90_bf16_d256_128x80_2s_ov"} {
		if !strings.Contains(names, want) {
			t.Errorf("loaded kernels %q; want %s among them", names, want)
		}
	}
}

// TestAttentionInPlace checks out = q (the same tensor) and a second call with new
// operands on the same plan (the cached arguments must not be reused).
func TestAttentionInPlace(t *testing.T) {
	d := emuDevice(t)
	c := attnCase{b: 1, h: 2, hk: 1, sq: 9, sk: 20, d: 64}
	o := newAttn[fp.BF16](t, d, c, 7)
	if err := Attention(context.Background(), nil, o.out, o.q, o.k, o.v, nil); err != nil {
		t.Fatal(err)
	}
	checkAttn(t, c, o, false)
	o2 := newAttn[fp.BF16](t, d, c, 8)
	o2.out, o2.outB = o2.q, o2.q.Buffer()
	if err := Attention(context.Background(), nil, o2.q, o2.q, o2.k, o2.v, nil); err != nil {
		t.Fatal(err)
	}
	checkAttn(t, c, o2, false)
}

// TestAttentionCapture captures an Attention call (after one outside the capture made the
// plan) and checks the replay against the direct call's result.
func TestAttentionCapture(t *testing.T) {
	d := emuDevice(t)
	c := attnCase{b: 1, h: 4, hk: 1, sq: 17, sk: 40, d: 64, causal: true}
	o := newAttn[fp.BF16](t, d, c, 5)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	opt := &AttentionOptions{Causal: true, LSE: o.lse}
	if err := Attention(ctx, s, o.out, o.q, o.k, o.v, opt); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	checkAttn(t, c, o, true)
	if err := o.outB.CopyFromHost(make([]fp.BF16, o.outB.Len())); err != nil {
		t.Fatal(err)
	}
	if err := o.lseB.CopyFromHost(make([]float32, o.lseB.Len())); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := Attention(ctx, s, o.out, o.q, o.k, o.v, opt); err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n := len(g.Kernels()); n != 1 {
		t.Fatalf("captured %d kernels; want 1", n)
	}
	x, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := x.Launch(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	checkAttn(t, c, o, true)
}

// TestAttentionMisuse checks that bad operands are errors naming the operand and the rule.
func TestAttentionMisuse(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	o := newAttn[fp.BF16](t, d, attnCase{b: 1, h: 4, hk: 2, sq: 8, sk: 8, d: 64}, 1) // q 2048 elements, k 1024
	qb, kb := o.q.Buffer(), o.k.Buffer()
	view := func(x Tensor[fp.BF16], err error) Tensor[fp.BF16] {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	other := emuDevice(t)
	oOther := view(New(upload[fp.BF16](t, other, make([]float64, 2048)), 1, 8, 4, 64))
	s2, err := other.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	f32t, _ := New(upload[float32](t, d, make([]float64, 2048)), 1, 8, 4, 64)
	kv3 := view(New(qb, 1, 2, 3, 64)) // 3 K/V heads for 4 query heads
	lseBad, _ := New(o.lseB, 1, 4, 4)
	lseStrided, _ := Strided(upload[float32](t, d, make([]float64, 64)), 0, []int{1, 4, 8}, []int{32, 1, 4})
	lseOverQ, err := jit.BufferOf[float32](qb.Memory(), 32)
	if err != nil {
		t.Fatal(err)
	}
	lseQ, _ := New(lseOverQ, 1, 4, 8)
	var nilCtx context.Context // a nil context is the misuse tested
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil ctx", Attention(nilCtx, nil, o.out, o.q, o.k, o.v, nil), "nil context"},
		{"dtype", Attention(ctx, nil, f32t, f32t, f32t, f32t, nil), "q has element type f32"},
		{"zero q", Attention(ctx, nil, o.out, Tensor[fp.BF16]{}, o.k, o.v, nil), "q is the zero Tensor"},
		{"device", Attention(ctx, nil, oOther, o.q, o.k, o.v, nil), "out lives on"},
		{"rank", Attention(ctx, nil, o.out, view(New(qb, 2048)), o.k, o.v, nil), "q has rank 1"},
		{"head dim", Attention(ctx, nil, o.out, view(New(qb, 1, 8, 4, 32)), o.k, o.v, nil), "q has head dim 32"},
		{"k shape", Attention(ctx, nil, o.out, o.q, view(New(kb, 1, 8, 4, 32)), o.v, nil), "k has shape [1 8 4 32], q [1 8 4 64]"},
		{"v shape", Attention(ctx, nil, o.out, o.q, o.k, view(New(kb, 1, 4, 4, 64)), nil), "v has shape [1 4 4 64], k [1 8 2 64]"},
		{"gqa", Attention(ctx, nil, o.out, o.q, kv3, kv3, nil), "q has 4 heads, k and v 3: heads must be a multiple of kvHeads"},
		{"out shape", Attention(ctx, nil, view(New(o.outB, 1, 8, 2, 64)), o.q, o.k, o.v, nil), "out has shape [1 8 2 64], q [1 8 4 64]"},
		{"strides", Attention(ctx, nil, o.out, view(Strided(qb, 0, []int{1, 8, 4, 64}, []int{2048, 64, 512, 1})), o.k, o.v, nil),
			"q (shape [1 8 4 64], strides [2048 64 512 1]) is not contiguous"},
		{"align", Attention(ctx, nil, view(New(o.outB, 1, 4, 4, 64)), view(Strided(qb, 4, []int{1, 4, 4, 64}, []int{1024, 256, 64, 1})), o.k, o.v, nil),
			"q starts 8 bytes past a 16-byte boundary"},
		{"scale", Attention(ctx, nil, o.out, o.q, o.k, o.v, &AttentionOptions{Scale: float32(math.Inf(1))}), "AttentionOptions.Scale +Inf: want a positive finite scale"},
		{"lse shape", Attention(ctx, nil, o.out, o.q, o.k, o.v, &AttentionOptions{LSE: lseBad}), "LSE has shape [1 4 4]; want [1 4 8]"},
		{"lse strides", Attention(ctx, nil, o.out, o.q, o.k, o.v, &AttentionOptions{LSE: lseStrided}), "LSE (shape [1 4 8], strides [32 1 4]) is not contiguous"},
		{"stream", Attention(ctx, s2, o.out, o.q, o.k, o.v, nil), "the stream belongs to"},
		{"out over k", Attention(ctx, nil, view(New(o.outB, 1, 8, 4, 64)), o.q, view(New(o.outB, 1, 8, 2, 64)), o.v, nil), "k (bytes 0-2048 of its buffer) overlaps out"},
		{"lse over q", Attention(ctx, nil, o.out, o.q, o.k, o.v, &AttentionOptions{LSE: lseQ}), "q (bytes 0-4096 of its buffer) overlaps LSE"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v; want one containing %q", tc.name, tc.err, tc.want)
		}
	}
	if n := len(planNames(d)); n != 0 {
		t.Errorf("refused calls made %d plans; want none", n)
	}
}

// TestAttentionConfigFor checks the configuration choice per device: the default tiles,
// short query sequences, small shared memory, and an old GPU refused.
func TestAttentionConfigFor(t *testing.T) {
	for _, c := range []struct {
		sm, d, sq int
		want      string
	}{
		{90, 128, 4096, "attention_bf16_d128_128x64_8w2s"},
		{90, 128, 1, "attention_bf16_d128_64x64_4w2s"},
		{90, 256, 4096, "attention_bf16_d256_64x64_4w2s"},
		{89, 256, 4096, "attention_bf16_d256_64x32_4w2s"},
		{80, 256, 4096, "attention_bf16_d256_64x64_4w2s"},
		{86, 128, 4096, "attention_bf16_d128_128x64_8w2s"},
	} {
		cfg, err := AttentionConfigFor(jit.Info{Name: "gpu", SM: c.sm}, ptx.BF16, c.d, c.sq, false)
		if err != nil || cfg.Name() != c.want {
			t.Errorf("sm %d, d %d, seqQ %d: %s, %v; want %s", c.sm, c.d, c.sq, cfg.Name(), err, c.want)
		}
		if cfg.SharedBytes() > maxSharedPerBlock(c.sm) {
			t.Errorf("sm %d: %s needs %d bytes of shared memory, more than %d", c.sm, cfg.Name(), cfg.SharedBytes(), maxSharedPerBlock(c.sm))
		}
	}
	if _, err := AttentionConfigFor(jit.Info{Name: "T4", SM: 75}, ptx.BF16, 128, 128, false); err == nil || !strings.Contains(err.Error(), "compute capability 8.0 or newer; T4 is 7.5") {
		t.Errorf("sm 75: error %v; want one naming compute capability 8.0", err)
	}
}

// TestAttentionAllocs bounds the Go allocations of an Attention call whose plan and
// arguments are cached (captured on the emulator, as TestCallAllocs does for the other ops):
// no more than jit's Launch of its kernel with the same boxed arguments.
func TestAttentionAllocs(t *testing.T) {
	d := emuDevice(t)
	c := attnCase{b: 1, h: 2, hk: 1, sq: 8, sk: 16, d: 64, causal: true}
	o := newAttn[fp.BF16](t, d, c, 3)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	opt := &AttentionOptions{Causal: true, LSE: o.lse}
	call := func() error { return Attention(ctx, s, o.out, o.q, o.k, o.v, opt) }
	if err := call(); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if g, err := s.EndCapture(); err == nil {
			g.Close()
		}
	}()
	var cerr error
	n := testing.AllocsPerRun(50, func() {
		if err := call(); err != nil {
			cerr = err
		}
	})
	if cerr != nil {
		t.Fatal(cerr)
	}
	// jit's launch of the plan's kernel with the arguments the call encoded and kept.
	var p *plan
	st := stateOf(d)
	st.mu.Lock()
	for k, v := range st.plans {
		if k.op == "attention" {
			p = v
		}
	}
	st.mu.Unlock()
	args := p.last.Load().args
	lc := jit.LaunchConfig{Grid: jit.D1(p.grid), Block: jit.D1(p.block), SharedMem: p.shared, Stream: s, Context: ctx}
	direct := testing.AllocsPerRun(50, func() {
		if err := p.fn.LaunchEncoded(lc, args); err != nil {
			cerr = err
		}
	})
	if cerr != nil {
		t.Fatal(cerr)
	}
	t.Logf("Attention: %.0f allocations per call; Function.LaunchEncoded of its kernel %.0f", n, direct)
	if n > direct {
		t.Errorf("Attention: %.0f allocations per call; Function.LaunchEncoded of its kernel takes %.0f: the op must add none", n, direct)
	}
}

// TestAttentionConcurrent runs Attention from several goroutines on their own streams (one
// plan, one kernel loaded, no LSE: the plan's scratch is shared) and checks each result.
func TestAttentionConcurrent(t *testing.T) {
	d := emuDevice(t)
	c := attnCase{b: 1, h: 2, hk: 2, sq: 20, sk: 33, d: 64}
	o := newAttn[fp.BF16](t, d, c, 11)
	const g = 4
	outs := make([]attnOperands[fp.BF16], g)
	errs := make([]error, g)
	var wg sync.WaitGroup
	for i := range outs {
		outs[i] = o
		outs[i].outB = upload[fp.BF16](t, d, make([]float64, o.outB.Len()))
		outs[i].out, _ = New(outs[i].outB, c.b, c.sq, c.h, c.d)
		wg.Add(1)
		go func(x attnOperands[fp.BF16], i int) {
			defer wg.Done()
			s, err := d.NewStream()
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			if errs[i] = Attention(context.Background(), s, x.out, x.q, x.k, x.v, nil); errs[i] == nil {
				errs[i] = s.Synchronize()
			}
		}(outs[i], i)
	}
	wg.Wait()
	for i := range outs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		checkAttn(t, c, outs[i], false)
	}
	if n := len(Kernels(d)); n != 1 {
		t.Errorf("%d kernels loaded (%v); want 1", n, Kernels(d))
	}
}
