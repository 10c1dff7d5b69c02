package ref

import (
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"sync"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

func init() { registerOwn("attention", oneGPU, attentionHarness) }

// AttentionProblem is one forward attention run on the emulator: Q [Batch, SeqQ, Heads, D],
// K and V [Batch, SeqK, KVHeads, D] (D = Config.HeadDim), random in [-1, 1], softmax scale
// Scale (0: 1/sqrt(D)).
type AttentionProblem struct {
	Config                            kernels.AttentionConfig
	Target                            ptx.Target // zero: sm_90
	Batch, Heads, KVHeads, SeqQ, SeqK int
	Scale                             float64
	Seed                              int64
}

// attentionHarness runs `kgen run attention`: the registry's kernel (head dim 128) on one
// batch of 2 heads sharing a K/V head, seqQ 33 and seqK 141 (neither a tile multiple;
// --size sets seqK).
func attentionHarness(r *run) error {
	seqK := 141
	if r.p.Size > 0 {
		seqK = r.p.Size
	}
	res, err := RunAttention(AttentionProblem{Config: kernels.DefaultAttentionConfig(r.p.DType, 128, false), Target: r.p.Target,
		Batch: 1, Heads: 2, KVHeads: 1, SeqQ: 33, SeqK: seqK, Seed: r.p.Seed})
	r.res = res
	return err
}

// MaxEmuAttention bounds an emulated attention problem's score matrix
// (batch*heads*seqQ*seqK, 2^22): the float64 reference and the emulator both walk it.
const MaxEmuAttention = 1 << 22

// RunAttention builds the problem's kernel, runs it on one emulated GPU and checks O and
// LSE element by element against a float64 reference (AttentionTolerance).
func RunAttention(p AttentionProblem) (Result, error) {
	cfg := p.Config
	res := Result{Kernel: cfg.Name(), DType: cfg.In,
		Shape: fmt.Sprintf("b%d h%d/%d sq%d sk%d d%d", p.Batch, p.Heads, p.KVHeads, p.SeqQ, p.SeqK, cfg.HeadDim)}
	if p.Target == "" {
		p.Target = ptx.SM90
	}
	if err := cfg.Check(); err != nil {
		return res, err
	}
	if err := cfg.CheckShape(p.Batch, p.Heads, p.KVHeads, p.SeqQ, p.SeqK); err != nil {
		return res, err
	}
	if n := satMul(p.Batch, p.Heads, p.SeqQ, p.SeqK); n > MaxEmuAttention {
		return res, fmt.Errorf("attention %s: %s scores; the emulator harness takes at most %d (MaxEmuAttention)", res.Shape, satText(n), MaxEmuAttention)
	}
	if err := scalar("attention "+res.Shape, "Scale", p.Scale, true); err != nil {
		return res, err
	}
	scale := p.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(cfg.HeadDim))
	}
	k := dsl.New(cfg.Name(), dsl.WithTarget(p.Target))
	kernels.Attention(k, cfg)
	mod, err := k.Build()
	if err != nil {
		return res, err
	}
	sys, err := emu.New(1)
	if err != nil {
		return res, err
	}
	B, H, HK, SQ, SK, D := p.Batch, p.Heads, p.KVHeads, p.SeqQ, p.SeqK, cfg.HeadDim
	rng := rand.New(rand.NewSource(p.Seed + 1))
	rnd := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = round(cfg.In, 2*rng.Float64()-1)
		}
		return v
	}
	q, kk, v := rnd(B*SQ*H*D), rnd(B*SK*HK*D), rnd(B*SK*HK*D)
	var ptrs [5]uint64
	for i, x := range []struct {
		dt dsl.Type
		v  []float64
	}{{cfg.In, q}, {cfg.In, kk}, {cfg.In, v}, {cfg.In, make([]float64, B*SQ*H*D)}, {dsl.F32, make([]float64, B*H*SQ)}} {
		addr, err := sys.Malloc(0, max(len(x.v)*x.dt.Bytes(), 1))
		if err != nil {
			return res, err
		}
		if err := write(sys, addr, x.dt, x.v); err != nil {
			return res, err
		}
		ptrs[i] = addr
	}
	err = sys.Launch(emu.Launch{Module: mod, Entry: cfg.Name(), Grid: emu.D1(cfg.Grid(B, H, SQ)), Block: emu.D1(cfg.Threads()),
		SharedBytes: cfg.SharedBytes(),
		Args:        []any{ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], uint32(B), uint32(H), uint32(HK), uint32(SQ), uint32(SK), float32(scale)},
		Options:     emu.Options{Seed: p.Seed}})
	if err != nil {
		return res, err
	}
	gotO, err := read(sys, ptrs[3], cfg.In, B*SQ*H*D)
	if err != nil {
		return res, err
	}
	gotL, err := read(sys, ptrs[4], dsl.F32, B*H*SQ)
	if err != nil {
		return res, err
	}
	want := AttentionRef(q, kk, v, B, H, HK, SQ, SK, D, scale, cfg.Causal)
	return res, checkAttention(&res, cfg.Name(), cfg.In, want, gotO, gotL, B, H, SQ, D)
}

// checkAttention compares O ([b, sq, h, d]) and LSE ([b, h, sq]) with want element by
// element (AttentionTolerance; the LSE within 1e-5 relative, -Inf where a row sees no key),
// recording the worst error and the count in res; the error names the first value outside.
func checkAttention(res *Result, name string, in dsl.Type, want AttentionOut, gotO, gotL []float64, B, H, SQ, D int) error {
	if want.Err != nil { // no reference: a failure, not a pass over nothing
		return fmt.Errorf("%s: %w", name, want.Err)
	}
	bad := 0
	var first string
	fail := func(s string) {
		if bad == 0 {
			first = s
		}
		bad++
	}
	for i, w := range want.O {
		tol := AttentionTolerance(in, want.Abs[i/D], w)
		d := math.Abs(gotO[i] - w)
		res.MaxError = math.Max(res.MaxError, d/tol)
		if !(d <= tol) {
			b, s, h, c := i/(SQ*H*D), i/(H*D)%SQ, i/D%H, i%D
			fail(fmt.Sprintf("O[b %d, s %d, h %d, d %d] = %v, want %v (tolerance %.3g)", b, s, h, c, gotO[i], w, tol))
		}
	}
	for i, w := range want.LSE {
		if math.IsInf(w, -1) {
			if !math.IsInf(gotL[i], -1) {
				fail(fmt.Sprintf("LSE[%d] = %v, want -Inf (a row that sees no key)", i, gotL[i]))
			}
			continue
		}
		tol := 1e-5 * (1 + math.Abs(w))
		d := math.Abs(gotL[i] - w)
		res.MaxError = math.Max(res.MaxError, d/tol)
		if !(d <= tol) {
			fail(fmt.Sprintf("LSE[b %d, h %d, s %d] = %v, want %v (tolerance %.3g)", i/(H*SQ), i/SQ%H, i%SQ, gotL[i], w, tol))
		}
	}
	res.Checked = len(want.O) + len(want.LSE)
	if bad > 0 {
		return fmt.Errorf("%s %s: %d of %d values differ; first: %s", name, res.Shape, bad, res.Checked, first)
	}
	return nil
}

// AttentionOut is the float64 reference's result: O [batch, seqQ, heads, d], LSE [batch,
// heads, seqQ] (natural log of the scaled softmax denominator; -Inf for a row that sees no
// key, whose O is 0), and Abs, per (batch, seqQ, heads) row of O, sum_j p_j max_d |v_jd|:
// the scale of the rounding errors of P (see AttentionTolerance).
// Err is set, and O, LSE and Abs nil, when the inputs do not match the shapes (an extent
// below 1, heads not a multiple of kvHeads, a slice shorter than its shape): the reference
// computes nothing rather than panic.
type AttentionOut struct {
	O, LSE, Abs []float64
	Err         error
}

// refProduct is the product of v, or -1 when a factor is negative or it passes math.MaxInt.
func refProduct(v ...int) int {
	p := 1
	for _, x := range v {
		if x < 0 || x != 0 && p > math.MaxInt/x {
			return -1
		}
		p *= x
	}
	return p
}

// checkAttentionRef reports inputs of AttentionRef that do not match its shapes.
func checkAttentionRef(q, k, v []float64, batch, heads, kvHeads, seqQ, seqK, d int) error {
	switch {
	case batch < 1 || heads < 1 || kvHeads < 1 || seqQ < 1 || seqK < 0 || d < 1:
		return fmt.Errorf("ref: AttentionRef: batch %d, heads %d, kvHeads %d, seqQ %d, seqK %d, d %d: want extents of at least 1 (seqK at least 0)", batch, heads, kvHeads, seqQ, seqK, d)
	case heads%kvHeads != 0:
		return fmt.Errorf("ref: AttentionRef: %d heads are not a multiple of %d kvHeads", heads, kvHeads)
	}
	nq, nkv := refProduct(batch, seqQ, heads, d), refProduct(batch, seqK, kvHeads, d)
	switch {
	case nq < 0 || len(q) < nq:
		return fmt.Errorf("ref: AttentionRef: q has %d values; [batch, seqQ, heads, d] = [%d, %d, %d, %d] needs %s", len(q), batch, seqQ, heads, d, refCount(nq))
	case nkv < 0 || len(k) < nkv || len(v) < nkv:
		return fmt.Errorf("ref: AttentionRef: k has %d values and v %d; [batch, seqK, kvHeads, d] = [%d, %d, %d, %d] needs %s each", len(k), len(v), batch, seqK, kvHeads, d, refCount(nkv))
	}
	return nil
}

// refCount writes a refProduct.
func refCount(n int) string {
	if n < 0 {
		return "more than an int counts"
	}
	return fmt.Sprint(n)
}

// AttentionRef computes attention in float64 with the kernel's conventions: BSHD q, k, v,
// query head h reading K/V head h/(heads/kvHeads), causal keys j <= i + seqK - seqQ. The
// (batch, head) pairs run on GOMAXPROCS goroutines (each writes its own rows); the sums
// run in key order, so the result does not depend on the schedule. Inputs that do not match
// the shapes give an AttentionOut whose Err says why.
func AttentionRef(q, k, v []float64, batch, heads, kvHeads, seqQ, seqK, d int, scale float64, causal bool) AttentionOut {
	if err := checkAttentionRef(q, k, v, batch, heads, kvHeads, seqQ, seqK, d); err != nil {
		return AttentionOut{Err: err}
	}
	out := AttentionOut{O: make([]float64, batch*seqQ*heads*d), LSE: make([]float64, batch*heads*seqQ), Abs: make([]float64, batch*seqQ*heads)}
	pairs := make(chan [2]int)
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), batch*heads); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, vmax, acc := make([]float64, seqK), make([]float64, seqK), make([]float64, d)
			for bh := range pairs {
				attentionRefHead(q, k, v, out, bh[0], bh[1], heads, kvHeads, seqQ, seqK, d, scale, causal, s, vmax, acc)
			}
		}()
	}
	for b := 0; b < batch; b++ {
		for h := 0; h < heads; h++ {
			pairs <- [2]int{b, h}
		}
	}
	close(pairs)
	wg.Wait()
	return out
}

// attentionRefHead is AttentionRef for batch b and head h, with scratch s and vmax (seqK)
// and acc (d).
func attentionRefHead(q, k, v []float64, out AttentionOut, b, h, heads, kvHeads, seqQ, seqK, d int, scale float64, causal bool, s, vmax, acc []float64) {
	hk := h / (heads / kvHeads)
	kv := func(j int) int { return ((b*seqK+j)*kvHeads + hk) * d }
	for j := 0; j < seqK; j++ {
		vmax[j] = 0
		for c := 0; c < d; c++ {
			vmax[j] = math.Max(vmax[j], math.Abs(v[kv(j)+c]))
		}
	}
	for i := 0; i < seqQ; i++ {
		qo := ((b*seqQ+i)*heads + h) * d
		n := seqK
		if causal {
			n = max(0, min(seqK, i+seqK-seqQ+1))
		}
		m := math.Inf(-1)
		for j := 0; j < n; j++ {
			x := 0.0
			for c := 0; c < d; c++ {
				x += q[qo+c] * k[kv(j)+c]
			}
			s[j] = x * scale
			m = math.Max(m, s[j])
		}
		l, abs := 0.0, 0.0
		for j := 0; j < n; j++ {
			s[j] = math.Exp(s[j] - m)
			l += s[j]
			abs += s[j] * vmax[j]
		}
		li := (b*heads+h)*seqQ + i
		if n == 0 {
			out.LSE[li] = math.Inf(-1)
			continue
		}
		out.LSE[li] = m + math.Log(l)
		out.Abs[qo/d] = abs / l
		clear(acc)
		for j := 0; j < n; j++ {
			vj := v[kv(j) : kv(j)+d]
			for c, x := range vj {
				acc[c] += s[j] * x
			}
		}
		for c := 0; c < d; c++ {
			out.O[qo+c] = acc[c] / l
		}
	}
}

// AttentionTolerance bounds |O - exact| for one element of a row whose sum_j p_j |v_j| / l
// is abs: P is rounded to the input type before P V (relative error u = 2^-8 for bf16,
// 2^-11 for f16, each weight's error times |v_j|, summed: u*abs), the output is rounded
// to it too (u*|want|); the f32 scores, exp2.approx and the f32 sums add relative errors
// near 2^-20, covered by 2^-16*abs.
func AttentionTolerance(in dsl.Type, abs, want float64) float64 {
	u := 0x1p-11
	if in == dsl.BF16 {
		u = 0x1p-8
	}
	return (u+0x1p-16)*abs + u*math.Abs(want) + 1e-30
}
