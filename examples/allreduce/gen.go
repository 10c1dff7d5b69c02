//go:build generate

// The tag keeps this program out of the package's build; unlike "ignore", it lets go mod tidy
// see its imports (kgen/gen and what gen needs).
//
// The generator of this example's kernels: `go generate` runs it and writes the PTX files and
// main_kgen.go beside it.
package main

import (
	"log"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/gen"
	"github.com/kgen-dev/kgen/ptx"
)

func main() {
	err := gen.Generate(gen.Package{
		Name:      "main",
		Generator: "go run gen.go",
		Targets:   []ptx.Target{ptx.SM80, ptx.SM90},
		Kernels: []gen.Kernel{
			{Name: "sgd_step", Doc: "w -= lr * g / world.", Build: sgdStep},
			{Name: "grad", Doc: "g = w - target, this rank's gradient.", Build: grad},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
}

// sgdStepArgs are sgd_step's parameters (the generated SgdStepArgs mirrors them).
type sgdStepArgs struct {
	W, G  dsl.Ptr
	Scale dsl.Value // -lr / world
	N     dsl.Value `kgen:"u32"`
}

// sgdStep applies w[i] -= (lr/world) * g[i] for i < n, g being the all-reduced gradient sum.
func sgdStep(k *dsl.Kernel) {
	a := dsl.Params[sgdStepArgs](k, dsl.F32)
	k.For(k.GlobalThreadIdx(dsl.X), a.N, k.GridStride(dsl.X), func(i dsl.Value) {
		wi := a.W.At(i)
		k.Store(wi, k.FMA(a.Scale, k.Load(a.G.At(i)), k.Load(wi)))
	})
}

// gradArgs are grad's parameters (the generated GradArgs mirrors them).
type gradArgs struct {
	W, T, G dsl.Ptr
	N       dsl.Value `kgen:"u32"`
}

// grad writes g[i] = w[i] - t[i]: the gradient of 0.5*|w - t|^2 for this rank's target t.
func grad(k *dsl.Kernel) {
	a := dsl.Params[gradArgs](k, dsl.F32)
	k.For(k.GlobalThreadIdx(dsl.X), a.N, k.GridStride(dsl.X), func(i dsl.Value) {
		k.Store(a.G.At(i), k.Load(a.W.At(i)).Sub(k.Load(a.T.At(i))))
	})
}
