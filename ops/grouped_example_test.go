package ops_test

import (
	"context"
	"fmt"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ops"
)

// Two experts' rows stacked in one matrix (as the MoE dispatch leaves them): rows 0-2 go
// through expert 0's weights (all 1), rows 3-4 through expert 1's (all 2); the offsets stay
// on the device.
func ExampleGroupedMatmul() {
	ctx := context.Background()
	dev, err := jit.OpenBackend(jit.Emulator, 0) // or jit.Open(0): an H100 when there is one
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()
	const rows, k, n = 5, 8, 8
	ha := make([]float32, rows*k)
	for i := range ha {
		ha[i] = float32(i / k) // row r holds r
	}
	hb := make([]float32, 2*k*n)
	for i := range hb {
		hb[i] = float32(1 + i/(k*n)) // expert g's weights are g+1
	}
	ab, _ := jit.Alloc[fp.BF16](dev, len(ha))
	bb, _ := jit.Alloc[fp.BF16](dev, len(hb))
	db, _ := jit.Alloc[fp.BF16](dev, rows*n)
	ob, _ := jit.Alloc[int32](dev, 3)
	_ = ab.CopyFromHost(fp.From[fp.BF16](ha))
	_ = bb.CopyFromHost(fp.From[fp.BF16](hb))
	_ = ob.CopyFromHost([]int32{0, 3, 5})
	a, _ := ops.New(ab, rows, k)
	b, _ := ops.New(bb, 2, k, n)
	d, _ := ops.New(db, rows, n)
	offsets, _ := ops.New(ob, 3)
	if err := ops.GroupedMatmul(ctx, nil, d, a, b, offsets, nil); err != nil {
		fmt.Println(err)
		return
	}
	got := make([]fp.BF16, rows*n)
	_ = db.CopyToHost(got)
	for r := 0; r < rows; r++ {
		fmt.Print(got[r*n].Float32(), " ")
	}
	fmt.Println()
	// Output: 0 8 16 48 64
}
