//go:build generate

// The tag keeps this program out of the package's build; unlike "ignore", it lets go mod tidy
// see its imports (kgen/gen and what gen needs).
//
// The generator of this example's kernels: `go generate` runs it and writes the PTX files and
// vadd_kgen.go beside it.
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
			{Name: "saxpy", Doc: "y = alpha*x + y.", Build: saxpy},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
}

// saxpy computes y[i] = alpha*x[i] + y[i] for i < n with a grid-stride loop.
func saxpy(k *dsl.Kernel) {
	alpha := k.Param("alpha", dsl.F32)
	x := k.PtrParam("x", dsl.F32)
	y := k.PtrParam("y", dsl.F32)
	n := k.Param("n", dsl.U32)
	k.For(k.GlobalThreadIdx(dsl.X), n, k.GridStride(dsl.X), func(i dsl.Value) {
		yi := y.At(i)
		k.Store(yi, k.FMA(alpha, k.Load(x.At(i)), k.Load(yi)))
	})
}
