package dsl_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/layout"
	"github.com/kgen-dev/kgen/ptx"
)

// TestAssumeOnU32Stride checks that Assume on a U32 runtime stride survives the stride's
// conversion to I32: rows of a (m, ld) matrix then take 128-bit accesses. Without Assume they
// cannot (a row could start anywhere).
func TestAssumeOnU32Stride(t *testing.T) {
	for _, assume := range []bool{true, false} {
		s := build(t, ptx.SM90, func(k *dsl.Kernel) {
			p := k.PtrParam("p", dsl.F32)
			m, ld := k.Param("m", dsl.U32), k.Param("ld", dsl.U32)
			if assume {
				ld = k.Assume(ld, 4)
			}
			tid := k.ThreadIdx(dsl.X)
			g := k.MakeTensorDyn(p, []any{m, ld}, []any{ld, 1}).LocalTile([]int{8, 32}, k.BlockIdx(dsl.Y), k.BlockIdx(dsl.X))
			part := g.LocalPartition(layout.MustParse("(8,8):(8,1)"), tid, 1, 4)
			frag := k.Fragment(dsl.F32, part)
			k.Copy(part, frag)
			for i := 0; i < frag.Size(); i++ {
				frag.Set(i, frag.Get(i).Mul(2.0))
			}
			k.Copy(frag, part)
		})
		if got := strings.Contains(s, "ld.global.v4.f32") && strings.Contains(s, "st.global.v4.f32"); got != assume {
			t.Errorf("Assume %v: 128-bit accesses %v", assume, got)
		}
	}
}
