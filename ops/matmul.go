package ops

import (
	"context"
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
	"github.com/kgen-dev/kgen/tune"
)

// MatmulOptions are Matmul's less common settings. A nil *MatmulOptions means Alpha 1, Beta
// 0 and the device's target.
type MatmulOptions[TO jit.Elem] struct {
	// Alpha and Beta scale the product and C: D = Alpha*A*B + Beta*C (both as given: set
	// Alpha, 0 is a valid scale). For fp8 inputs Alpha is also where the inputs' scales go.
	Alpha, Beta float32
	// C is read when Beta is not 0: M x N, contiguous and 16-byte aligned like D (it may be
	// D itself).
	C Tensor[TO]
	// Target overrides the target the kernel is chosen and built for ("" means the
	// device's: sm_90a on compute capability 9.0, the emulator included; its architecture
	// elsewhere).
	Target ptx.Target

	// The epilogue (kernels.Epilogue, fused into the gemm's stores), applied in this order
	// to v = Alpha*acc:
	//
	//	v = v * ScaleA[row] * ScaleB[col]   (ScaleA and ScaleB set: fp8 inputs' row-wise scales)
	//	v = v + Beta*C[row, col]
	//	v = v + Bias[col]                   (Bias set)
	//	v = Act(v)                          (ReLU; GELU and SiLU on tanh.approx: within 2^-12*|v|)
	//	v = v + Residual[row, col]          (Residual set)
	//
	// Bias and ScaleB are vectors of N f32 values, ScaleA of M; Residual is M x N like D
	// (it may be D itself). Each is contiguous and starts on 16 bytes; a zero Tensor is
	// unset.
	Bias, ScaleA, ScaleB Tensor[float32]
	Act                  kernels.Activation
	Residual             Tensor[TO]
}

// epilogue checks o's epilogue operands for an M x N product on dev and returns the options
// and their pointers in kernels.GemmEpilogueArgs' order (null where unset; the list is
// passed only when the options are not zero).
func (o *MatmulOptions[TO]) epilogue(op string, dev *jit.Device, m, n int) (kernels.Epilogue, [4]jit.AnyPtr, error) {
	var e kernels.Epilogue
	null := jit.AnyPtr{Elem: ptx.F32}
	ptrs := [4]jit.AnyPtr{null, null, null, {Elem: jit.ElemType[TO]()}}
	if o == nil {
		return e, ptrs, nil
	}
	vec := func(name string, t Tensor[float32], want int) (jit.AnyPtr, error) {
		if err := sameDevice(op, name, dev, t); err != nil {
			return null, err
		}
		if t.rank != 1 || t.shape[0] != want {
			return null, fmt.Errorf("ops: %s: %s has shape %v; want [%d]", op, name, t.Shape(), want)
		}
		if err := contiguous(op, name, "the gemm epilogue", t); err != nil {
			return null, err
		}
		if err := need16(op, name, "the gemm epilogue", t); err != nil {
			return null, err
		}
		return ptrOf(t), nil
	}
	var err error
	if o.Bias.buf != nil {
		e.Bias = true
		if ptrs[0], err = vec("Bias", o.Bias, n); err != nil {
			return e, ptrs, err
		}
	}
	if (o.ScaleA.buf != nil) != (o.ScaleB.buf != nil) {
		return e, ptrs, fmt.Errorf("ops: %s: set both ScaleA (M values) and ScaleB (N values), or neither", op)
	}
	if o.ScaleA.buf != nil {
		e.Scales = true
		if ptrs[1], err = vec("ScaleA", o.ScaleA, m); err != nil {
			return e, ptrs, err
		}
		if ptrs[2], err = vec("ScaleB", o.ScaleB, n); err != nil {
			return e, ptrs, err
		}
	}
	if o.Act < kernels.ActNone || o.Act > kernels.SiLU {
		return e, ptrs, fmt.Errorf("ops: %s: MatmulOptions.Act %d: want ActNone, ReLU, GELU or SiLU", op, int(o.Act))
	}
	e.Act = o.Act
	if o.Residual.buf != nil {
		e.Residual = true
		if err := sameDevice(op, "Residual", dev, o.Residual); err != nil {
			return e, ptrs, err
		}
		if o.Residual.rank != 2 || o.Residual.shape[0] != m || o.Residual.shape[1] != n {
			return e, ptrs, fmt.Errorf("ops: %s: Residual has shape %v; want [%d %d] (D's)", op, o.Residual.Shape(), m, n)
		}
		if err := contiguous(op, "Residual", "the gemm epilogue", o.Residual); err != nil {
			return e, ptrs, err
		}
		if err := need16(op, "Residual", "the gemm epilogue", o.Residual); err != nil {
			return e, ptrs, err
		}
		ptrs[3] = ptrOf(o.Residual)
	}
	return e, ptrs, nil
}

// The gemm kernels' argument lists (plan.kind).
const (
	gemmMMA  = iota // a, b, m, n, k, alpha, beta, c, d
	gemmSM90        // tmA, tmB, m, n, k, alpha, beta, c, d (, tmD)
)

// Matmul computes D = alpha*A*B + beta*C with f32 accumulation for A (M x K) and B (K x N)
// of f16, bf16 or e4m3 (fp.F16, fp.BF16, fp.E4M3) and C, D (M x N) of f16, bf16 or f32.
//
// On sm_90a (compute capability 9.0) it runs gemm_sm90 (TMA + wgmma) in the configuration
// `kgen tune` cached for the device and shape (tune.GemmConfig), else the one
// kernels.GemmSM90For picks for the shape and the device's multiprocessors, when N and K are
// multiples of 8 (16 for an fp8 K), A is row-major with rows a multiple of 16 bytes apart,
// and B is row-major (K x N; 16-bit inputs) or column-major (the N x K row-major B of fp8,
// as torch._scaled_mm takes it; Tensor.Transpose of an N x K matrix) with rows or columns a
// multiple of 16 bytes apart. Elsewhere, and for 16-bit layouts gemm_sm90 cannot read, it
// runs the mma.sync gemm (kernels.GemmConfig), which takes dense row- or column-major A and
// B of f16 or bf16. Every operand starts on 16 bytes; C and D are dense row-major.
func Matmul[TI, TO jit.Elem](ctx context.Context, s *jit.Stream, d Tensor[TO], a, b Tensor[TI], o *MatmulOptions[TO]) error {
	const op = "Matmul"
	if err := begin(ctx, op); err != nil {
		return err
	}
	in, out := jit.ElemType[TI](), jit.ElemType[TO]()
	if err := dtypeIn(op, "A", in, ptx.F16, ptx.BF16, ptx.E4M3); err != nil {
		return err
	}
	if err := dtypeIn(op, "D", out, ptx.F16, ptx.BF16, ptx.F32); err != nil {
		return err
	}
	dev, err := deviceOf(op, "D", d)
	if err != nil {
		return err
	}
	if err := sameDevice(op, "A", dev, a); err != nil {
		return err
	}
	if err := sameDevice(op, "B", dev, b); err != nil {
		return err
	}
	m, k, err := matrix(op, "A", a)
	if err != nil {
		return err
	}
	kb, n, err := matrix(op, "B", b)
	if err != nil {
		return err
	}
	if kb != k {
		return fmt.Errorf("ops: %s: A is %d x %d, B %d x %d: B's rows must match A's columns (K)", op, m, k, kb, n)
	}
	if _, _, err := matrix(op, "D", d); err != nil {
		return err
	}
	if d.shape[0] != m || d.shape[1] != n {
		return fmt.Errorf("ops: %s: D is %v; want [%d %d] (A's rows by B's columns)", op, d.Shape(), m, n)
	}
	alpha, beta, target := float32(1), float32(0), ptx.Target("")
	if o != nil {
		alpha, beta, target = o.Alpha, o.Beta, o.Target
	}
	if err := contiguous(op, "D", "the gemm epilogue", d); err != nil {
		return err
	}
	if err := need16(op, "D", "the gemm", d); err != nil {
		return err
	}
	c := ptrOf(d)
	if beta != 0 {
		if err := sameDevice(op, "C (Beta is not 0)", dev, o.C); err != nil {
			return err
		}
		if err := sameShape(op, "C", o.C, "D", d); err != nil {
			return err
		}
		if err := contiguous(op, "C", "the gemm epilogue", o.C); err != nil {
			return err
		}
		if err := need16(op, "C", "the gemm", o.C); err != nil {
			return err
		}
		c = ptrOf(o.C)
	}
	epi, epiPtrs, err := o.epilogue(op, dev, m, n)
	if err != nil {
		return err
	}
	if epi.Scales && in != ptx.E4M3 {
		return fmt.Errorf("ops: %s: ScaleA and ScaleB are the row-wise scales of fp8 (e4m3) inputs; A is %s", op, in)
	}
	if err := need16(op, "A", "the gemm", a); err != nil {
		return err
	}
	if err := need16(op, "B", "the gemm", b); err != nil {
		return err
	}
	st := stateOf(dev)
	if target == "" {
		target = st.gemm
	} else if !target.Valid() {
		return fmt.Errorf("ops: %s: MatmulOptions.Target %s is not a target kgen knows", op, excerpt.Quote(string(target)))
	}
	// Layouts: rows or columns contiguous, and their distance (the leading dimension).
	aL, lda := layoutOf(a)
	bL, ldb := layoutOf(b)
	key := planKey{op: "matmul", in: in, out: out, dims: [3]int{m, n, k}, lds: [4]int{lda, ldb, int(aL), int(bL)}, target: target, epi: epi}
	if err := streamOn(op, s, dev); err != nil {
		return err
	}
	// D is written while every other operand is read: none may share D's bytes, but C and
	// Residual may be D itself, whole (each element reads its own before it is written).
	if err := apart(op, "A", a, "D", d, false); err != nil {
		return err
	}
	if err := apart(op, "B", b, "D", d, false); err != nil {
		return err
	}
	if beta != 0 {
		if err := apart(op, "C", o.C, "D", d, true); err != nil {
			return err
		}
	}
	if o != nil {
		for _, v := range []struct {
			name string
			t    Tensor[float32]
		}{{"Bias", o.Bias}, {"ScaleA", o.ScaleA}, {"ScaleB", o.ScaleB}} {
			if err := apart(op, v.name, v.t, "D", d, false); err != nil {
				return err
			}
		}
		if err := apart(op, "Residual", o.Residual, "D", d, true); err != nil {
			return err
		}
	}
	p := st.lookup(key)
	if p == nil {
		if p, err = planMatmul(ctx, st, key); err != nil {
			if _, ok := err.(refusal); ok {
				return fmt.Errorf("ops: %s: %w", op, err)
			}
			return planFailed(op, dev, err)
		}
	}
	lc := jit.LaunchConfig{Grid: jit.D1(p.grid), Block: jit.D1(p.block), SharedMem: p.shared, Stream: s, Context: ctx}
	if p.cluster > 1 {
		lc.Cluster = jit.D1(p.cluster)
	}
	ak := argKey{
		ptr:    [8]jit.DevicePtr{a.Ptr(), b.Ptr(), c.Addr, d.Ptr(), epiPtrs[0].Addr, epiPtrs[1].Addr, epiPtrs[2].Addr, epiPtrs[3].Addr},
		scalar: [2]uint64{uint64(math.Float32bits(alpha)), uint64(math.Float32bits(beta))},
	}
	if p.kind == gemmSM90 {
		ak.mem = [3]*jit.Memory{a.buf.Memory(), b.buf.Memory(), d.buf.Memory()}
	}
	if enc := p.cached(&ak); enc != nil {
		return launch(op, dev, p.fn, lc, enc)
	}
	// The first call with these operands: encode the arguments (and the tensor maps).
	args := make([]any, 0, 14)
	if p.kind == gemmMMA {
		args = append(args, ptrOf(a), ptrOf(b))
	} else {
		tmA, err := tensorMap(st, p.sm90.A, a.buf, a.off)
		if err != nil {
			return planFailed(op, dev, fmt.Errorf("operand A's tensor map: %w", err))
		}
		tmB, err := tensorMap(st, p.sm90.B, b.buf, b.off)
		if err != nil {
			return planFailed(op, dev, fmt.Errorf("operand B's tensor map: %w", err))
		}
		args = append(args, tmA, tmB)
	}
	args = append(args, uint32(m), uint32(n), uint32(k), alpha, beta, c, ptrOf(d))
	if p.kind == gemmSM90 && p.sm90.HasD {
		tmD, err := tensorMap(st, p.sm90.D, d.buf, d.off)
		if err != nil {
			return planFailed(op, dev, fmt.Errorf("operand D's tensor map: %w", err))
		}
		args = append(args, tmD)
	}
	if !epi.IsZero() {
		for _, ptr := range epiPtrs {
			args = append(args, ptr)
		}
	}
	return p.first(op, dev, lc, &ak, args)
}

// refusal is an operand Matmul's kernels cannot take (not a failure of the device).
type refusal struct{ error }

// layoutOf returns how a 2-D tensor is stored: row-major (each row contiguous) with its row
// stride, else column-major (each column contiguous) with its column stride, else
// kernels.MatrixLayout(-1) (neither).
func layoutOf[T jit.Elem](t Tensor[T]) (kernels.MatrixLayout, int) {
	rows, cols := t.shape[0], t.shape[1]
	switch {
	case t.strides[1] == 1 || cols == 1:
		ld := t.strides[0]
		if rows == 1 {
			ld = cols
		}
		if ld >= cols {
			return kernels.RowMajor, ld
		}
	}
	if t.strides[0] == 1 || rows == 1 {
		ld := t.strides[1]
		if cols == 1 {
			ld = rows
		}
		if ld >= rows {
			return kernels.ColMajor, ld
		}
	}
	return -1, 0
}

// planMatmul chooses, builds and loads the gemm of key.
func planMatmul(ctx context.Context, st *devState, key planKey) (*plan, error) {
	m, n, k := key.dims[0], key.dims[1], key.dims[2]
	lda, ldb := key.lds[0], key.lds[1]
	aL, bL := kernels.MatrixLayout(key.lds[2]), kernels.MatrixLayout(key.lds[3])
	in, out := dsl.Type(key.in), dsl.Type(key.out)
	es := in.Bytes()
	fp8 := in == dsl.E4M3
	// gemm_sm90's rules, in the order Matmul documents them; why is the first broken.
	var why error
	ok, reason := kernels.UseSM90(key.target, n, k)
	switch {
	case !ok:
		why = fmt.Errorf("gemm_sm90: %s", reason)
	case aL != kernels.RowMajor:
		why = fmt.Errorf("operand A (%s) must be row-major for gemm_sm90 (TMA reads its rows)", describe(aL, lda))
	case lda*es%16 != 0:
		why = fmt.Errorf("operand A's rows are %d elements (%d bytes) apart; gemm_sm90's TMA needs a multiple of 16 bytes", lda, lda*es)
	case fp8 && bL != kernels.ColMajor:
		why = fmt.Errorf("operand B (%s) must be column-major for e4m3 (an N x K row-major matrix, Transpose'd: wgmma reads fp8 B K-major)", describe(bL, ldb))
	case !fp8 && bL != kernels.RowMajor:
		why = fmt.Errorf("operand B (%s) must be row-major (K x N) for gemm_sm90", describe(bL, ldb))
	case ldb*es%16 != 0:
		why = fmt.Errorf("operand B's rows are %d elements (%d bytes) apart; gemm_sm90's TMA needs a multiple of 16 bytes", ldb, ldb*es)
	}
	sms := max(st.d.Info().Multiproc, 1)
	if why == nil {
		// The autotuner's winner for this device and shape when `kgen tune` cached one, else
		// GemmSM90For's estimate.
		cfg, _, err := tune.GemmConfig(nil, st.d.Info(), tune.GemmProblem{In: in, Out: out, M: m, N: n, K: k, Epilogue: key.epi})
		if err != nil {
			return nil, refusal{err}
		}
		cfg.Epilogue = key.epi
		l, err := cfg.Launch(m, n, k, sms)
		if err != nil {
			return nil, refusal{err}
		}
		l.A.Strides[0] = uint64(lda * es)
		l.B.Strides[0] = uint64(ldb * es)
		fn, err := st.function(ctx, cfg.Name(), ptx.SM90a, func(kb *dsl.Kernel) { kernels.GemmSM90(kb, cfg) })
		if err != nil {
			return nil, err
		}
		p := &plan{fn: fn, name: cfg.Name(), grid: l.Grid, block: l.Block, shared: l.SharedBytes, cluster: l.Cluster, sm90: l, kind: gemmSM90}
		st.store(key, p)
		return p, nil
	}
	if fp8 {
		return nil, refusal{fmt.Errorf("e4m3 inputs run only on gemm_sm90: %w", why)}
	}
	// The mma.sync gemm: dense row- or column-major A and B.
	cfg := kernels.DefaultGemmConfig(in)
	cfg.Out = out
	cfg.Epilogue = key.epi
	cfg.Aligned = m%8 == 0 && n%8 == 0 && k%8 == 0
	switch {
	case aL == kernels.RowMajor && lda == k:
		cfg.A = kernels.RowMajor
	case aL == kernels.ColMajor && lda == m:
		cfg.A = kernels.ColMajor
	default:
		return nil, refusal{fmt.Errorf("operand A (%s): the mma.sync gemm takes a dense row-major (row stride %d) or column-major (column stride %d) A; gemm_sm90 was not possible: %v", describe(aL, lda), k, m, why)}
	}
	switch {
	case bL == kernels.RowMajor && ldb == n:
		cfg.B = kernels.RowMajor
	case bL == kernels.ColMajor && ldb == k:
		cfg.B = kernels.ColMajor
	default:
		return nil, refusal{fmt.Errorf("operand B (%s): the mma.sync gemm takes a dense row-major (row stride %d) or column-major (column stride %d) B; gemm_sm90 was not possible: %v", describe(bL, ldb), n, k, why)}
	}
	if err := cfg.Check(); err != nil {
		return nil, refusal{err}
	}
	if err := cfg.CheckShape(m, n, k); err != nil {
		return nil, refusal{err}
	}
	fn, err := st.function(ctx, cfg.Name(), key.target, func(kb *dsl.Kernel) { kernels.Gemm(kb, cfg) })
	if err != nil {
		return nil, err
	}
	p := &plan{fn: fn, name: cfg.Name(), grid: cfg.Grid(m, n), block: cfg.Threads(), shared: cfg.SharedBytes(), kind: gemmMMA}
	st.store(key, p)
	return p, nil
}

// describe names a matrix layout and its leading dimension.
func describe(l kernels.MatrixLayout, ld int) string {
	switch l {
	case kernels.RowMajor:
		return fmt.Sprintf("row-major, rows %d apart", ld)
	case kernels.ColMajor:
		return fmt.Sprintf("column-major, columns %d apart", ld)
	}
	return "neither row- nor column-major: no unit stride whose rows or columns lie apart (a stride below the extent it spans overlaps them)"
}
