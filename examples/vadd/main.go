// Command vadd is the single-GPU example: it generates a saxpy kernel ahead of time (gen.go,
// run by go generate), embeds its PTX and launches it through the generated, typed launcher.
// Built without the cuda tag it runs on the emulator; with -tags cuda on GPU 0.
//
//	go run ./examples/vadd -n 1000000
package main

//go:generate go run gen.go

import (
	"flag"
	"fmt"
	"log"
	"math"
	"os"

	"github.com/kgen-dev/kgen/jit"
)

func main() {
	n := flag.Int("n", 100_000, "vector length")
	flag.Parse()
	if err := run(*n); err != nil {
		log.SetFlags(0)
		log.Fatalf("vadd: %v", err)
	}
}

func run(n int) error {
	if n <= 0 {
		return fmt.Errorf("-n %d: want a positive length", n)
	}
	d, err := jit.Open(0)
	if err != nil {
		return err
	}
	defer d.Close()
	k, err := Load(d)
	if err != nil {
		return err
	}
	defer k.Close()

	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i%97), float32(i%89)*0.5
	}
	dx, err := jit.Alloc[float32](d, n)
	if err != nil {
		return err
	}
	defer dx.Free()
	dy, err := jit.Alloc[float32](d, n)
	if err != nil {
		return err
	}
	defer dy.Free()
	if err := dx.CopyFromHost(x); err != nil {
		return err
	}
	if err := dy.CopyFromHost(y); err != nil {
		return err
	}
	const alpha = 2.5
	blocks := min((n+255)/256, 1024)
	if err := k.Saxpy.Launch(jit.LaunchConfig{Grid: jit.D1(blocks), Block: jit.D1(256)},
		SaxpyArgs{Alpha: alpha, X: dx, Y: dy, N: uint32(n)}); err != nil {
		return err
	}
	got := make([]float32, n)
	if err := dy.CopyToHost(got); err != nil {
		return err
	}
	for i := range got {
		want := float32(math.FMA(alpha, float64(x[i]), float64(y[i])))
		if got[i] != want {
			return fmt.Errorf("y[%d] = %v, want %v", i, got[i], want)
		}
	}
	fmt.Fprintf(os.Stdout, "vadd: saxpy of %d floats on %s (%s) matches the CPU\n", n, d.Info().Name, d.Info().Arch)
	return nil
}
