package ops

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/ref"
)

// decCase is one paged decode problem: query tokens, heads, kv heads, head dim, page size,
// the contexts (one sequence each), spare pages in the cache, table width (0: just
// enough), scale (0: default) and forced splits (0: chosen).
type decCase struct {
	q, h, hk, d, ps int
	ctx             []int
	spare, width    int
	scale           float32
	splits          int
}

// decOperands are a decode problem's tensors on a device and their host values.
type decOperands[T jit.Elem] struct {
	q, kc, vc, out Tensor[T]
	table, lens    Tensor[int32]
	lse            Tensor[float32]
	qh, kh, vh     []float64
	tableH         []int32
	width          int
}

func newDecode[T jit.Elem](t *testing.T, d *jit.Device, c decCase, seed int64) decOperands[T] {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	rnd := func(n int) []float64 {
		v := randoms[T](rng, n)
		for i := range v {
			v[i] = value(of[T](v[i] / 2))
		}
		return v
	}
	must := func(x Tensor[T], e error) Tensor[T] {
		t.Helper()
		if e != nil {
			t.Fatal(e)
		}
		return x
	}
	b := len(c.ctx)
	var o decOperands[T]
	used, longest := 0, 0
	for _, s := range c.ctx {
		used += (s + c.ps - 1) / c.ps
		longest = max(longest, (s+c.ps-1)/c.ps)
	}
	o.width = max(c.width, longest, 1)
	pages := used + c.spare + 1
	o.qh = rnd(b * c.q * c.h * c.d)
	o.kh, o.vh = rnd(pages*c.ps*c.hk*c.d), rnd(pages*c.ps*c.hk*c.d)
	o.q = must(New(upload[T](t, d, o.qh), b, c.q, c.h, c.d))
	o.kc = must(New(upload[T](t, d, o.kh), pages, c.ps, c.hk, c.d))
	o.vc = must(New(upload[T](t, d, o.vh), pages, c.ps, c.hk, c.d))
	o.out = must(New(upload[T](t, d, make([]float64, b*c.q*c.h*c.d)), b, c.q, c.h, c.d))
	perm := rng.Perm(pages)
	o.tableH = make([]int32, b*o.width)
	next := 0
	lens := make([]int32, b)
	for i, s := range c.ctx {
		lens[i] = int32(s)
		for j := range o.width {
			if j < (s+c.ps-1)/c.ps {
				o.tableH[i*o.width+j] = int32(perm[next])
				next++
			} else {
				o.tableH[i*o.width+j] = -7 // never used
			}
		}
	}
	var err error
	if o.table, err = New(uploadInts(t, d, o.tableH), b, o.width); err != nil {
		t.Fatal(err)
	}
	if o.lens, err = New(uploadInts(t, d, lens), b); err != nil {
		t.Fatal(err)
	}
	if o.lse, err = New(upload[float32](t, d, make([]float64, b*c.h*c.q)), b, c.h, c.q); err != nil {
		t.Fatal(err)
	}
	return o
}

// uploadInts copies v to a new int32 buffer on d.
func uploadInts(t *testing.T, d *jit.Device, v []int32) *jit.Buffer[int32] {
	t.Helper()
	b, err := jit.Alloc[int32](d, len(v))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free() })
	if err := b.CopyFromHost(v); err != nil {
		t.Fatal(err)
	}
	return b
}

// checkDecode compares out and (withLSE) the LSE with the float64 reference.
func checkDecode[T jit.Elem](t *testing.T, c decCase, o decOperands[T], withLSE bool) {
	t.Helper()
	scale := float64(c.scale)
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(c.d))
	}
	dt := dsl.Type(jit.ElemType[T]())
	got := download(t, o.out.Buffer())
	gotL := download(t, o.lse.Buffer())
	row := c.hk * c.d
	for b, s := range c.ctx {
		gather := func(cache []float64) []float64 {
			out := make([]float64, s*row)
			for j := range s {
				page := int(o.tableH[b*o.width+j/c.ps])
				copy(out[j*row:(j+1)*row], cache[(page*c.ps+j%c.ps)*row:])
			}
			return out
		}
		n := c.q * c.h * c.d
		want := ref.AttentionRef(o.qh[b*n:(b+1)*n], gather(o.kh), gather(o.vh), 1, c.h, c.hk, c.q, s, c.d, scale, true)
		for i, w := range want.O {
			tl := ref.AttentionTolerance(dt, want.Abs[i/c.d], w)
			if d := math.Abs(got[b*n+i] - w); !(d <= tl) {
				t.Fatalf("%+v: out[b %d, q %d, h %d, d %d] = %v; want %v (tolerance %.3g)", c, b, i/(c.h*c.d), i/c.d%c.h, i%c.d, got[b*n+i], w, tl)
			}
		}
		if !withLSE {
			continue
		}
		for i, w := range want.LSE {
			g := gotL[b*c.h*c.q+i]
			if math.IsInf(w, -1) {
				if !math.IsInf(g, -1) {
					t.Fatalf("%+v: LSE[b %d, %d] = %v; want -Inf (a query that sees no key)", c, b, i, g)
				}
				continue
			}
			if d := math.Abs(g - w); !(d <= 1e-5*(1+math.Abs(w))) {
				t.Fatalf("%+v: LSE[b %d, %d] = %v; want %v", c, b, i, g, w)
			}
		}
	}
}

func runDecode[T jit.Elem](t *testing.T, d *jit.Device, c decCase, withLSE bool) {
	t.Helper()
	o := newDecode[T](t, d, c, int64(len(c.ctx)*31+c.q*7+c.ps))
	opt := &AttentionDecodeOptions{Scale: c.scale, Splits: c.splits}
	if withLSE {
		opt.LSE = o.lse
	}
	if err := AttentionDecode(context.Background(), nil, o.out, o.q, o.kc, o.vc, o.table, o.lens, opt); err != nil {
		t.Fatal(err)
	}
	checkDecode(t, c, o, withLSE)
}

// TestAttentionDecode runs AttentionDecode on the emulator against the float64 reference:
// bf16 and f16, qLen 1 and 4, GQA 1, 4 and 8, head dims 64, 128 and 256, page sizes 16 and
// 64, contexts 0, 1, page-1, page+1 and long in one batch, shuffled pages with spares, a
// wider block table than needed, chosen splits (the emulator's SM count splits a lone long
// sequence) and forced ones, with and without the LSE.
func TestAttentionDecode(t *testing.T) {
	d := emuDevice(t)
	cases := []struct {
		c   decCase
		f16 bool
		lse bool
	}{
		{c: decCase{q: 1, h: 1, hk: 1, d: 64, ps: 16, ctx: []int{1}}, lse: true},
		{c: decCase{q: 1, h: 4, hk: 1, d: 64, ps: 16, ctx: []int{15, 17, 0, 300}, spare: 3, width: 25}, lse: true},
		{c: decCase{q: 4, h: 8, hk: 1, d: 128, ps: 16, ctx: []int{2, 129}, scale: 0.4}, f16: true, lse: true},
		{c: decCase{q: 4, h: 8, hk: 2, d: 64, ps: 64, ctx: []int{1000}}, lse: true}, // chosen splits
		{c: decCase{q: 1, h: 2, hk: 2, d: 256, ps: 32, ctx: []int{63, 65}, splits: 3}},
		{c: decCase{q: 2, h: 8, hk: 8, d: 128, ps: 64, ctx: []int{200, 77}, splits: 1}, f16: true},
	}
	for _, x := range cases {
		t.Run(fmt.Sprintf("%+v", x.c), func(t *testing.T) {
			if x.f16 {
				runDecode[fp.F16](t, d, x.c, x.lse)
			} else {
				runDecode[fp.BF16](t, d, x.c, x.lse)
			}
		})
	}
	// The lone 1000-key sequence was split: the combine kernel ran.
	if ks := strings.Join(Kernels(d), " "); !strings.Contains(ks, "attention_decode_combine_bf16_d64") {
		t.Errorf("loaded kernels %s: no attention_decode_combine_bf16_d64 (the chosen splits were 1)", ks)
	}
}

// TestAttentionDecodeInPlace checks out = q, and a second call with new operands on the
// same plans (the cached arguments must not be reused), split and not.
func TestAttentionDecodeInPlace(t *testing.T) {
	d := emuDevice(t)
	for _, splits := range []int{1, 2} {
		c := decCase{q: 2, h: 4, hk: 1, d: 64, ps: 16, ctx: []int{40, 9}, splits: splits}
		for seed := int64(1); seed <= 2; seed++ {
			o := newDecode[fp.BF16](t, d, c, seed)
			o.out = o.q
			if err := AttentionDecode(context.Background(), nil, o.q, o.q, o.kc, o.vc, o.table, o.lens, &AttentionDecodeOptions{Splits: splits}); err != nil {
				t.Fatal(err)
			}
			checkDecode(t, c, o, false)
		}
	}
}

// TestAttentionDecodeCapture captures a split AttentionDecode (two kernels) after a direct
// call made the plans, and checks the replay.
func TestAttentionDecodeCapture(t *testing.T) {
	d := emuDevice(t)
	c := decCase{q: 4, h: 4, hk: 1, d: 64, ps: 16, ctx: []int{90, 33}, splits: 3}
	o := newDecode[fp.BF16](t, d, c, 3)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	opt := &AttentionDecodeOptions{LSE: o.lse, Splits: 3}
	if err := AttentionDecode(ctx, s, o.out, o.q, o.kc, o.vc, o.table, o.lens, opt); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	checkDecode(t, c, o, true)
	if err := o.out.Buffer().CopyFromHost(make([]fp.BF16, o.out.Len())); err != nil {
		t.Fatal(err)
	}
	if err := o.lse.Buffer().CopyFromHost(make([]float32, o.lse.Len())); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := AttentionDecode(ctx, s, o.out, o.q, o.kc, o.vc, o.table, o.lens, opt); err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n := len(g.Kernels()); n != 2 {
		t.Fatalf("captured %d kernels; want 2 (decode and combine)", n)
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
	checkDecode(t, c, o, true)
}

// TestAttentionDecodeMisuse checks that bad operands are errors naming the operand and the
// rule.
func TestAttentionDecodeMisuse(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	c := decCase{q: 1, h: 4, hk: 2, d: 64, ps: 16, ctx: []int{20, 30}}
	o := newDecode[fp.BF16](t, d, c, 1)
	view := func(x Tensor[fp.BF16], err error) Tensor[fp.BF16] {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	kb := o.kc.Buffer()
	pages := o.kc.Dim(0)
	kv3 := view(New(kb, pages*2, 16, 1, 64))               // 1 kv head: fine; 3 needs another view
	kvPage8 := view(New(kb, pages*2, 8, 2, 64))            // 8 keys a page
	kvD := view(New(kb, pages, 16, 1, 128))                // head dim 128
	heads3 := view(New(o.q.Buffer(), 2, 1, 2, 128))        // 2 heads of 128 for q
	tbl1, _ := New(o.table.Buffer(), o.table.Len())        // rank 1
	lens3, _ := New(uploadInts(t, d, []int32{1, 2, 3}), 3) // 3 lengths for 2 sequences
	lseBad, _ := New(o.lse.Buffer(), 2, 1, 4)
	for _, x := range []struct {
		name           string
		out, q, kc, vc Tensor[fp.BF16]
		table, lens    Tensor[int32]
		opt            *AttentionDecodeOptions
		want           string
	}{
		{"page size 8", o.out, o.q, kvPage8, kvPage8, o.table, o.lens, nil, "keys a page"},
		{"head dim", o.out, o.q, kvD, kvD, o.table, o.lens, nil, "head dim"},
		{"v differs", o.out, o.q, o.kc, kv3, o.table, o.lens, nil, "vCache"},
		{"table rank", o.out, o.q, o.kc, o.vc, tbl1, o.lens, nil, "blockTable has shape"},
		{"lens", o.out, o.q, o.kc, o.vc, o.table, lens3, nil, "seqLens has shape"},
		{"lse", o.out, o.q, o.kc, o.vc, o.table, o.lens, &AttentionDecodeOptions{LSE: lseBad}, "LSE has shape"},
		{"scale", o.out, o.q, o.kc, o.vc, o.table, o.lens, &AttentionDecodeOptions{Scale: float32(math.NaN())}, "finite scale"},
		{"splits", o.out, o.q, o.kc, o.vc, o.table, o.lens, &AttentionDecodeOptions{Splits: 1000}, "Splits 1000"},
		{"out over k", view(New(kb, 2, 1, 4, 64)), o.q, o.kc, o.vc, o.table, o.lens, nil, "overlaps out"},
		{"q head dim", heads3, heads3, o.kc, o.vc, o.table, o.lens, nil, "head dim 128"},
	} {
		err := AttentionDecode(ctx, nil, x.out, x.q, x.kc, x.vc, x.table, x.lens, x.opt)
		if err == nil || !strings.Contains(err.Error(), x.want) {
			t.Errorf("%s: error %v; want one containing %q", x.name, err, x.want)
		}
	}
	// 4 query heads over 3 kv heads.
	q3 := view(New(upload[fp.BF16](t, d, make([]float64, 2*3*64)), 2, 1, 3, 64))
	if err := AttentionDecode(ctx, nil, q3, q3, o.kc, o.vc, o.table, o.lens, nil); err == nil || !strings.Contains(err.Error(), "multiple of kvHeads") {
		t.Errorf("3 heads over 2 kv heads: error %v", err)
	}
}

// TestAttentionDecodeForcedConfig runs AttentionDecode with AttentionDecodeOptions.Config
// (gpubench decode's -bn, -stages, -prefetch, -shiftdiv): a 2-warp, 2-stage configuration
// loading page ids a tile ahead, the same with ShiftDivision, then the chosen one on the same
// shape (a plan each), and refuses configurations for other operands or that Check refuses.
func TestAttentionDecodeForcedConfig(t *testing.T) {
	d := emuDevice(t)
	c := decCase{q: 2, h: 4, hk: 1, d: 64, ps: 16, ctx: []int{300, 17}, splits: 3}
	forced := kernels.AttentionDecodeConfig{In: dsl.BF16, HeadDim: 64, PageSize: 16, BM: 16, BN: 32, Warps: 2, Stages: 2, PrefetchPages: true}
	shifted := forced
	shifted.ShiftDivision = true
	for _, cfg := range []*kernels.AttentionDecodeConfig{&forced, &shifted, nil} {
		o := newDecode[fp.BF16](t, d, c, 7)
		if err := AttentionDecode(context.Background(), nil, o.out, o.q, o.kc, o.vc, o.table, o.lens, &AttentionDecodeOptions{LSE: o.lse, Splits: 3, Config: cfg}); err != nil {
			t.Fatal(err)
		}
		checkDecode(t, c, o, true)
	}
	ks := strings.Join(Kernels(d), " ")
	for _, want := range []string{forced.Name(), shifted.Name(), "attention_decode_bf16_d64_p16_16x64_4w3s"} {
		if !strings.Contains(ks, want) {
			t.Errorf("loaded kernels %s: no %s", ks, want)
		}
	}
	o := newDecode[fp.BF16](t, d, c, 8)
	for _, x := range []struct {
		f    func(*kernels.AttentionDecodeConfig)
		want string
	}{
		{func(k *kernels.AttentionDecodeConfig) { k.HeadDim = 128 }, "the operands are bf16, 64, 16"},
		{func(k *kernels.AttentionDecodeConfig) { k.Stages = 1 }, "stages"},
		{func(k *kernels.AttentionDecodeConfig) { k.BN = 48 }, "BN 48"},
	} {
		bad := forced
		x.f(&bad)
		err := AttentionDecode(context.Background(), nil, o.out, o.q, o.kc, o.vc, o.table, o.lens, &AttentionDecodeOptions{Config: &bad})
		if err == nil || !strings.Contains(err.Error(), x.want) {
			t.Errorf("Config %+v: error %v; want one containing %q", bad, err, x.want)
		}
	}
}
