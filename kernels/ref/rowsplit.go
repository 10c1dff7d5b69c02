package ref

import (
	"errors"
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/kernels/launch"
)

// Harnesses of the split-row kernels (row_sum_split, softmax_split): launched co-resident
// with kernels.SplitRowShape for the emulated device, twice on the same scratch (the second
// launch, into a zeroed output, is the one checked: the first must leave the scratch ready).

func init() {
	registerOwn("row_sum_split", oneGPU, byElem{f32: rowSumSplit[float32], f16: rowSumSplit[fp.F16], bf16: rowSumSplit[fp.BF16]}.run)
	registerOwn("softmax_split", oneGPU, byElem{f32: softmaxSplit[float32], f16: softmaxSplit[fp.F16], bf16: softmaxSplit[fp.BF16]}.run)
}

// launchSplit launches the split kernel twice with args(shape) on scratch zeroed once,
// zeroing out (n values) before the second launch.
func launchSplit[O jit.Elem](s *single, rows, cols int, out *jit.Buffer[O], n int, args func(sh kernels.SplitShape, scratch *jit.Buffer[uint32]) any) error {
	sh := kernels.SplitRowShape(rows, cols, s.d.Info().Multiproc)
	s.r.res.Shape = fmt.Sprintf("%dx%d (%d blocks of %d, %d a row)", rows, cols, sh.Grid, sh.Block, sh.Parts)
	scratch := alloc[uint32](s, sh.ScratchWords, nil)
	if s.err != nil {
		return s.err
	}
	if err := scratch.CopyFromHost(make([]uint32, scratch.Len())); err != nil {
		return err
	}
	for i := 0; i < 2; i++ {
		if i == 1 {
			if err := out.CopyFromHost(make([]O, n)); err != nil {
				return err
			}
		}
		cfg := jit.LaunchConfig{Grid: jit.D1(sh.Grid), Block: jit.D1(sh.Block), CoResident: true}
		if err := s.fn.LaunchArgs(cfg, args(sh, scratch)); err != nil {
			return fmt.Errorf("launch %d: %w", i+1, err)
		}
		if err := s.d.Synchronize(); err != nil {
			return fmt.Errorf("launch %d: %w", i+1, err)
		}
	}
	return nil
}

func rowSumSplit[T jit.Elem](r *run) (err error) {
	s, err := openSingle(r)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	rows, cols := r.rowsCols(2 * 40000)
	in := r.random(r.p.DType, rows*cols, -1, 1)
	pi, po := alloc[T](s, rows*cols, in), alloc[float32](s, rows, nil)
	err = launchSplit(s, rows, cols, po, rows, func(sh kernels.SplitShape, scratch *jit.Buffer[uint32]) any {
		return launch.RowSumSplit[T]{In: pi, Out: po, Scratch: scratch, Rows: uint32(rows), Cols: uint32(cols), Parts: uint32(sh.Parts)}
	})
	if err != nil {
		return err
	}
	got, err := readBack(s, po, rows)
	if err != nil {
		return err
	}
	// f32 sums in another order: the error grows with the number of terms.
	return r.check("out", got, rowSumRef(in, rows, cols), 1e-6*float64(cols), 1e-6)
}

func softmaxSplit[T jit.Elem](r *run) (err error) {
	s, err := openSingle(r)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.close()) }()
	dt := r.p.DType
	rows, cols := r.rowsCols(2 * 40000)
	in := r.random(dt, rows*cols, -6, 6)
	pi, po := alloc[T](s, rows*cols, in), alloc[T](s, rows*cols, nil)
	err = launchSplit(s, rows, cols, po, rows*cols, func(sh kernels.SplitShape, scratch *jit.Buffer[uint32]) any {
		return launch.SoftmaxSplit[T]{In: pi, Out: po, Scratch: scratch, Rows: uint32(rows), Cols: uint32(cols), Parts: uint32(sh.Parts)}
	})
	if err != nil {
		return err
	}
	got, err := readBack(s, po, rows*cols)
	if err != nil {
		return err
	}
	// ex2.approx is good to about 2 ulp of f32; then the output rounds to dt.
	return r.check("out", got, softmaxRef(in, rows, cols), 1e-7, math.Max(2e-6, ulpTol(dt, 1)))
}
