// Command mlp runs a transformer MLP block through package ops: H = SiLU(X*W1 + b1), then
// Y = H*W2 + X, in bf16 with f32 accumulation, the bias, activation and residual fused into
// the GEMMs' epilogues. It checks H and Y against float64 on sampled rows and prints the
// time of the two calls. Built without the cuda tag it runs on the emulator; with -tags cuda
// on GPU 0 (sm_90a's gemm on an H100).
//
//	go run ./examples/mlp -tokens 64 -hidden 128 -ff 256
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"time"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ops"
)

func main() {
	tokens := flag.Int("tokens", 64, "rows of X (M)")
	hidden := flag.Int("hidden", 128, "columns of X and Y (a multiple of 8)")
	ff := flag.Int("ff", 256, "columns of H (a multiple of 8)")
	reps := flag.Int("reps", 10, "timed repetitions of the block")
	flag.Parse()
	log.SetFlags(0)
	if err := run(context.Background(), *tokens, *hidden, *ff, *reps); err != nil {
		log.Print("mlp: ", err)
		if errors.As(err, new(usageError)) {
			os.Exit(2) // a bad flag
		}
		os.Exit(1)
	}
}

// usageError is a bad flag value.
type usageError struct{ error }

// maxHostBytes bounds the host copies of the block's matrices (float32 and bf16: 6 bytes an
// element; 16 GiB).
const maxHostBytes = 16 << 30

// checkSizes refuses sizes the block cannot take: non-positive, a matrix of 2^31 elements or
// more, or more host memory than maxHostBytes (products in float64: no overflow).
func checkSizes(m, hid, ff, reps int) error {
	if m <= 0 || hid <= 0 || ff <= 0 || reps < 0 {
		return usageError{fmt.Errorf("-tokens %d -hidden %d -ff %d -reps %d: want positive sizes", m, hid, ff, reps)}
	}
	t, h, f := float64(m), float64(hid), float64(ff)
	if max(t*h, h*f, t*f) >= 1<<31 {
		return usageError{fmt.Errorf("-tokens %d -hidden %d -ff %d: a matrix of %.4g elements; at most 2^31-1", m, hid, ff, max(t*h, h*f, t*f))}
	}
	if b := 6 * (2*t*h + 2*h*f + t*f); b > maxHostBytes {
		return usageError{fmt.Errorf("-tokens %d -hidden %d -ff %d: %.4g bytes of host copies; at most %d (16 GiB)", m, hid, ff, b, int64(maxHostBytes))}
	}
	return nil
}

// mlp holds the block's device tensors.
type mlp struct {
	x, w1, h, w2, y ops.Tensor[fp.BF16]
	b1              ops.Tensor[float32]
}

// forward runs the block's two calls on s.
func (b *mlp) forward(ctx context.Context, s *jit.Stream) error {
	if err := ops.Matmul(ctx, s, b.h, b.x, b.w1, &ops.MatmulOptions[fp.BF16]{Alpha: 1, Bias: b.b1, Act: kernels.SiLU}); err != nil {
		return err
	}
	return ops.Matmul(ctx, s, b.y, b.h, b.w2, &ops.MatmulOptions[fp.BF16]{Alpha: 1, Residual: b.x})
}

func run(ctx context.Context, m, hid, ff, reps int) error {
	if err := checkSizes(m, hid, ff, reps); err != nil {
		return err
	}
	d, err := jit.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	val := func(seed, i int) float32 { return float32((i*seed+seed/3)%17-8) / 16 }
	fill := func(n, seed int, scale float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = val(seed, i) * scale
		}
		return v
	}
	hx, hw1, hw2 := fill(m*hid, 7, 1), fill(hid*ff, 13, 1/float32(math.Sqrt(float64(hid)))), fill(ff*hid, 11, 1/float32(math.Sqrt(float64(ff))))
	hb1 := fill(ff, 5, 0.5)
	var b mlp
	var bufs []interface{ Free() error }
	defer func() {
		for _, x := range bufs {
			x.Free()
		}
	}()
	bf := func(host []float32, shape ...int) (ops.Tensor[fp.BF16], error) {
		buf, err := jit.Alloc[fp.BF16](d, len(host))
		if err != nil {
			return ops.Tensor[fp.BF16]{}, err
		}
		bufs = append(bufs, buf)
		if err := buf.CopyFromHost(fp.From[fp.BF16](host)); err != nil {
			return ops.Tensor[fp.BF16]{}, err
		}
		return ops.New(buf, shape...)
	}
	if b.x, err = bf(hx, m, hid); err != nil {
		return err
	}
	if b.w1, err = bf(hw1, hid, ff); err != nil {
		return err
	}
	if b.w2, err = bf(hw2, ff, hid); err != nil {
		return err
	}
	if b.h, err = bf(make([]float32, m*ff), m, ff); err != nil {
		return err
	}
	if b.y, err = bf(make([]float32, m*hid), m, hid); err != nil {
		return err
	}
	bb, err := jit.Alloc[float32](d, ff)
	if err != nil {
		return err
	}
	bufs = append(bufs, bb)
	if err := bb.CopyFromHost(hb1); err != nil {
		return err
	}
	if b.b1, err = ops.New(bb, ff); err != nil {
		return err
	}
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	if err := b.forward(ctx, s); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	// Check: H against float64 from X, W1, b1; Y against float64 from the device's H.
	gh, gy := make([]fp.BF16, m*ff), make([]fp.BF16, m*hid)
	if err := b.h.Buffer().CopyToHost(gh); err != nil {
		return err
	}
	if err := b.y.Buffer().CopyToHost(gy); err != nil {
		return err
	}
	round := func(v []float32) []float32 { return fp.Float32s(fp.From[fp.BF16](v)) }
	rx, rw1, rw2, h := round(hx), round(hw1), round(hw2), fp.Float32s(gh)
	worst := 0.0
	rows := max(2, min(m, 64, int(4e9/(4*float64(hid)*float64(ff))))) // a few seconds of host work
	for t := 0; t < rows; t++ {
		r := (t * 7919) % m
		if t == 0 {
			r = m - 1
		}
		for j := 0; j < ff; j++ {
			acc, abs := float64(hb1[j]), math.Abs(float64(hb1[j]))
			for l := 0; l < hid; l++ {
				p := float64(rx[r*hid+l]) * float64(rw1[l*ff+j])
				acc, abs = acc+p, abs+math.Abs(p)
			}
			want := acc / (1 + math.Exp(-acc))
			worst = math.Max(worst, math.Abs(float64(h[r*ff+j])-want)/(0x1p-8*(math.Abs(want)+abs*0x1p-4)+1e-3))
		}
		for j := 0; j < hid; j++ {
			acc, abs := float64(rx[r*hid+j]), math.Abs(float64(rx[r*hid+j]))
			for l := 0; l < ff; l++ {
				p := float64(h[r*ff+l]) * float64(rw2[l*hid+j])
				acc, abs = acc+p, abs+math.Abs(p)
			}
			got := float64(gy[r*hid+j].Float32())
			worst = math.Max(worst, math.Abs(got-acc)/(0x1p-8*(math.Abs(acc)+abs*0x1p-4)+1e-3))
		}
	}
	if worst > 1 {
		return fmt.Errorf("the block's H or Y differs from float64 by %.3g x the tolerance (sampled rows)", worst)
	}
	per := time.Duration(0)
	if reps > 0 {
		t0 := time.Now()
		for i := 0; i < reps; i++ {
			if err := b.forward(ctx, s); err != nil {
				return err
			}
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		per = time.Since(t0) / time.Duration(reps)
	}
	timing := "not timed (-reps 0)"
	if per > 0 {
		flops := 4 * float64(m) * float64(hid) * float64(ff)
		timing = fmt.Sprintf("%v per block (%.1f TFLOP/s)", per, flops/per.Seconds()/1e12)
	}
	fmt.Printf("mlp: %d tokens, hidden %d, ff %d, bf16 on %s (%s): H and Y match float64 (%.3g of the tolerance, %d rows); %s; kernels %v\n",
		m, hid, ff, d.Info().Name, d.Info().Arch, worst, rows, timing, ops.Kernels(d))
	return nil
}
