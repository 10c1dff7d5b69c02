// Command allreduce is the service-style example: data-parallel training steps on N GPUs.
// Every rank holds the same weights w and its own target t; each step computes its gradient
// w - t with a generated kernel, sums the gradients over the ranks with collectives'
// AllReduce (the algorithm picked by size and by whether NVLink multicast exists), and
// applies w -= lr * sum / N with another generated kernel. The weights converge to the mean
// of the targets on every rank, which the program checks.
//
//	kgen launch -n 4 --backend emu -- go run ./examples/allreduce   (4 simulated GPUs)
//	kgen launch -n 2 -- ./allreduce                                  (2 GPUs, built with -tags cuda)
package main

//go:generate go run gen.go

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
)

func main() {
	n := flag.Int("n", 1<<16, "model size (float32 weights)")
	steps := flag.Int("steps", 20, "training steps")
	flag.Parse()
	log.SetFlags(0)
	if err := jit.RunRanks(jit.RanksOptions{NVSHMEM: true}, func(r *jit.Rank) error {
		return train(r, *n, *steps)
	}); err != nil {
		log.Fatalf("allreduce: %v", err)
	}
}

// train runs the steps on one rank and checks the result.
func train(r *jit.Rank, n, steps int) error {
	if n <= 0 || steps <= 0 {
		return fmt.Errorf("-n %d -steps %d: want positive values", n, steps)
	}
	ctx := context.Background()
	d := r.Device
	k, err := Load(d)
	if err != nil {
		return err
	}
	defer k.Close()
	comm, err := collectives.New(ctx, r, collectives.Options{})
	if err != nil {
		return err
	}
	defer comm.Close()

	// The gradient lives in symmetric memory so that the all-reduce kernels reach every copy.
	g, err := comm.Alloc(dsl.F32, n)
	if err != nil {
		return err
	}
	w, err := jit.Alloc[float32](d, n)
	if err != nil {
		return err
	}
	defer w.Free()
	t, err := jit.Alloc[float32](d, n)
	if err != nil {
		return err
	}
	defer t.Free()
	target := make([]float32, n)
	for i := range target {
		target[i] = float32(r.Rank+1) + float32(i%7)
	}
	if err := t.CopyFromHost(target); err != nil {
		return err
	}
	if err := w.CopyFromHost(make([]float32, n)); err != nil {
		return err
	}

	const lr = 0.5
	gp := jit.TypedPtr[float32](g.DevPtr())
	cfg := jit.LaunchConfig{Grid: jit.D1(min((n+255)/256, 256)), Block: jit.D1(256)}
	for s := 0; s < steps; s++ {
		if err := k.Grad.Launch(cfg, GradArgs{W: w, T: t, G: gp, N: uint32(n)}); err != nil {
			return err
		}
		if err := d.Synchronize(); err != nil {
			return err
		}
		if err := comm.AllReduce(ctx, g, collectives.Sum); err != nil {
			return err
		}
		if err := d.Synchronize(); err != nil {
			return err
		}
		if err := k.SgdStep.Launch(cfg, SgdStepArgs{W: w, G: gp, Scale: float32(-lr / float64(r.World)), N: uint32(n)}); err != nil {
			return err
		}
	}
	got := make([]float32, n)
	if err := w.CopyToHost(got); err != nil {
		return err
	}
	// With lr 0.5 the distance to the mean target halves every step.
	for i, x := range got {
		mean := float64(r.World+1)/2 + float64(i%7)
		want := mean * (1 - math.Pow(1-lr, float64(steps)))
		if math.Abs(float64(x)-want) > 1e-4*math.Max(1, mean) {
			return fmt.Errorf("rank %d: w[%d] = %v after %d steps, want %v", r.Rank, i, x, steps, want)
		}
	}
	if r.Rank == 0 {
		fmt.Printf("allreduce: %d ranks on %s, %d steps of %d weights: every rank converged (all-reduce: %s)\n",
			r.World, d.Info().Name, steps, n, comm.LastAlgorithm())
	}
	return nil
}
