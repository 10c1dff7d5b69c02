package ref

import (
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/internal/fp"
	"github.com/kgen-dev/kgen/kernels"
)

// Harnesses of the single-GPU kernels.

func init() {
	register("vector_add", vectorAdd)
	register("axpy", axpy)
	register("tiled_copy", tiledCopy)
	register("transpose", transpose)
	register("row_sum", rowSum)
	register("softmax", softmax)
}

// launch1 runs the kernel with a one-dimensional launch shape from package kernels, or with
// the problem's grid when it names one.
func (r *run) launch1(s kernels.Shape, args ...any) error {
	if r.p.Grid > 0 {
		s.Grid = r.p.Grid
	}
	return r.launch(emu.D1(s.Grid), emu.D1(s.Block), args...)
}

// rowsCols is the matrix of a row kernel: Cols columns and max(1, Size/Cols) rows when the
// problem names the row length, else a roughly square one of Size (default def) elements.
func (r *run) rowsCols(def int) (rows, cols int) {
	if r.p.Cols > 0 {
		return max(1, r.size(def)/r.p.Cols), r.p.Cols
	}
	return matrix(r.size(def))
}

func vectorAdd(r *run) error {
	dt, n := r.p.DType, r.size(1000)
	a, b := r.random(dt, n, -4, 4), r.random(dt, n, -4, 4)
	pa, err := r.alloc(dt, n, a)
	if err != nil {
		return err
	}
	pb, _ := r.alloc(dt, n, b)
	pc, _ := r.alloc(dt, n, nil)
	r.res.Shape = fmt.Sprintf("n=%d", n)
	if err := r.launch1(kernels.StreamShape(n, dt), pa, pb, pc, uint32(n)); err != nil {
		return err
	}
	got, err := read(r.sys, pc, dt, n)
	if err != nil {
		return err
	}
	want := make([]float64, n)
	for i := range want {
		want[i] = round(dt, a[i]+b[i])
	}
	return r.check("c", got, want, 0, 0)
}

func axpy(r *run) error {
	dt, n := r.p.DType, r.size(1000)
	x, y := r.random(dt, n, -4, 4), r.random(dt, n, -4, 4)
	alpha := round(dt, 1.5+r.rng.Float64())
	px, err := r.alloc(dt, n, x)
	if err != nil {
		return err
	}
	py, _ := r.alloc(dt, n, y)
	var a any = float32(alpha)
	if dt == dsl.F16 {
		a = fp.F32ToF16(float32(alpha))
	}
	r.res.Shape = fmt.Sprintf("n=%d", n)
	if err := r.launch1(kernels.StreamShape(n, dt), a, px, py, uint32(n)); err != nil {
		return err
	}
	got, err := read(r.sys, py, dt, n)
	if err != nil {
		return err
	}
	want := make([]float64, n)
	for i := range want {
		want[i] = round(dt, math.FMA(alpha, x[i], y[i]))
	}
	return r.check("y", got, want, 0, ulpTol(dt, 1))
}

func tiledCopy(r *run) error {
	dt := r.p.DType
	tile := kernels.TiledCopyElems(dt)
	n := r.size(2*tile + 37)
	src := r.random(dt, n, -8, 8)
	ps, err := r.alloc(dt, n, src)
	if err != nil {
		return err
	}
	// A canary after the end catches writes past n.
	pd, _ := r.alloc(dt, n+16, make([]float64, n+16))
	r.res.Shape = fmt.Sprintf("n=%d", n)
	if err := r.launch(emu.D1(max(ceil(n, tile), 1)), emu.D1(256), ps, pd, uint32(n)); err != nil {
		return err
	}
	got, err := read(r.sys, pd, dt, n+16)
	if err != nil {
		return err
	}
	return r.check("dst", got, append(src, make([]float64, 16)...), 0, 0)
}

func transpose(r *run) error {
	dt := r.p.DType
	m, n := matrix(r.size(37 * 65))
	in := r.random(dt, m*n, -8, 8)
	pi, err := r.alloc(dt, m*n, in)
	if err != nil {
		return err
	}
	po, _ := r.alloc(dt, m*n, nil)
	r.res.Shape = fmt.Sprintf("%dx%d", m, n)
	if err := r.launch(emu.Dim3{X: ceil(n, 32), Y: ceil(m, 32), Z: 1}, emu.D1(256), pi, po, uint32(m), uint32(n)); err != nil {
		return err
	}
	got, err := read(r.sys, po, dt, m*n)
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

func rowSum(r *run) error {
	dt := r.p.DType
	rows, cols := r.rowsCols(5 * 777)
	in := r.random(dt, rows*cols, -1, 1)
	pi, err := r.alloc(dt, rows*cols, in)
	if err != nil {
		return err
	}
	po, _ := r.alloc(dsl.F32, rows, nil)
	r.res.Shape = fmt.Sprintf("%dx%d", rows, cols)
	if err := r.launch1(kernels.RowSumShape(rows, cols), pi, po, uint32(rows), uint32(cols)); err != nil {
		return err
	}
	got, err := read(r.sys, po, dsl.F32, rows)
	if err != nil {
		return err
	}
	want := make([]float64, rows)
	for i := range want {
		for j := 0; j < cols; j++ {
			want[i] += in[i*cols+j]
		}
	}
	// f32 sums in another order: the error grows with the number of terms.
	return r.check("out", got, want, 1e-6*float64(cols), 1e-6)
}

func softmax(r *run) error {
	dt := r.p.DType
	rows, cols := r.rowsCols(3 * 500)
	in := r.random(dt, rows*cols, -6, 6)
	pi, err := r.alloc(dt, rows*cols, in)
	if err != nil {
		return err
	}
	po, _ := r.alloc(dt, rows*cols, nil)
	r.res.Shape = fmt.Sprintf("%dx%d", rows, cols)
	if err := r.launch1(kernels.SoftmaxShape(rows, cols), pi, po, uint32(rows), uint32(cols)); err != nil {
		return err
	}
	got, err := read(r.sys, po, dt, rows*cols)
	if err != nil {
		return err
	}
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
	// ex2.approx is good to about 2 ulp of f32; then the output rounds to dt.
	return r.check("out", got, want, 1e-7, math.Max(2e-6, ulpTol(dt, 1)))
}
