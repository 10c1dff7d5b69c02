package ops

import (
	"context"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// TestPlanRowsLimits: the strided row kernels refuse the shapes the library's refuse (their
// u32 row and column loops would wrap), naming the operand and the limit, before building
// or caching a plan.
func TestPlanRowsLimits(t *testing.T) {
	d := emuDevice(t)
	st := stateOf(d)
	for _, c := range []struct {
		f          kernels.Family
		rows, cols int
		want       string
	}{
		{kernels.FamilySoftmax, kernels.MaxRowRows + 1, 8, "rows = 2147483648"},
		{kernels.FamilyRowSum, 1 << 32, 8, "2^31-1"},
		{kernels.FamilySoftmax, 1, 1<<32 - 1, "cols = 4294967295"},
		{kernels.FamilyRowSum, 2, kernels.MaxRowCols + 1, "2^32-2^23"},
	} {
		// Strided: ld above cols.
		key := planKey{op: string(c.f), in: ptx.F32, dims: [3]int{c.rows, c.cols}, lds: [4]int{c.cols + 8, c.cols + 8}, target: ptx.SM90}
		_, err := planRows(context.Background(), st, key, c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("planRows(%s, %d x %d strided) = %v; want an error with %q", c.f, c.rows, c.cols, err, c.want)
		}
		if st.lookup(key) != nil {
			t.Errorf("planRows(%s, %d x %d strided) cached a plan", c.f, c.rows, c.cols)
		}
	}
}
