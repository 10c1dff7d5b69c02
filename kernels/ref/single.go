package ref

import (
	"errors"
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
)

// Harnesses of the single-GPU kernels: each runs its kernel through jit's emulator backend
// with a struct launch of the family's host twin (package kernels/launch), instantiated with
// the host type of the variant's element type.

func init() {
	registerOwn("vector_add", oneGPU, byElem{f32: vectorAdd[float32], f16: vectorAdd[fp.F16]}.run)
	registerOwn("axpy", oneGPU, byElem{f32: axpy[float32], f16: axpy[fp.F16]}.run)
	registerOwn("tiled_copy", oneGPU, byElem{f32: tiledCopy[float32], f16: tiledCopy[fp.F16], u8: tiledCopy[uint8]}.run)
	registerOwn("transpose", oneGPU, byElem{f32: transpose[float32], f16: transpose[fp.F16]}.run)
	registerOwn("row_sum", oneGPU, byElem{f32: rowSum[float32], f16: rowSum[fp.F16], bf16: rowSum[fp.BF16]}.run)
	registerOwn("softmax", oneGPU, byElem{f32: softmax[float32], f16: softmax[fp.F16], bf16: softmax[fp.BF16]}.run)
}

// byElem picks a harness instantiation by the problem's element type.
type byElem struct{ f32, f16, bf16, u8 harness }

func (b byElem) run(r *run) error {
	h := map[dsl.Type]harness{dsl.F32: b.f32, dsl.F16: b.f16, dsl.BF16: b.bf16, dsl.U8: b.u8}[r.p.DType]
	if h == nil {
		return fmt.Errorf("no host harness for element type %s", r.p.DType)
	}
	return h(r)
}

// single is one single-GPU run: an emulated device with the variant loaded. Allocation and
// copy errors are kept (the first one) and returned by launch and read, so harnesses read
// straight through.
type single struct {
	r   *run
	d   *jit.Device
	fn  *jit.Function
	err error
}

// openSingle opens an emulated device with the problem's schedule seed and memory mode and
// loads the variant with its declared parameters.
func openSingle(r *run) (*single, error) {
	d, err := jit.OpenBackend(jit.Emulator, 0, jit.WithEmuOptions(emu.Options{Seed: r.p.Seed, Weak: r.p.Weak}))
	if err != nil {
		return nil, err
	}
	m, err := d.Load(jit.Source{Module: r.mod, Params: map[string][]jit.ParamInfo{r.built.Entry: jit.ParamInfos(r.built.Params)}})
	if err != nil {
		return nil, errors.Join(err, d.Close())
	}
	fn, err := m.Function(r.built.Entry)
	if err != nil {
		return nil, errors.Join(err, d.Close())
	}
	return &single{r: r, d: d, fn: fn}, nil
}

// close releases the device and its memory.
func (s *single) close() error { return s.d.Close() }

// alloc allocates n values of E and writes v (when given), converted to E.
func alloc[E jit.Elem](s *single, n int, v []float64) *jit.Buffer[E] {
	if s.err != nil {
		return nil
	}
	b, err := jit.Alloc[E](s.d, max(n, 1))
	if err == nil && v != nil {
		var host []E
		if host, err = toHost[E](v); err == nil {
			err = b.CopyFromHost(host)
		}
	}
	s.err = err
	return b
}

// readBack copies n values of b back as float64.
func readBack[E jit.Elem](s *single, b *jit.Buffer[E], n int) ([]float64, error) {
	if s.err != nil {
		return nil, s.err
	}
	host := make([]E, n)
	if err := b.CopyToHost(host); err != nil {
		return nil, err
	}
	return fromHost(host)
}

// launch runs the variant with args (a kernels/launch struct) and waits.
func (s *single) launch(grid, block jit.Dim3, args any) error {
	if s.err != nil {
		return s.err
	}
	if err := s.fn.LaunchArgs(jit.LaunchConfig{Grid: grid, Block: block}, args); err != nil {
		return err
	}
	return s.d.Synchronize()
}

// launch1 runs the variant with a one-dimensional launch shape from package kernels, or with
// the problem's grid when it names one.
func (s *single) launch1(sh kernels.Shape, args any) error {
	if s.r.p.Grid > 0 {
		sh.Grid = s.r.p.Grid
	}
	return s.launch(jit.D1(sh.Grid), jit.D1(sh.Block), args)
}

// rowsCols is the matrix of a row kernel: Cols columns and max(1, Size/Cols) rows when the
// problem names the row length, else a roughly square one of Size (default def) elements.
func (r *run) rowsCols(def int) (rows, cols int) {
	if r.p.Cols > 0 {
		return max(1, r.size(def)/r.p.Cols), r.p.Cols
	}
	return matrix(r.size(def))
}

// toHost converts values (exactly representable in E, see run.random) to E.
func toHost[E jit.Elem](v []float64) ([]E, error) {
	out := make([]E, len(v))
	switch o := any(out).(type) {
	case []float32:
		for i, x := range v {
			o[i] = float32(x)
		}
	case []fp.F16:
		for i, x := range v {
			o[i] = fp.F16Of(float32(x))
		}
	case []fp.BF16:
		for i, x := range v {
			o[i] = fp.BF16Of(float32(x))
		}
	case []uint8:
		for i, x := range v {
			o[i] = uint8(x)
		}
	default:
		return nil, fmt.Errorf("no host conversion to %T", out)
	}
	return out, nil
}

// fromHost widens E values to float64.
func fromHost[E jit.Elem](v []E) ([]float64, error) {
	out := make([]float64, len(v))
	switch o := any(v).(type) {
	case []float32:
		for i, x := range o {
			out[i] = float64(x)
		}
	case []fp.F16:
		for i, x := range o {
			out[i] = float64(x.Float32())
		}
	case []fp.BF16:
		for i, x := range o {
			out[i] = float64(x.Float32())
		}
	case []uint8:
		for i, x := range o {
			out[i] = float64(x)
		}
	default:
		return nil, fmt.Errorf("no host conversion from %T", v)
	}
	return out, nil
}

func vectorAdd[T jit.Elem](r *run) (err error) {
	s, err := openSingle(r)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	dt, n := r.p.DType, r.size(1000)
	a, b := r.random(dt, n, -4, 4), r.random(dt, n, -4, 4)
	pa, pb, pc := alloc[T](s, n, a), alloc[T](s, n, b), alloc[T](s, n, nil)
	r.res.Shape = fmt.Sprintf("n=%d", n)
	if err := s.launch1(kernels.StreamShape(n, dt), launch.VectorAdd[T]{A: pa, B: pb, C: pc, N: uint32(n)}); err != nil {
		return err
	}
	got, err := readBack(s, pc, n)
	if err != nil {
		return err
	}
	want := make([]float64, n)
	for i := range want {
		want[i] = round(dt, a[i]+b[i])
	}
	return r.check("c", got, want, 0, 0)
}

func axpy[T jit.Elem](r *run) (err error) {
	s, err := openSingle(r)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	dt, n := r.p.DType, r.size(1000)
	x, y := r.random(dt, n, -4, 4), r.random(dt, n, -4, 4)
	alpha := round(dt, 1.5+r.rng.Float64())
	a, err := toHost[T]([]float64{alpha})
	if err != nil {
		return err
	}
	px, py := alloc[T](s, n, x), alloc[T](s, n, y)
	r.res.Shape = fmt.Sprintf("n=%d", n)
	if err := s.launch1(kernels.StreamShape(n, dt), launch.Axpy[T]{Alpha: a[0], X: px, Y: py, N: uint32(n)}); err != nil {
		return err
	}
	got, err := readBack(s, py, n)
	if err != nil {
		return err
	}
	want := make([]float64, n)
	for i := range want {
		want[i] = round(dt, math.FMA(alpha, x[i], y[i]))
	}
	return r.check("y", got, want, 0, ulpTol(dt, 1))
}

func tiledCopy[T jit.Elem](r *run) (err error) {
	s, err := openSingle(r)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	dt := r.p.DType
	tile := kernels.TiledCopyElems(dt)
	n := r.size(2*tile + 37)
	src := r.random(dt, n, -8, 8)
	// A canary after the end catches writes past n.
	ps, pd := alloc[T](s, n, src), alloc[T](s, n+16, make([]float64, n+16))
	r.res.Shape = fmt.Sprintf("n=%d", n)
	if err := s.launch(jit.D1(max(ceil(n, tile), 1)), jit.D1(256), launch.Copy[T]{Src: ps, Dst: pd, N: uint32(n)}); err != nil {
		return err
	}
	got, err := readBack(s, pd, n+16)
	if err != nil {
		return err
	}
	return r.check("dst", got, append(src, make([]float64, 16)...), 0, 0)
}

func transpose[T jit.Elem](r *run) (err error) {
	s, err := openSingle(r)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	dt := r.p.DType
	m, n := matrix(r.size(37 * 65))
	if err := kernels.TransposeCheckShape(m, n); err != nil {
		return err
	}
	in := r.random(dt, m*n, -8, 8)
	pi, po := alloc[T](s, m*n, in), alloc[T](s, m*n, nil)
	r.res.Shape = fmt.Sprintf("%dx%d", m, n)
	if err := s.launch(jit.Dim3{X: ceil(n, 32), Y: ceil(m, 32), Z: 1}, jit.D1(256), launch.Transpose[T]{In: pi, Out: po, M: uint32(m), N: uint32(n)}); err != nil {
		return err
	}
	got, err := readBack(s, po, m*n)
	if err != nil {
		return err
	}
	want := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			want[j*m+i] = in[i*n+j]
		}
	}
	return r.check("out", got, want, 0, 0)
}

func rowSum[T jit.Elem](r *run) (err error) {
	s, err := openSingle(r)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	dt := r.p.DType
	rows, cols := r.rowsCols(5 * 777)
	in := r.random(dt, rows*cols, -1, 1)
	pi, po := alloc[T](s, rows*cols, in), alloc[float32](s, rows, nil)
	r.res.Shape = fmt.Sprintf("%dx%d", rows, cols)
	if err := s.launch1(kernels.RowSumShape(rows, cols), launch.RowSum[T]{In: pi, Out: po, Rows: uint32(rows), Cols: uint32(cols)}); err != nil {
		return err
	}
	got, err := readBack(s, po, rows)
	if err != nil {
		return err
	}
	// f32 sums in another order: the error grows with the number of terms.
	return r.check("out", got, rowSumRef(in, rows, cols), 1e-6*float64(cols), 1e-6)
}

// rowSumRef is row_sum's reference: the sum of each row of the rows x cols matrix in.
func rowSumRef(in []float64, rows, cols int) []float64 {
	want := make([]float64, rows)
	for i := range want {
		for j := 0; j < cols; j++ {
			want[i] += in[i*cols+j]
		}
	}
	return want
}

func softmax[T jit.Elem](r *run) (err error) {
	s, err := openSingle(r)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	dt := r.p.DType
	rows, cols := r.rowsCols(3 * 500)
	in := r.random(dt, rows*cols, -6, 6)
	pi, po := alloc[T](s, rows*cols, in), alloc[T](s, rows*cols, nil)
	r.res.Shape = fmt.Sprintf("%dx%d", rows, cols)
	if err := s.launch1(kernels.SoftmaxShape(rows, cols), launch.Softmax[T]{In: pi, Out: po, Rows: uint32(rows), Cols: uint32(cols)}); err != nil {
		return err
	}
	got, err := readBack(s, po, rows*cols)
	if err != nil {
		return err
	}
	// ex2.approx is good to about 2 ulp of f32; then the output rounds to dt.
	return r.check("out", got, softmaxRef(in, rows, cols), 1e-7, math.Max(2e-6, ulpTol(dt, 1)))
}

// softmaxRef is softmax's reference: the softmax of each row of the rows x cols matrix in.
func softmaxRef(in []float64, rows, cols int) []float64 {
	want := make([]float64, rows*cols)
	for i := 0; i < rows; i++ {
		row := in[i*cols : (i+1)*cols]
		m := math.Inf(-1)
		for _, x := range row {
			m = math.Max(m, x)
		}
		s := 0.0
		for _, x := range row {
			s += math.Exp(x - m)
		}
		for j, x := range row {
			want[i*cols+j] = math.Exp(x-m) / s
		}
	}
	return want
}
