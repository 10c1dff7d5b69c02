package ops

import (
	"context"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
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

// TestFreedBuffer: a tensor over a freed buffer is refused by New and by the ops (their
// launches would write memory the buffer no longer owns).
func TestFreedBuffer(t *testing.T) {
	d := emuDevice(t)
	ctx := context.Background()
	b, err := jit.Alloc[float32](d, 64)
	if err != nil {
		t.Fatal(err)
	}
	x, err := New(b, 8, 8)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := New(b, 64)
	b.Free()
	if _, err := New(b, 8, 8); err == nil || !strings.Contains(err.Error(), "freed") {
		t.Errorf("New on a freed buffer = %v", err)
	}
	for name, err := range map[string]error{
		"Softmax":   Softmax(ctx, nil, x, x),
		"Add":       Add(ctx, nil, v, v, v),
		"Axpy":      Axpy(ctx, nil, v, v, 2),
		"Transpose": Transpose(ctx, nil, x, x),
	} {
		if err == nil || !strings.Contains(err.Error(), "freed") {
			t.Errorf("%s on a freed buffer = %v", name, err)
		}
	}
}

// TestViewErrorsBounded: a View with a very long shape is refused with a short error.
func TestViewErrorsBounded(t *testing.T) {
	d := emuDevice(t)
	b, _ := jit.Alloc[float32](d, 64)
	x, _ := New(b, 8, 8)
	for _, s := range [][]int{make([]int, 1<<20), append(make([]int, 1<<20), 1)} {
		_, err := x.View(s...)
		if err == nil || len(err.Error()) > 200 {
			t.Errorf("View of a %d-long shape: %d-byte error", len(s), len(err.Error()))
		}
	}
	if _, err := x.View(1<<32, 1<<32, 1<<32, 1<<32); err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("View overflowing = %v", err)
	}
}

// TestLenOverflow: a broadcast view whose element count overflows an int is refused (its
// Len would wrap to a wrong count).
func TestLenOverflow(t *testing.T) {
	d := emuDevice(t)
	b, _ := jit.Alloc[float32](d, 64)
	for _, shape := range [][]int{{1 << 40, 1 << 40}, {1 << 62, 4}} {
		x, err := Strided(b, 0, shape, []int{0, 0})
		if err == nil || !strings.Contains(err.Error(), "element count") {
			t.Errorf("Strided(%v, strides 0) = %v (Len %d)", shape, err, x.Len())
		}
	}
	if x, err := Strided(b, 0, []int{1 << 30, 1 << 30}, []int{0, 0}); err != nil || x.Len() != 1<<60 {
		t.Errorf("a broadcast of 2^60 elements: %v, Len %d", err, x.Len())
	}
}

// TestFunctionTargets: the module cache keys a kernel by name and target: a name built for
// one target is built again for another (MatmulOptions.Target is honoured after the first).
func TestFunctionTargets(t *testing.T) {
	d := emuDevice(t)
	st := stateOf(d)
	builds := map[ptx.Target]int{}
	for _, target := range []ptx.Target{ptx.SM80, ptx.SM90, ptx.SM80} {
		tg := target
		_, err := st.function(context.Background(), "row_sum_strided_test", tg, func(k *dsl.Kernel) {
			builds[tg]++
			kernels.RowSumStrided(k, dsl.F32)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if builds[ptx.SM80] != 1 || builds[ptx.SM90] != 1 {
		t.Errorf("builds per target: %v; want one each", builds)
	}
	if ks := Kernels(d); len(ks) != 1 || ks[0] != "row_sum_strided_test" {
		t.Errorf("Kernels = %v", ks)
	}
}
