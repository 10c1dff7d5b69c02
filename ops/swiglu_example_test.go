package ops_test

import (
	"context"
	"fmt"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ops"
)

// Three rows of gate|up values (F = 8), of which the device row count says 2 are live: row r
// has gate r and up 2, so out = silu(r)*2; the third row is not written (it keeps its -1).
func ExampleSwiGLU() {
	ctx := context.Background()
	dev, err := jit.OpenBackend(jit.Emulator, 0) // or jit.Open(0): a GPU when there is one
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()
	const rows, f = 3, 8
	gu := make([]float32, rows*2*f)
	for i := range gu {
		gu[i] = float32(i / (2 * f)) // gate
		if i%(2*f) >= f {
			gu[i] = 2 // up
		}
	}
	init := make([]float32, rows*f)
	for i := range init {
		init[i] = -1
	}
	gb, _ := jit.Alloc[fp.BF16](dev, len(gu))
	ob, _ := jit.Alloc[fp.BF16](dev, len(init))
	cb, _ := jit.Alloc[int32](dev, 1)
	_ = gb.CopyFromHost(fp.From[fp.BF16](gu))
	_ = ob.CopyFromHost(fp.From[fp.BF16](init))
	_ = cb.CopyFromHost([]int32{2})
	gateUp, _ := ops.New(gb, rows, 2*f)
	out, _ := ops.New(ob, rows, f)
	count, _ := ops.New(cb, 1)
	if err := ops.SwiGLU(ctx, nil, out, gateUp, &ops.SwiGLUOptions{Rows: count}); err != nil {
		fmt.Println(err)
		return
	}
	got := make([]fp.BF16, rows*f)
	_ = ob.CopyToHost(got)
	for r := 0; r < rows; r++ {
		fmt.Print(got[r*f].Float32(), " ")
	}
	fmt.Println()
	// Output: 0 1.4609375 -1
}
