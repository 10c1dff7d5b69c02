package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/ref"
	"github.com/kgen-dev/kgen/ptx"
)

// runAttention is `gpubench attention`: times kgen's forward attention (-kernel: auto picks
// kernels.AttentionSM90, FlashAttention-3 on wgmma, on an sm_90 device and kernels.Attention,
// mma.sync FlashAttention-2, elsewhere; sm90 or fa2 force one) per sequence length with CUDA events (median), checks sampled
// rows of O and LSE against float64, and with -dir writes Q, K, V, O and kgen.json per
// problem for torch_attention.py, which times torch's scaled_dot_product_attention with
// each backend on the same inputs and compares the outputs.
func runAttention(args []string) error {
	fs := flag.NewFlagSet("attention", flag.ExitOnError)
	batch := fs.Int("b", 16, "batch (ignored with -tokens)")
	seqs := fs.String("s", "1024", "sequence lengths (queries = keys), comma-separated")
	tokens := fs.Int("tokens", 0, "when > 0, batch = tokens / seqlen for each -s (FA3's protocol: 16384)")
	heads := fs.Int("h", 16, "query heads")
	kvHeads := fs.Int("hkv", 0, "K/V heads (GQA; 0: = -h)")
	hd := fs.Int("d", 128, "head dim: 64, 128 or 256")
	causal := fs.Bool("causal", false, "causal mask")
	dtype := fs.String("dtype", "bf16", "bf16 or f16")
	reps := fs.Int("reps", 20, "timed repetitions (after 3 warm-ups)")
	dir := fs.String("dir", "", "write q, k, v, o and kgen.json per problem here for torch_attention.py")
	cfg := kernels.DefaultAttentionConfig(dsl.BF16, 128, false)
	bm := fs.Int("bm", 0, "query rows per block (0: the default for the head dim)")
	bn := fs.Int("bn", 0, "keys per step (0: default)")
	warps := fs.Int("warps", 0, "warps per block (0: default)")
	stages := fs.Int("stages", 0, "cp.async stages of K/V (0: default)")
	kernel := fs.String("kernel", "auto", "auto (sm90 on an sm_90 device, else fa2), sm90 or fa2")
	overlap := fs.Bool("overlap", true, "sm90: issue the next S = Q K^T before this tile's softmax (FA3 intra-warpgroup pipelining; default: the library's)")
	pingPong := fs.Bool("pingpong", false, "sm90: alternate the two consumer warpgroups' GEMMs and softmaxes (FA3 ping-pong; default: the library's)")
	consumers := fs.Int("consumers", 0, "sm90: consumer warpgroups, 1, 2 or 3 (3: head dim 64; 0: default); -bn and -stages apply to sm90 too")
	persistent := fs.Bool("persistent", false, "sm90: one block an SM, each walking several (query tile, head, batch) tiles (AttentionSM90Config.Persistent; -persistent=false forces one block a tile; default: the library's)")
	shiftDiv := fs.Bool("shiftdiv", false, "sm90: divisions and remainders by constants as shifts (AttentionSM90Config.ShiftDivision; default: the library's)")
	schedule := fs.String("schedule", "", "sm90: the work tiles' order and walk (AttentionSM90Config.Schedule): strided, lpt (longest first across the heads; a snake walk with -persistent, else the grid's order) or dynamic (a tile counter; implies -persistent unless -persistent=false is given); default: the library's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *dtype {
	case "bf16":
	case "f16":
		cfg.In = dsl.F16
	default:
		return fmt.Errorf("-dtype %q: want bf16 or f16", *dtype)
	}
	cfg = kernels.DefaultAttentionConfig(cfg.In, *hd, *causal)
	for _, o := range []struct {
		v *int
		f *int
	}{{bm, &cfg.BM}, {bn, &cfg.BN}, {warps, &cfg.Warps}, {stages, &cfg.Stages}} {
		if *o.v > 0 {
			*o.f = *o.v
		}
	}
	// The FA2 configuration is checked where FA2 runs: -bn may name an sm90-only tile.
	if *kernel == "fa2" {
		if err := cfg.Check(); err != nil {
			return err
		}
	}
	if *kvHeads == 0 {
		*kvHeads = *heads
	}
	d, err := jit.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	target := ptx.Target(d.Info().Arch)
	if !target.Valid() {
		target = ptx.SM90
	}
	// sm90For is the sm_90a kernel of a problem: the library's pick for its shape
	// (kernels.AttentionSM90ConfigForShape, as ops.Attention runs it), then the flags given.
	var sm90For func(p attnProblem) (*kernels.AttentionSM90Config, error)
	switch *kernel {
	case "auto", "sm90":
		if d.Info().SM != 90 {
			if *kernel == "sm90" {
				return fmt.Errorf("-kernel sm90: %s is %s; the kernel needs sm_90a", d.Info().Name, d.Info().Arch)
			}
			break
		}
		sm90For = func(p attnProblem) (*kernels.AttentionSM90Config, error) {
			c := kernels.AttentionSM90ConfigForShape(cfg.In, *hd, *causal, p.sq, p.sk)
			persistentSet := false
			var schedErr error
			fs.Visit(func(f *flag.Flag) {
				switch f.Name {
				case "overlap":
					c.Overlap = *overlap
				case "pingpong":
					c.PingPong = *pingPong
				case "persistent":
					c.Persistent, persistentSet = *persistent, true
				case "shiftdiv":
					c.ShiftDivision = *shiftDiv
				case "schedule":
					c.Schedule, schedErr = kernels.ParseAttentionSchedule(*schedule)
				}
			})
			if schedErr != nil {
				return nil, fmt.Errorf("-schedule: %w", schedErr)
			}
			if c.Schedule == kernels.AttentionDynamic && !persistentSet {
				c.Persistent = true
			}
			for _, o := range []struct {
				v *int
				f *int
			}{{bn, &c.BN}, {stages, &c.Stages}, {consumers, &c.Consumers}} {
				if *o.v > 0 {
					*o.f = *o.v
				}
			}
			return &c, c.Check()
		}
		fmt.Printf("device: %s (%s); kernel sm90 (the library's pick per shape unless flags override)\n", d.Info().Name, d.Info().Arch)
	case "fa2":
	default:
		return fmt.Errorf("-kernel %q: want auto, sm90 or fa2", *kernel)
	}
	if sm90For == nil {
		if err := cfg.Check(); err != nil {
			return err
		}
		fmt.Printf("device: %s (%s); kernel %s, %d threads, %d B shared\n", d.Info().Name, d.Info().Arch, cfg.Name(), cfg.Threads(), cfg.SharedBytes())
	}
	for _, s := range strings.Split(*seqs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("-s: bad sequence length %q", s)
		}
		b := *batch
		if *tokens > 0 {
			b = max(*tokens/n, 1)
		}
		p := attnProblem{b: b, h: *heads, hkv: *kvHeads, sq: n, sk: n, d: *hd}
		var sm90 *kernels.AttentionSM90Config
		if sm90For != nil {
			if sm90, err = sm90For(p); err != nil {
				return err
			}
		}
		if err := benchAttention(d, target, cfg, sm90, p, *reps, *dir); err != nil {
			return fmt.Errorf("b %d s %d: %w", b, n, err)
		}
	}
	return nil
}

// attnProblem is one attention shape: batch, heads, K/V heads, query and key lengths,
// head dim.
type attnProblem struct{ b, h, hkv, sq, sk, d int }

// attnRecord is what torch_attention.py reads back.
type attnRecord struct {
	B, H, HKV, SQ, SK, D int
	Causal               bool
	DType                string
	Kernel               string
	KgenUS               float64
	TFLOPS               float64
	SampleErr            float64 // the largest sampled |O - ref| / tolerance
}

// attnFlops is 4*b*h*sq*sk*d (two products), halved for causal (sq = sk).
func attnFlops(p attnProblem, causal bool) float64 {
	f := 4 * float64(p.b) * float64(p.h) * float64(p.sq) * float64(p.sk) * float64(p.d)
	if causal {
		f /= 2
	}
	return f
}

// benchAttention times cfg's kernel on p, or sm90's when it is set (cfg then gives the
// dtype and the mask).
func benchAttention(d *jit.Device, target ptx.Target, cfg kernels.AttentionConfig, sm90 *kernels.AttentionSM90Config, p attnProblem, reps int, dir string) error {
	name := cfg.Name()
	var l90 kernels.AttentionSM90Launch
	kb := dsl.New(name, dsl.WithTarget(target))
	if sm90 != nil {
		var err error
		if l90, err = sm90.LaunchPersistent(p.b, p.h, p.hkv, p.sq, p.sk, d.Info().Multiproc); err != nil {
			return err
		}
		name = sm90.Name()
		kb = dsl.New(name, dsl.WithTarget(ptx.SM90a))
		kernels.AttentionSM90(kb, *sm90)
	} else {
		if err := cfg.CheckShape(p.b, p.h, p.hkv, p.sq, p.sk); err != nil {
			return err
		}
		kernels.Attention(kb, cfg)
	}
	mod, err := kb.Build()
	if err != nil {
		return err
	}
	jm, err := d.Load(jit.Source{Module: mod, Params: map[string][]jit.ParamInfo{name: jit.ParamInfos(kb.Params())}})
	if err != nil {
		return err
	}
	defer jm.Close()
	fn, err := jm.Function(name)
	if err != nil {
		return err
	}
	conv := func(x float32) uint16 {
		if cfg.In == dsl.F16 {
			return uint16(fp.F16Of(x))
		}
		return uint16(fp.BF16Of(x))
	}
	back := func(h uint16) float64 {
		if cfg.In == dsl.F16 {
			return float64(fp.F16(h).Float32())
		}
		return float64(fp.BF16(h).Float32())
	}
	rng := rand.New(rand.NewSource(int64(p.b*31 + p.sq*7 + p.d)))
	host := func(n int) []uint16 {
		v := make([]uint16, n)
		for i := range v {
			v[i] = conv(2*rng.Float32() - 1)
		}
		return v
	}
	nq, nk := p.b*p.sq*p.h*p.d, p.b*p.sk*p.hkv*p.d
	hq, hk, hv := host(nq), host(nk), host(nk)
	var bufs []*jit.Buffer[uint16]
	defer func() {
		for _, x := range bufs {
			x.Free()
		}
	}()
	dev := func(h []uint16, n int) (*jit.Buffer[uint16], error) {
		x, err := jit.Alloc[uint16](d, n)
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, x)
		if h != nil {
			return x, x.CopyFromHost(h)
		}
		return x, nil
	}
	q, err := dev(hq, nq)
	if err != nil {
		return err
	}
	k, err := dev(hk, nk)
	if err != nil {
		return err
	}
	v, err := dev(hv, nk)
	if err != nil {
		return err
	}
	o, err := dev(nil, nq)
	if err != nil {
		return err
	}
	lse, err := jit.Alloc[float32](d, p.b*p.h*p.sq)
	if err != nil {
		return err
	}
	defer lse.Free()
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	scale := 1 / math.Sqrt(float64(p.d))
	lc := jit.LaunchConfig{Grid: jit.D1(cfg.Grid(p.b, p.h, p.sq)), Block: jit.D1(cfg.Threads()), SharedMem: cfg.SharedBytes(), Stream: s}
	ptr := func(x *jit.Buffer[uint16]) jit.AnyPtr { return jit.AnyPtr{Addr: x.DevPtr(), Elem: cfg.In} }
	args := []any{ptr(q), ptr(k), ptr(v), ptr(o), jit.AnyPtr{Addr: lse.DevPtr(), Elem: dsl.F32},
		uint32(p.b), uint32(p.h), uint32(p.hkv), uint32(p.sq), uint32(p.sk), float32(scale)}
	if sm90 != nil {
		lc = jit.LaunchConfig{Grid: jit.D1(l90.Grid), Block: jit.D1(l90.Block), SharedMem: l90.SharedBytes, Stream: s}
		var maps []any
		var free func()
		if cfg.In == dsl.F16 {
			maps, free, err = attnMaps[fp.F16](d, l90, hq, hk, hv)
		} else {
			maps, free, err = attnMaps[fp.BF16](d, l90, hq, hk, hv)
		}
		if err != nil {
			return err
		}
		defer free()
		args = append(args, maps...)
	}
	if sm90 != nil && l90.SchedWords > 0 { // AttentionDynamic's tile counter: zeroed once, the kernel resets it
		sched, err := jit.Alloc[uint32](d, l90.SchedWords)
		if err != nil {
			return err
		}
		defer sched.Free()
		if err := sched.CopyFromHost(make([]uint32, l90.SchedWords)); err != nil {
			return err
		}
		args = append(args, sched)
	}
	t, err := timeIt(d, s, reps, func() error { return fn.Launch(lc, args...) })
	if err != nil {
		return err
	}
	ho := make([]uint16, nq)
	if err := o.CopyToHost(ho); err != nil {
		return err
	}
	hl := make([]float32, p.b*p.h*p.sq)
	if err := lse.CopyToHost(hl); err != nil {
		return err
	}
	worst, err := attnSample(p, cfg, scale, hq, hk, hv, ho, hl, back, rng)
	if err != nil {
		return err
	}
	us := float64(t.Nanoseconds()) / 1e3
	tf := attnFlops(p, cfg.Causal) / t.Seconds() / 1e12
	model := ""
	if sm90 != nil {
		if sum := sm90.ModelKeyTiles(p.b, p.h, p.sq, p.sk, d.Info().Multiproc); len(sum) > 0 {
			model = fmt.Sprintf("; key tiles per SM max/mean %.3f (cost model, %d SMs)", maxOverMean(sum), d.Info().Multiproc)
		}
	}
	fmt.Printf("attention %s b %d h %d/%d s %d d %d %s causal %v: kgen %9.1f us %6.1f TFLOP/s (median of %d), sampled error %.3g of tolerance%s\n",
		name, p.b, p.h, p.hkv, p.sq, p.d, cfg.In, cfg.Causal, us, tf, reps, worst, model)
	if dir == "" {
		return nil
	}
	sub := filepath.Join(dir, fmt.Sprintf("b%d_h%d_hkv%d_s%d_d%d", p.b, p.h, p.hkv, p.sq, p.d))
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return err
	}
	for name, x := range map[string][]uint16{"q.bin": hq, "k.bin": hk, "v.bin": hv, "o.bin": ho} {
		if err := os.WriteFile(filepath.Join(sub, name), unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 2*len(x)), 0o644); err != nil {
			return err
		}
	}
	rec, _ := json.Marshal(attnRecord{B: p.b, H: p.h, HKV: p.hkv, SQ: p.sq, SK: p.sk, D: p.d, Causal: cfg.Causal,
		DType: cfg.In.String(), Kernel: name, KgenUS: us, TFLOPS: tf, SampleErr: worst})
	return os.WriteFile(filepath.Join(sub, "kgen.json"), rec, 0o644)
}

// maxOverMean is the largest of sum over its mean.
func maxOverMean(sum []int) float64 {
	total, most := 0, 0
	for _, x := range sum {
		total += x
		most = max(most, x)
	}
	if total == 0 {
		return 1
	}
	return float64(most) * float64(len(sum)) / float64(total)
}

// attnMaps returns the sm_90a attention's tensor maps of Q, K and V (l's specs) over
// typed device copies of hq, hk and hv (16-bit bits of T), and a function freeing them.
func attnMaps[T fp.BF16 | fp.F16](d *jit.Device, l kernels.AttentionSM90Launch, hq, hk, hv []uint16) ([]any, func(), error) {
	var bufs []*jit.Buffer[T]
	free := func() {
		for _, b := range bufs {
			b.Free()
		}
	}
	var maps []any
	for _, x := range []struct {
		h    []uint16
		spec kernels.AttentionTMASpec
	}{{hq, l.Q}, {hk, l.K}, {hv, l.V}} {
		b, err := jit.Alloc[T](d, len(x.h))
		if err != nil {
			free()
			return nil, nil, err
		}
		bufs = append(bufs, b)
		if err := b.CopyFromHost(unsafe.Slice((*T)(unsafe.Pointer(&x.h[0])), len(x.h))); err != nil {
			free()
			return nil, nil, err
		}
		m, err := jit.NewTensorMap(b, x.spec.Dims[:], x.spec.Strides[:], x.spec.Box[:], jit.Swizzle(x.spec.Swizzle))
		if err != nil {
			free()
			return nil, nil, err
		}
		maps = append(maps, m)
	}
	return maps, free, nil
}

// attnSample checks 64 random (batch, head, query) rows of O and LSE against float64
// (tolerance as kernels/ref's AttentionTolerance: P rounded to the input type) and returns
// the worst error relative to the tolerance; an error when one is outside.
func attnSample(p attnProblem, cfg kernels.AttentionConfig, scale float64, hq, hk, hv, ho []uint16, hl []float32, back func(uint16) float64, rng *rand.Rand) (float64, error) {
	worst := 0.0
	sc := make([]float64, p.sk)
	for n := 0; n < 64; n++ {
		b, h, i := rng.Intn(p.b), rng.Intn(p.h), rng.Intn(p.sq)
		hk2 := h / (p.h / p.hkv)
		qo := ((b*p.sq+i)*p.h + h) * p.d
		kv := func(j int) int { return ((b*p.sk+j)*p.hkv + hk2) * p.d }
		keys := p.sk
		if cfg.Causal {
			keys = max(0, min(p.sk, i+p.sk-p.sq+1))
		}
		w, err := attnRowCheck(cfg.In, p.d, keys, scale,
			func(c int) float64 { return back(hq[qo+c]) },
			func(j, c int) float64 { return back(hk[kv(j)+c]) },
			func(j, c int) float64 { return back(hv[kv(j)+c]) },
			func(c int) float64 { return back(ho[qo+c]) },
			float64(hl[(b*p.h+h)*p.sq+i]), sc)
		worst = max(worst, w)
		if err != nil {
			return worst, fmt.Errorf("sampled row (b %d, s %d, h %d): %w", b, i, h, err)
		}
	}
	return worst, nil
}

// attnRowCheck checks one query row of attention against float64: o (d values) and lse
// against softmax(scale * q·k_j) · v_j over the keys j < keys, O within kernels/ref's
// AttentionTolerance for inputs of in and the LSE within 1e-5 relative. It returns the
// worst O error relative to its tolerance, and an error naming the first value outside.
// sc is scratch of at least keys values. A row with no key has nothing to check.
func attnRowCheck(in dsl.Type, d, keys int, scale float64, q func(c int) float64, k, v func(j, c int) float64, o func(c int) float64, lse float64, sc []float64) (float64, error) {
	if keys == 0 {
		return 0, nil
	}
	m := math.Inf(-1)
	for j := 0; j < keys; j++ {
		x := 0.0
		for c := 0; c < d; c++ {
			x += q(c) * k(j, c)
		}
		sc[j] = x * scale
		m = math.Max(m, sc[j])
	}
	l := 0.0
	for j := 0; j < keys; j++ {
		sc[j] = math.Exp(sc[j] - m)
		l += sc[j]
	}
	worst := 0.0
	for c := 0; c < d; c++ {
		x, abs := 0.0, 0.0
		for j := 0; j < keys; j++ {
			x += sc[j] * v(j, c)
			abs += sc[j] * math.Abs(v(j, c))
		}
		x, abs = x/l, abs/l
		tol := ref.AttentionTolerance(in, abs, x)
		e := math.Abs(o(c)-x) / tol
		worst = math.Max(worst, e)
		if !(e <= 1) {
			return worst, fmt.Errorf("output at d %d = %v, want %v (tolerance %.3g)", c, o(c), x, tol)
		}
	}
	if want := m + math.Log(l); !(math.Abs(lse-want)/(1e-5*(1+math.Abs(want))) <= 1) {
		return worst, fmt.Errorf("the LSE = %v, want %v", lse, want)
	}
	return worst, nil
}
