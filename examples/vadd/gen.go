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

// saxpyArgs are saxpy's parameters; the generated SaxpyArgs mirrors them on the host.
type saxpyArgs struct {
	Alpha dsl.Value
	X, Y  dsl.Ptr
	N     dsl.Value `kgen:"u32"`
}

// saxpy computes y[i] = alpha*x[i] + y[i] for i < n with a grid-stride loop.
func saxpy(k *dsl.Kernel) {
	a := dsl.Params[saxpyArgs](k, dsl.F32)
	k.For(k.GlobalThreadIdx(dsl.X), a.N, k.GridStride(dsl.X), func(i dsl.Value) {
		yi := a.Y.At(i)
		k.Store(yi, k.FMA(a.Alpha, k.Load(a.X.At(i)), k.Load(yi)))
	})
}
