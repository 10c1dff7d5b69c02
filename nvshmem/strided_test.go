package nvshmem

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
)

// TestStridedTensorsRefused checks that Put and Get refuse a tensor whose elements are not
// consecutive (they copied layout 4:2 as if it were 4:1), at the caller's line, and still
// take contiguous tensors of any shape.
func TestStridedTensorsRefused(t *testing.T) {
	lay := func(s string) layout.Layout {
		l, err := layout.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, c := range []struct {
		name, layout string
		get          bool
	}{
		{"put 4:2", "4:2", false},
		{"get 4:2", "4:2", true},
		{"row-major 2x4", "(2,4):(4,1)", false},
		{"padded rows", "(4,2):(1,8)", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := dsl.New("strided")
			p, q := k.PtrParam("p", dsl.F32), k.PtrParam("q", dsl.F32)
			strided := k.MakeTensor(p, lay(c.layout))
			flat := k.MakeTensor(q, lay("8:1"))
			if c.get {
				Get(k, Thread, strided, flat, 1)
			} else {
				Put(k, Thread, flat, strided, 1)
			}
			_, err := k.Build()
			if err == nil || !strings.Contains(err.Error(), "not contiguous") || !strings.Contains(err.Error(), "nvshmem/strided_test.go:") {
				t.Fatalf("Build: %v; want a not-contiguous error at this file's line", err)
			}
		})
	}
	k := dsl.New("contiguous")
	p, q := k.PtrParam("p", dsl.F32), k.PtrParam("q", dsl.F32)
	Put(k, Block, k.MakeTensor(p, lay("(4,2):(1,4)")), k.MakeTensor(q, lay("((2,2),2):((1,2),4)")), 1)
	Get(k, Thread, k.MakeTensor(p, lay("(1,8):(64,1)")), k.MakeTensor(q, lay("8:1")), 1)
	if _, err := k.Build(); err != nil {
		t.Fatal(err)
	}
}
