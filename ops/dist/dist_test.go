package dist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ops"
)

// runRanks runs f on every rank of an emulated machine of gpus GPUs (NVSHMEM on), each with
// its own Comm (multicast off unless mc).
func runRanks(t *testing.T, gpus int, mc bool, f func(c *collectives.Comm) error) {
	t.Helper()
	ro := jit.RanksOptions{Backend: jit.Emulator, World: gpus, NVSHMEM: true}
	err := jit.RunRanks(ro, func(r *jit.Rank) error {
		c, err := collectives.New(context.Background(), r, collectives.Options{Logger: slog.New(slog.DiscardHandler), DisableMulticast: !mc, OneShotMaxBytes: 1 << 10, LamportMaxBytes: 256, MaxBlocks: 3})
		if err != nil {
			return err
		}
		ferr := f(c)
		if err := c.Close(); ferr == nil {
			ferr = err
		}
		if ferr != nil {
			return fmt.Errorf("rank %d: %w", r.Rank, ferr)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// input is GPU g's element i of a test input: multiples of 1/8 in [-4, 4] (exact in bf16
// and in f32 sums).
func input(seed, g, i int) float64 { return float64((i*7+g*13+seed*5)%65-32) / 8 }

// fillT writes GPU rank's input values (seed) into t's buffer.
func fillT[T jit.Elem](t ops.Tensor[T], seed, rank int) error {
	h := make([]T, t.Len())
	for i := range h {
		h[i] = conv[T](input(seed, rank, i))
	}
	return t.Buffer().CopyFromHost(h)
}

// fillB writes the same values into a Buffer.
func fillB(b *collectives.Buffer, seed, rank int) error {
	v := make([]float32, b.Len())
	for i := range v {
		v[i] = float32(input(seed, rank, i))
	}
	return b.WriteF32(v)
}

func conv[T jit.Elem](v float64) T {
	var z T
	switch any(z).(type) {
	case fp.BF16:
		return any(fp.BF16Of(float32(v))).(T)
	case fp.F16:
		return any(fp.F16Of(float32(v))).(T)
	case float32:
		return any(float32(v)).(T)
	}
	panic("conv: no conversion")
}

// read returns t's elements as float64 (after the device's work).
func read[T jit.Elem](t ops.Tensor[T]) ([]float64, error) {
	h := make([]T, t.Len())
	if err := t.Buffer().Memory().Device().Synchronize(); err != nil {
		return nil, err
	}
	if err := t.Buffer().CopyToHost(h); err != nil {
		return nil, err
	}
	out := make([]float64, len(h))
	for i, x := range h {
		switch v := any(x).(type) {
		case fp.BF16:
			out[i] = float64(v.Float32())
		case fp.F16:
			out[i] = float64(v.Float32())
		case float32:
			out[i] = float64(v)
		}
	}
	return out, nil
}

// same compares a tensor's values with a Buffer's (the Buffer API's result) and with want.
func same(what string, got []float64, b *collectives.Buffer, want func(i int) float64) error {
	viaB, err := b.ReadF32()
	if err != nil {
		return err
	}
	if len(viaB) != len(got) {
		return fmt.Errorf("%s: %d values, the Buffer API %d", what, len(got), len(viaB))
	}
	for i := range got {
		if got[i] != float64(viaB[i]) {
			return fmt.Errorf("%s: [%d] = %v; the Buffer API gave %v", what, i, got[i], viaB[i])
		}
		if w := want(i); math.Abs(got[i]-w) > 1e-6*(1+math.Abs(w)) {
			return fmt.Errorf("%s: [%d] = %v; want %v", what, i, got[i], w)
		}
	}
	return nil
}

// TestCollectives runs AllReduce (in place and out of place), ReduceScatter and AllGather
// on tensors, and the same calls on Buffers with the same inputs, on 2 and 4 emulated GPUs
// (with and without multicast): the results are equal and match the float64 sums.
func TestCollectives(t *testing.T) {
	for _, g := range []int{2, 4} {
		for _, mc := range []bool{false, true} {
			t.Run(fmt.Sprintf("gpus%d-mc%v", g, mc), func(t *testing.T) {
				runRanks(t, g, mc, func(c *collectives.Comm) error { return collectivesRank(c) })
			})
		}
	}
}

func collectivesRank(c *collectives.Comm) error {
	ctx := context.Background()
	g, r := c.NumGPUs(), c.Rank()
	const rows, cols = 6, 20 // 120 f32: past the test's Lamport limit (256 bytes)
	sum := func(seed, i int) float64 {
		s := 0.0
		for q := 0; q < g; q++ {
			s += input(seed, q, i)
		}
		return s
	}
	x, xb, err := Alloc[float32](ctx, c, rows, cols)
	if err != nil {
		return err
	}
	ref, err := c.Alloc(xb.DType(), xb.Len())
	if err != nil {
		return err
	}
	if err := errors.Join(fillT(x, 1, r), fillB(ref, 1, r)); err != nil {
		return err
	}
	if err := AllReduce(ctx, c, x, collectives.Sum); err != nil {
		return err
	}
	if err := c.AllReduce(ctx, ref, collectives.Sum); err != nil {
		return err
	}
	got, err := read(x)
	if err != nil {
		return err
	}
	if err := same("AllReduce", got, ref, func(i int) float64 { return sum(1, i) }); err != nil {
		return err
	}

	// Out of place, bf16, a 3-D view of the buffers (the shape is the tensors' own).
	src, _, err := Alloc[fp.BF16](ctx, c, 2, 3, 8)
	if err != nil {
		return err
	}
	dst, _, err := Alloc[fp.BF16](ctx, c, 2, 3, 8)
	if err != nil {
		return err
	}
	if err := fillT(src, 2, r); err != nil {
		return err
	}
	if err := AllReduceTo(ctx, c, dst, src, collectives.Max); err != nil {
		return err
	}
	got, err = read(dst)
	if err != nil {
		return err
	}
	for i, v := range got {
		w := math.Inf(-1)
		for q := 0; q < g; q++ {
			w = math.Max(w, input(2, q, i))
		}
		if v != w {
			return fmt.Errorf("AllReduceTo max: [%d] = %v; want %v", i, v, w)
		}
	}

	// ReduceScatter [g*4, 8] -> [4, 8]; AllGather [4, 8] -> [g*4, 8].
	in, inB, err := Alloc[float32](ctx, c, g*4, 8)
	if err != nil {
		return err
	}
	part, partB, err := Alloc[float32](ctx, c, 4, 8)
	if err != nil {
		return err
	}
	refIn, _ := c.Alloc(inB.DType(), inB.Len())
	refPart, _ := c.Alloc(partB.DType(), partB.Len())
	if err := errors.Join(fillT(in, 3, r), fillB(refIn, 3, r)); err != nil {
		return err
	}
	if err := errors.Join(ReduceScatter(ctx, c, part, in, collectives.Sum), c.ReduceScatter(ctx, refPart, refIn, collectives.Sum)); err != nil {
		return err
	}
	if got, err = read(part); err != nil {
		return err
	}
	if err := same("ReduceScatter", got, refPart, func(i int) float64 { return sum(3, r*32+i) }); err != nil {
		return err
	}
	if err := errors.Join(fillT(part, 4, r), fillB(refPart, 4, r)); err != nil {
		return err
	}
	if err := errors.Join(AllGather(ctx, c, in, part), c.AllGather(ctx, refIn, refPart)); err != nil {
		return err
	}
	if got, err = read(in); err != nil {
		return err
	}
	return same("AllGather", got, refIn, func(i int) float64 { return input(4, i/32, i%32) })
}

// TestMatmuls runs AllGatherMatmul, MatmulReduceScatter and MatmulAllReduce on tensors
// (bf16 in, f32 out) and on Buffers with the same inputs on 2 emulated GPUs: equal
// results, matching a float64 reference.
func TestMatmuls(t *testing.T) {
	runRanks(t, 2, false, func(c *collectives.Comm) error {
		ctx := context.Background()
		g, r := c.NumGPUs(), c.Rank()
		const m, n, k = 32, 16, 24
		mk := func(rows, cols int) (ops.Tensor[fp.BF16], *collectives.Buffer, *collectives.Buffer, error) {
			t, b, err := Alloc[fp.BF16](ctx, c, rows, cols)
			if err != nil {
				return t, nil, nil, err
			}
			ref, err := c.Alloc(b.DType(), b.Len())
			return t, b, ref, err
		}
		out := func(rows int) (ops.Tensor[float32], *collectives.Buffer, *collectives.Buffer, error) {
			t, b, err := Alloc[float32](ctx, c, rows, n)
			if err != nil {
				return t, nil, nil, err
			}
			ref, err := c.Alloc(b.DType(), b.Len())
			return t, b, ref, err
		}
		type problem struct {
			name         string
			aRows, oRows int
			run          func(o ops.Tensor[float32], a, b ops.Tensor[fp.BF16]) error
			runB         func(o, a, b *collectives.Buffer) error
			want         func(i int) float64
		}
		dot := func(aOf func(row, kk int) float64, bOf func(kk, col int) float64, row, col int) float64 {
			s := 0.0
			for kk := 0; kk < k; kk++ {
				s += aOf(row, kk) * bOf(kk, col)
			}
			return s
		}
		shape := collectives.MatmulShape{M: m, N: n, K: k}
		problems := []problem{
			{"AllGatherMatmul", m / g, m,
				func(o ops.Tensor[float32], a, b ops.Tensor[fp.BF16]) error { return AllGatherMatmul(ctx, c, o, a, b) },
				func(o, a, b *collectives.Buffer) error { return c.AllGatherMatmul(ctx, a, b, o, shape) },
				func(i int) float64 {
					row, col := i/n, i%n
					q := row / (m / g)
					return dot(func(rr, kk int) float64 { return input(10, q, (rr%(m/g))*k+kk) }, func(kk, cc int) float64 { return input(11, r, kk*n+cc) }, row, col)
				}},
			{"MatmulReduceScatter", m, m / g,
				func(o ops.Tensor[float32], a, b ops.Tensor[fp.BF16]) error {
					return MatmulReduceScatter(ctx, c, o, a, b)
				},
				func(o, a, b *collectives.Buffer) error { return c.MatmulReduceScatter(ctx, a, b, o, shape) },
				func(i int) float64 {
					row, col := r*(m/g)+i/n, i%n
					s := 0.0
					for q := 0; q < g; q++ {
						s += dot(func(rr, kk int) float64 { return input(10, q, rr*k+kk) }, func(kk, cc int) float64 { return input(11, q, kk*n+cc) }, row, col)
					}
					return s
				}},
			{"MatmulAllReduce", m, m,
				func(o ops.Tensor[float32], a, b ops.Tensor[fp.BF16]) error { return MatmulAllReduce(ctx, c, o, a, b) },
				func(o, a, b *collectives.Buffer) error { return c.MatmulAllReduce(ctx, a, b, o, shape) },
				func(i int) float64 {
					row, col := i/n, i%n
					s := 0.0
					for q := 0; q < g; q++ {
						s += dot(func(rr, kk int) float64 { return input(10, q, rr*k+kk) }, func(kk, cc int) float64 { return input(11, q, kk*n+cc) }, row, col)
					}
					return s
				}},
		}
		for _, p := range problems {
			a, _, aRef, err := mk(p.aRows, k)
			if err != nil {
				return err
			}
			b, _, bRef, err := mk(k, n)
			if err != nil {
				return err
			}
			o, _, oRef, err := out(p.oRows)
			if err != nil {
				return err
			}
			if err := errors.Join(fillT(a, 10, r), fillB(aRef, 10, r), fillT(b, 11, r), fillB(bRef, 11, r)); err != nil {
				return err
			}
			if err := p.run(o, a, b); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			if err := p.runB(oRef, aRef, bRef); err != nil {
				return fmt.Errorf("%s (Buffers): %w", p.name, err)
			}
			got, err := read(o)
			if err != nil {
				return err
			}
			if err := same(p.name, got, oRef, p.want); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestOpsThenAllReduce is a tensor-parallel layer's tail on the same tensors: ops.Matmul
// writes this GPU's partial product into a Comm tensor, AllReduce sums it over the GPUs.
func TestOpsThenAllReduce(t *testing.T) {
	runRanks(t, 2, false, func(c *collectives.Comm) error {
		ctx := context.Background()
		r, g := c.Rank(), c.NumGPUs()
		const m, n, k = 16, 16, 32
		x, _, err := Alloc[fp.BF16](ctx, c, m, k)
		if err != nil {
			return err
		}
		w, _, err := Alloc[fp.BF16](ctx, c, k, n)
		if err != nil {
			return err
		}
		y, _, err := Alloc[float32](ctx, c, m, n)
		if err != nil {
			return err
		}
		if err := errors.Join(fillT(x, 20, r), fillT(w, 21, r)); err != nil {
			return err
		}
		if err := ops.Matmul(ctx, nil, y, x, w, nil); err != nil {
			return err
		}
		if err := AllReduce(ctx, c, y, collectives.Sum); err != nil {
			return err
		}
		got, err := read(y)
		if err != nil {
			return err
		}
		for i, v := range got {
			want := 0.0
			for q := 0; q < g; q++ {
				for kk := 0; kk < k; kk++ {
					want += input(20, q, (i/n)*k+kk) * input(21, q, kk*n+i%n)
				}
			}
			if math.Abs(v-want) > 1e-4*(1+math.Abs(want)) {
				return fmt.Errorf("y[%d, %d] = %v; want %v", i/n, i%n, v, want)
			}
		}
		return nil
	})
}

// TestMisuse checks that tensors the Comm cannot take are errors naming the operand and
// the rule: memory not from the Comm, a part of a buffer, shapes, types, a freed buffer.
func TestMisuse(t *testing.T) {
	runRanks(t, 2, false, func(c *collectives.Comm) error {
		ctx := context.Background()
		x, xb, err := Alloc[float32](ctx, c, 4, 8)
		if err != nil {
			return err
		}
		y, _, err := Alloc[float32](ctx, c, 8, 4)
		if err != nil {
			return err
		}
		big, _, err := Alloc[float32](ctx, c, 16, 8)
		if err != nil {
			return err
		}
		a, _, err1 := Alloc[fp.BF16](ctx, c, 8, 16)
		b, _, err2 := Alloc[fp.BF16](ctx, c, 24, 8)
		b2, _, err3 := Alloc[fp.BF16](ctx, c, 16, 8)
		o, _, err4 := Alloc[float32](ctx, c, 16, 8)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return err
		}
		plainB, err := jit.Alloc[float32](xb.Memory().Device(), 32)
		if err != nil {
			return err
		}
		defer plainB.Free()
		plain, _ := ops.New(plainB, 4, 8)
		half, _ := x.Narrow(0, 0, 2)
		tr, _ := x.Transpose()
		gone, goneB, _ := Alloc[float32](ctx, c, 4)
		if err := goneB.Free(); err != nil {
			return err
		}
		var nilCtx context.Context // a nil context is the misuse tested
		_, wrongType := Tensor[fp.BF16](xb, 4, 8)
		_, wrongShape := Tensor[float32](xb, 4, 4)
		for _, tc := range []struct {
			name string
			err  error
			want string
		}{
			{"plain", AllReduce(ctx, c, plain, collectives.Sum), "dist: AllReduce: dst: collectives: the memory is no live Buffer of this Comm"},
			{"part", AllReduce(ctx, c, half, collectives.Sum), "dst (shape [2 8], strides [8 1], offset 0) must be its whole Comm buffer of 32 elements"},
			{"transposed", AllReduce(ctx, c, tr, collectives.Sum), "dst (shape [8 4], strides [1 8], offset 0) must be its whole Comm buffer"},
			{"freed", AllReduce(ctx, c, gone, collectives.Sum), "dst: its buffer was freed"},
			{"nil ctx", AllReduce(nilCtx, c, x, collectives.Sum), "dist: AllReduce: nil context"},
			{"zero", AllReduce(ctx, c, ops.Tensor[float32]{}, collectives.Sum), "dst is the zero Tensor"},
			{"shapes", AllReduceTo(ctx, c, y, x, collectives.Sum), "dst has shape [8 4], src [4 8]: they must match"},
			{"rs", ReduceScatter(ctx, c, x, y, collectives.Sum), "src has shape [8 4], dst [4 8]: src must be the 2 GPUs' parts of dst's shape stacked along dimension 0, [8 8]"},
			{"ag", AllGather(ctx, c, big, x), "dst has shape [16 8], src [4 8]"},
			{"k", AllGatherMatmul(ctx, c, o, a, b), "a is 8 x 16, b 24 x 8: b's rows must match a's columns (K)"},
			{"m", MatmulAllReduce(ctx, c, o, a, b2), "a has 8 rows, out 16: they must match (M)"},
			{"n", MatmulReduceScatter(ctx, c, o, a, mustView(b, 16, 12)), "out is 16 x 8, b 16 x 12: out's columns must match b's (N)"},
			{"tensor type", wrongType, "a tensor of bf16 over a buffer of f32"},
			{"tensor shape", wrongShape, "shape [4 4] holds 16 elements; the buffer 32"},
		} {
			if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
				return fmt.Errorf("%s: error %v; want one containing %q", tc.name, tc.err, tc.want)
			}
		}
		return nil
	})
}

func mustView[T jit.Elem](t ops.Tensor[T], shape ...int) ops.Tensor[T] {
	v, err := t.View(shape...)
	if err != nil {
		panic(err)
	}
	return v
}

// TestCapture records an ops.Matmul into a Comm tensor and the AllReduce of it in one CUDA
// graph (Comm.Capture on the Comm's stream, after a warm-up call of each) and checks that
// a replay on new inputs gives the direct calls' result.
func TestCapture(t *testing.T) {
	ro := jit.RanksOptions{Backend: jit.Emulator, World: 2, NVSHMEM: true}
	err := jit.RunRanks(ro, func(r *jit.Rank) error {
		ctx := context.Background()
		s, err := r.Device.NewStream()
		if err != nil {
			return err
		}
		defer s.Close()
		c, err := collectives.New(ctx, r, collectives.Options{Logger: slog.New(slog.DiscardHandler), CaptureSafe: true, Stream: s})
		if err != nil {
			return err
		}
		defer c.Close()
		const m, n, k = 16, 16, 16
		x, _, err := Alloc[fp.BF16](ctx, c, m, k)
		if err != nil {
			return err
		}
		w, _, err := Alloc[fp.BF16](ctx, c, k, n)
		if err != nil {
			return err
		}
		y, _, err := Alloc[float32](ctx, c, m, n)
		if err != nil {
			return err
		}
		step := func() error {
			if err := ops.Matmul(ctx, s, y, x, w, nil); err != nil {
				return err
			}
			return AllReduce(ctx, c, y, collectives.Sum)
		}
		if err := errors.Join(fillT(x, 30, r.Rank), fillT(w, 31, r.Rank)); err != nil {
			return err
		}
		if err := step(); err != nil { // the warm-up: plans, modules, scratch
			return err
		}
		gx, err := c.Capture(ctx, step)
		if err != nil {
			return err
		}
		defer gx.Close()
		if err := errors.Join(fillT(x, 32, r.Rank), fillT(w, 33, r.Rank), y.Buffer().CopyFromHost(make([]float32, m*n))); err != nil {
			return err
		}
		if err := gx.Launch(s); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		got, err := read(y)
		if err != nil {
			return err
		}
		for i, v := range got {
			want := 0.0
			for q := 0; q < 2; q++ {
				for kk := 0; kk < k; kk++ {
					want += input(32, q, (i/n)*k+kk) * input(33, q, kk*n+i%n)
				}
			}
			if math.Abs(v-want) > 1e-4*(1+math.Abs(want)) {
				return fmt.Errorf("rank %d: replay: y[%d, %d] = %v; want %v", r.Rank, i/n, i%n, v, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
