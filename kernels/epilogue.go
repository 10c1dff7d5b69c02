package kernels

import (
	"fmt"
	"math"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/excerpt"
)

// EpilogueFunc is a GEMM epilogue written in Go: the gemm's builder calls it at build time,
// inside its epilogue, once per run of adjacent output values a thread stores (a pair of
// columns in gemm_sm90, a 16-byte run in the mma.sync gemm), and stores what it returns.
// f.V holds the run's values, f32, after alpha*acc + beta*C; the function returns as many
// f32 values (the gemm converts them to Out and stores them with one vector store).
type EpilogueFunc func(f *EpilogueFrag) []dsl.Value

// EpilogueHook declares a user-written epilogue: GemmSM90With and GemmWith call it once at
// build time, after the gemm's own parameters are declared, so that it may declare the
// epilogue's parameters (dsl.Params of an Args struct, out being the gemm's output type),
// and it returns the EpilogueFunc that uses them. The library's Epilogue options are such
// hooks.
type EpilogueHook func(k *dsl.Kernel, out dsl.Type) EpilogueFunc

// EpilogueFrag is one run of adjacent output values in a GEMM epilogue: V[i] is the value
// of D[Row, Col+i]. At the edges of D a run may lie partly or wholly outside it (past M or
// N): what the function returns there is stored nowhere, and the loads below stay inside
// their operands (reading zero, or the nearest row, there), so that an EpilogueFunc needs no
// edge code of its own. Loads of its own must guard the same way.
type EpilogueFrag struct {
	K        *dsl.Kernel
	V        []dsl.Value // f32: alpha*acc + beta*C
	Row, Col dsl.Value   // u32 global coordinates of V[0]
	M, N     dsl.Value   // u32: D is M x N
	Out      dsl.Type    // D's element type
	ld       epiLoader
}

// epiLoader is how one gemm epilogue reads the operands of an EpilogueFrag: its loads are
// vectorized and predicated the way that epilogue's stores are.
type epiLoader interface {
	// cols reads p[col .. col+n) of a row vector of N elements.
	cols(p dsl.Ptr, n int) []dsl.Value
	// tile reads p[row, col .. col+n) of a row-major M x N matrix.
	tile(p dsl.Ptr, n int) []dsl.Value
	// row reads p[row] of a column vector of M elements.
	row(p dsl.Ptr) dsl.Value
	// colsKeyed is cols, whose result the loader may keep under key for another run of the
	// same columns (the library's options key their vectors).
	colsKeyed(key string, p dsl.Ptr, n int) []dsl.Value
}

// epiKey names a kept column load: the vector's key and the run's column offset.
type epiKey struct {
	key string
	off int
}

// Cols reads p[Col+i] for each value of the run, from a vector of N elements (a per-column
// bias or scale), converted to f32: one vector load where the run allows.
func (f *EpilogueFrag) Cols(p dsl.Ptr) []dsl.Value {
	if !f.made("Cols", p) {
		return f.values()
	}
	return epiF32s(f.ld.cols(p, len(f.V)))
}

// Tile reads p[Row, Col+i] for each value of the run, from a row-major M x N matrix (a
// residual), converted to f32: one vector load where the run allows.
func (f *EpilogueFrag) Tile(p dsl.Ptr) []dsl.Value {
	if !f.made("Tile", p) {
		return f.values()
	}
	return epiF32s(f.ld.tile(p, len(f.V)))
}

// RowOf reads p[Row] of a vector of M elements (a per-row scale), converted to f32.
func (f *EpilogueFrag) RowOf(p dsl.Ptr) dsl.Value {
	if !f.made("RowOf", p) {
		if f == nil {
			return dsl.Value{}
		}
		return f.Row
	}
	return f.ld.row(p).To(dsl.F32)
}

// made reports a fragment a gemm's epilogue made (which knows how to load); else it records
// the misuse in the kernel of f, of its values or of p, so that the build fails.
func (f *EpilogueFrag) made(what string, p dsl.Ptr) bool {
	if f == nil {
		if k := p.Kernel(); k != nil {
			k.Errorf("EpilogueFrag.%s: a nil *EpilogueFrag", what)
		}
		return false
	}
	if f.ld != nil {
		return true
	}
	k := f.K
	for _, v := range append([]dsl.Value{f.Row, f.Col}, f.V...) {
		if k == nil {
			k = v.Kernel()
		}
	}
	if k == nil {
		k = p.Kernel()
	}
	if k != nil {
		k.Errorf("EpilogueFrag.%s: the fragment was not made by a gemm's epilogue (only those can load)", what)
	}
	return false
}

// values is f.V (nil for a nil f).
func (f *EpilogueFrag) values() []dsl.Value {
	if f == nil {
		return nil
	}
	return f.V
}

func epiF32s(v []dsl.Value) []dsl.Value {
	out := make([]dsl.Value, len(v))
	for i, x := range v {
		out[i] = x.To(dsl.F32)
	}
	return out
}

// Activation is an element-wise function of a GEMM epilogue.
type Activation int

// The activations.
const (
	ActNone Activation = iota
	// ReLU is max(v, 0) (max.f32: a NaN gives 0).
	ReLU
	// GELU is the tanh approximation, 0.5*v*(1 + tanh(sqrt(2/pi)*(v + 0.044715*v^3))) (torch's
	// gelu(approximate="tanh")), with tanh.approx.f32 (error about 2^-11): within 2^-12*|v| of
	// the exact value (see SiLU).
	GELU
	// SiLU is v*sigmoid(v) = h + h*tanh(h) with h = v/2, on one tanh.approx.f32 (error about
	// 2^-11) and an FMA: within 2^-12*|v| of the exact value, less than the rounding of v
	// itself to bf16 (2^-9*|v|), which is what torch's eager matmul-then-silu computes from.
	// The special-function unit's throughput is what an epilogue's activation costs: the
	// exact form, ex2.approx and rcp.approx, would take two. For v below about -8 the result
	// (under 3e-3 in magnitude) is dominated by that error.
	SiLU
)

func (a Activation) String() string {
	switch a {
	case ActNone:
		return "none"
	case ReLU:
		return "relu"
	case GELU:
		return "gelu"
	case SiLU:
		return "silu"
	}
	return fmt.Sprintf("Activation(%d)", int(a))
}

// ParseActivation returns the activation named s (none, relu, gelu, silu).
func ParseActivation(s string) (Activation, error) {
	for a := ActNone; a <= SiLU; a++ {
		if a.String() == s {
			return a, nil
		}
	}
	return ActNone, fmt.Errorf("activation %s: want none, relu, gelu or silu", excerpt.Quote(s))
}

// Apply emits the activation of v (f32) into v's kernel (a value of another type is an
// error recorded there).
func (a Activation) Apply(v dsl.Value) dsl.Value {
	if v.Kernel() == nil {
		return v
	}
	switch a {
	case ReLU:
		return v.Max(float32(0))
	case SiLU:
		h := v.Mul(float32(0.5))
		return v.Kernel().FMA(h, h.Tanh(), h)
	case GELU:
		// u = v*(c0 + c1*v^2) = sqrt(2/pi)*(v + 0.044715*v^3)
		c0 := math.Sqrt(2 / math.Pi)
		k := v.Kernel()
		u := v.Mul(k.FMA(v.Mul(v), k.Const(dsl.F32, float32(c0*0.044715)), k.Const(dsl.F32, float32(c0))))
		h := v.Mul(float32(0.5))
		return k.FMA(h, u.Tanh(), h)
	}
	return v
}

// Epilogue selects the library's GEMM epilogue options; the zero value is the plain
// D = alpha*A*B + beta*C. Each value of D is, in this order:
//
//	v = alpha*acc                              (acc: the f32 sum over K)
//	v = v * scaleA[row] * scaleB[col]          (Scales: fp8 row-wise scales)
//	v = v + beta*C[row, col]                   (when beta != 0)
//	v = v + bias[col]                          (Bias)
//	v = Act(v)
//	v = v + residual[row, col]                 (Residual)
//	D[row, col] = v converted to Out
//
// bias, scaleA (M values) and scaleB (N values) are f32 vectors; residual is an M x N
// row-major matrix of Out elements (it may be D itself). They are the kernel parameters
// GemmEpilogueArgs, after the gemm's own.
type Epilogue struct {
	Scales   bool
	Bias     bool
	Act      Activation
	Residual bool
}

// IsZero reports the plain epilogue (no options).
func (e Epilogue) IsZero() bool { return e == Epilogue{} }

// String names the options joined by "+" ("bias+silu+residual"), "none" for the zero value.
func (e Epilogue) String() string {
	var s []string
	if e.Scales {
		s = append(s, "scales")
	}
	if e.Bias {
		s = append(s, "bias")
	}
	if e.Act != ActNone {
		s = append(s, e.Act.String())
	}
	if e.Residual {
		s = append(s, "residual")
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "+")
}

// ParseEpilogue reads String's form: options joined by "+" or ","; "" and "none" are the
// zero value.
func ParseEpilogue(s string) (Epilogue, error) {
	var e Epilogue
	if s == "" || s == "none" {
		return e, nil
	}
	if strings.HasPrefix(s, "+") || strings.HasPrefix(s, ",") || strings.HasSuffix(s, "+") || strings.HasSuffix(s, ",") ||
		strings.Contains(s, "++") || strings.Contains(s, ",,") || strings.Contains(s, "+,") || strings.Contains(s, ",+") {
		return Epilogue{}, fmt.Errorf("epilogue %s: an empty option (options are joined by one + or ,)", excerpt.Quote(s))
	}
	seen := map[string]bool{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == '+' || r == ',' }) {
		name := f
		if name == "res" {
			name = "residual"
		}
		if seen[name] {
			return Epilogue{}, fmt.Errorf("epilogue %s: option %s twice", excerpt.Quote(s), excerpt.Quote(name))
		}
		seen[name] = true
		switch f {
		case "scales":
			e.Scales = true
		case "bias":
			e.Bias = true
		case "residual", "res":
			e.Residual = true
		default:
			a, err := ParseActivation(f)
			if err != nil || a == ActNone {
				return Epilogue{}, fmt.Errorf("epilogue %s: option %s: want scales, bias, relu, gelu, silu or residual", excerpt.Quote(s), excerpt.Quote(f))
			}
			if e.Act != ActNone && e.Act != a {
				return Epilogue{}, fmt.Errorf("epilogue %s: two activations (%s and %s)", excerpt.Quote(s), e.Act, a)
			}
			e.Act = a
		}
	}
	return e, nil
}

// suffix is the options' part of a kernel name: "" for the zero value, else "_ep_" and the
// options joined by "_".
func (e Epilogue) suffix() string {
	if e.IsZero() {
		return ""
	}
	return "_ep_" + strings.ReplaceAll(e.String(), "+", "_")
}

// check reports options the kernel of what cannot apply: an unknown activation, scales
// without fp8 inputs.
func (e Epilogue) check(what string, fp8 bool) error {
	switch {
	case e.Act < ActNone || e.Act > SiLU:
		return fmt.Errorf("%s: Epilogue.Act %d: want ActNone, ReLU, GELU or SiLU", what, int(e.Act))
	case e.Scales && !fp8:
		return fmt.Errorf("%s: Epilogue.Scales (row-wise scaleA[row]*scaleB[col]) needs fp8 inputs (e4m3 or e5m2, gemm_sm90)", what)
	}
	return nil
}

// GemmEpilogueArgs are the parameters a non-zero Epilogue adds after the gemm's own (after
// GemmOut, and after GemmSM90StoreArgs with TMAStore): every field is declared whatever the
// options, and those the options do not use may be null.
type GemmEpilogueArgs struct {
	Bias     dsl.Ptr `kgen:"f32"` // N values (Epilogue.Bias)
	ScaleA   dsl.Ptr `kgen:"f32"` // M values (Epilogue.Scales)
	ScaleB   dsl.Ptr `kgen:"f32"` // N values (Epilogue.Scales)
	Residual dsl.Ptr // M x N of Out, row-major (Epilogue.Residual)
}

// epiPlan is what a gemm's epilogue applies: scale before beta*C (the library's fp8 scales),
// rowv loaded once per row for it; post after (a hook's EpilogueFunc). nil: the plain
// epilogue.
type epiPlan struct {
	rowv  func(ld epiLoader) []dsl.Value
	scale func(f *EpilogueFrag, rowv []dsl.Value) []dsl.Value
	post  EpilogueFunc
	// keyed are the per-column vectors the plan reads with colsKeyed (scaleB, bias), which
	// the sm_90a epilogues load at the start of each tile, before its mainloop (epiPre), or
	// several column pairs ahead (prefetchPairs).
	keyed []epiCol
	// lin, set for the library's options without Scales, is how the sm_90a epilogues apply
	// them in fewer instructions.
	lin *epiLin
}

// epiCol is a per-column f32 vector a plan reads under key; epiLin's bias pairs are its
// values times scale (1 but for SiLU's bias).
type epiCol struct {
	key   string
	p     dsl.Ptr
	scale float32
}

// epiLin is the library's epilogue without Scales in fused form: the value before the
// activation is one FMA per value, h = acc*(alpha*scale) + bias[col]*scale (+
// (beta*scale)*C), and act takes h = scale*v. SiLU's scale is 1/2: silu(v) = h + h*tanh(h)
// with h = v/2, one FMA, a tanh and an FMA in all, where alpha*acc, + bias and /2 were three
// instructions. (The scaling by 1/2 is exact; h rounds once where v rounded twice.)
type epiLin struct {
	bias  *epiCol // nil: no bias
	scale float32
	act   Activation
	// post adds the residual (when the options have one) to the activation's values.
	post func(f *EpilogueFrag, v []dsl.Value) []dsl.Value
}

// pair returns the epilogue's values of one pair of accumulators acc (f32): h = FMA(acc,
// alphaS, b) (b the pair's bias times scale; nil: none), + betaS*c (c nil: beta is 0), then
// the activation and the residual (f's loads).
func (l *epiLin) pair(f *EpilogueFrag, acc []dsl.Value, alphaS, betaS dsl.Value, b, c []dsl.Value) []dsl.Value {
	k := f.K
	v := make([]dsl.Value, len(acc))
	for i, x := range acc {
		if b != nil {
			v[i] = k.FMA(x, alphaS, b[i])
		} else {
			v[i] = x.Mul(alphaS)
		}
		if c != nil {
			v[i] = k.FMA(c[i].To(dsl.F32), betaS, v[i])
		}
		if l.act == SiLU && l.scale == 0.5 {
			v[i] = k.FMA(v[i], v[i].Tanh(), v[i])
		} else {
			v[i] = l.act.Apply(v[i])
		}
	}
	if l.post != nil {
		f.V = v
		v = l.post(f, v)
	}
	return v
}

// epiScaled returns b times s (b itself for s 1).
func epiScaled(b []dsl.Value, s float32) []dsl.Value {
	if s == 1 || b == nil {
		return b
	}
	out := make([]dsl.Value, len(b))
	for i, x := range b {
		out[i] = x.Mul(s)
	}
	return out
}

// keyedCols is how many per-column f32 vectors the options read (bias, scaleB): what the
// TMA-store epilogue stages in shared memory per tile.
func (e Epilogue) keyedCols() int {
	n := 0
	if e.Bias {
		n++
	}
	if e.Scales {
		n++
	}
	return n
}

// epiPre is what a tile's epilogue loaded at the tile's start (gemmSM90EpiloguePreload):
// its plan's keyed vectors at the tile's columns, their latency under the mainloop.
type epiPre struct {
	// regs (the register epilogue): the thread's column pairs, by key and column offset.
	regs map[epiKey][]dsl.Value
	// share (the TMA-store epilogue): per keyed vector, the thread's elements of the tile's
	// columns (t + 128i), which the epilogue stages in shared memory.
	share [][]dsl.Value
}

// prefetchPairs loads the plan's keyed vectors for the thread's column pairs j0..j1-1
// (columns col+8j, col+8j+1; a pair is inside N or outside it) into cache, each guarded by
// its pair being inside N, before any is used: their latencies overlap instead of one per
// pair (the colsKeyed calls then find them).
func (p *epiPlan) prefetchPairs(k *dsl.Kernel, cache map[epiKey][]dsl.Value, col, n dsl.Value, j0, j1 int) {
	if p == nil || cache == nil {
		return
	}
	for _, c := range p.keyed {
		for j := j0; j < j1; j++ {
			ck := epiKey{c.key, 8 * j}
			if _, ok := cache[ck]; ok {
				continue
			}
			cache[ck] = sm90LoadIf(k, c.p.At(col).At(8*j), 2, col.Add(uint32(8*j)).Lt(n))
		}
	}
}

// epiPrefetchPairs is how many column pairs the sm_90a register epilogue loads ahead at
// once. The TMA-store epilogue does not: with 128 accumulators a thread, the registers of
// the loads ahead cost it more than their latency (bias+SiLU at 8192x4096x4096 on an H100:
// 0.911 of the plain gemm's speed with them, 0.981 without).
const epiPrefetchPairs = 8

// plan declares e's parameters into k (after the gemm's) and returns its plan; nil for the
// zero value.
func (e Epilogue) plan(k *dsl.Kernel, out dsl.Type) *epiPlan {
	if e.IsZero() {
		return nil
	}
	a := dsl.Params[GemmEpilogueArgs](k, out)
	p := &epiPlan{}
	if e.Scales {
		p.keyed = append(p.keyed, epiCol{"scale_b", a.ScaleB, 1})
		p.rowv = func(ld epiLoader) []dsl.Value { return []dsl.Value{ld.row(a.ScaleA)} }
		p.scale = func(f *EpilogueFrag, rowv []dsl.Value) []dsl.Value {
			sb := epiF32s(f.ld.colsKeyed("scale_b", a.ScaleB, len(f.V)))
			v := make([]dsl.Value, len(f.V))
			for i := range v {
				v[i] = f.V[i].Mul(rowv[0]).Mul(sb[i])
			}
			return v
		}
	}
	if !e.Scales {
		p.lin = &epiLin{scale: 1, act: e.Act}
		if e.Act == SiLU {
			p.lin.scale = 0.5
		}
		if e.Residual {
			p.lin.post = func(f *EpilogueFrag, v []dsl.Value) []dsl.Value {
				r := f.Tile(a.Residual)
				out := make([]dsl.Value, len(v))
				for i := range v {
					out[i] = v[i].Add(r[i])
				}
				return out
			}
		}
	}
	if e.Bias {
		s := float32(1)
		if p.lin != nil {
			s = p.lin.scale
		}
		b := epiCol{"bias", a.Bias, s}
		p.keyed = append(p.keyed, b)
		if p.lin != nil {
			p.lin.bias = &b
		}
	}
	if e.Bias || e.Act != ActNone || e.Residual {
		p.post = func(f *EpilogueFrag) []dsl.Value {
			v := append([]dsl.Value(nil), f.V...)
			if e.Bias {
				b := epiF32s(f.ld.colsKeyed("bias", a.Bias, len(f.V)))
				for i := range v {
					v[i] = v[i].Add(b[i])
				}
			}
			for i := range v {
				v[i] = e.Act.Apply(v[i])
			}
			if e.Residual {
				r := f.Tile(a.Residual)
				for i := range v {
					v[i] = v[i].Add(r[i])
				}
			}
			return v
		}
	}
	return p
}

// hookPlan is a user hook's plan: its parameters declared now, its function applied after
// beta*C.
func hookPlan(k *dsl.Kernel, out dsl.Type, h EpilogueHook) *epiPlan {
	f := h(k, out)
	if f == nil {
		k.Errorf("gemm epilogue: the hook returned a nil EpilogueFunc")
		return nil
	}
	return &epiPlan{post: f}
}

// apply runs the plan's post stage on f (whose V holds the values after beta*C) and checks
// what the function returned.
func (p *epiPlan) apply(f *EpilogueFrag) []dsl.Value {
	if p == nil || p.post == nil {
		return f.V
	}
	out := p.post(f)
	if len(out) != len(f.V) {
		f.K.Errorf("gemm epilogue: the EpilogueFunc returned %d values for a run of %d", len(out), len(f.V))
		return f.V
	}
	for i, v := range out {
		if v.Kernel() == nil {
			f.K.Errorf("gemm epilogue: the EpilogueFunc's value %d is the zero dsl.Value; want an f32 value of the kernel", i)
			return f.V
		}
		if v.Type() != dsl.F32 {
			f.K.Errorf("gemm epilogue: the EpilogueFunc's value %d is %s; want f32 (the gemm converts to Out)", i, v.Type())
			return f.V
		}
	}
	return out
}
