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

// sgdStep applies w[i] -= (lr/world) * g[i] for i < n, g being the all-reduced gradient sum.
func sgdStep(k *dsl.Kernel) {
	w := k.PtrParam("w", dsl.F32)
	g := k.PtrParam("g", dsl.F32)
	scale := k.Param("scale", dsl.F32) // -lr / world
	n := k.Param("n", dsl.U32)
	k.For(k.GlobalThreadIdx(dsl.X), n, k.GridStride(dsl.X), func(i dsl.Value) {
		wi := w.At(i)
		k.Store(wi, k.FMA(scale, k.Load(g.At(i)), k.Load(wi)))
	})
}

// grad writes g[i] = w[i] - t[i]: the gradient of 0.5*|w - t|^2 for this rank's target t.
func grad(k *dsl.Kernel) {
	w := k.PtrParam("w", dsl.F32)
	t := k.PtrParam("t", dsl.F32)
	g := k.PtrParam("g", dsl.F32)
	n := k.Param("n", dsl.U32)
	k.For(k.GlobalThreadIdx(dsl.X), n, k.GridStride(dsl.X), func(i dsl.Value) {
		k.Store(g.At(i), k.Load(w.At(i)).Sub(k.Load(t.At(i))))
	})
}
