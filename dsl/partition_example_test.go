package dsl_test

import (
	"fmt"
	"strings"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
)

// A tiled copy from a thread-value layout, as CuTe DSL builds one with make_layout_tv: 8 rows
// of 32 threads, each moving 4 consecutive floats of its row (one 128-bit access).
func ExampleTensor_PartitionByTV() {
	thr := layout.MustParse("(8,32):(32,1)") // thread t at row t/32, column t%32
	val := layout.MustParse("(1,4):(1,1)")   // 1 row x 4 columns of values
	tiler, tv, err := layout.MakeLayoutTV(thr, val)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("tiler", tiler, "tv", tv)

	k := dsl.New("copy_tv", dsl.WithoutLoc())
	src, dst := k.PtrParam("src", dsl.F32), k.PtrParam("dst", dsl.F32)
	tile := layout.MustParse("(8,128):(128,1)")
	tid := k.ThreadIdx(dsl.X)
	tS := k.MakeTensor(src, tile).PartitionByTV(tiler, tv, tid)
	tD := k.MakeTensor(dst, tile).PartitionByTV(tiler, tv, tid)
	frag := k.Fragment(dsl.F32, tS)
	k.Copy(tS, frag)
	k.Copy(frag, tD)
	m, err := k.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range strings.Split(body(m), "\n") {
		if strings.Contains(l, ".global.v4") {
			fmt.Println(l)
		}
	}
	// Output:
	// tiler (8,128) tv ((32,8),4):((32,1),8)
	// ld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%ud4];
	// st.global.v4.f32 [%ud5], {%f0, %f1, %f2, %f3};
}
