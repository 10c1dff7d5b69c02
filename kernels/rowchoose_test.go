package kernels

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestChooseRowKernel checks the rule at its boundaries on an H100 (132 SMs) and on the
// emulator's 16, and that every split launch fits the device (at most 1024 threads per SM)
// with one slot of scratch per row slot.
func TestChooseRowKernel(t *testing.T) {
	for _, c := range []struct {
		f                Family
		rows, cols, sms  int
		want             Family
		grid, blk, parts int // the split launch (0: not checked)
	}{
		{FamilySoftmax, 1, 2*splitMinSeg - 1, 132, FamilySoftmax, 0, 0, 0}, // too short to split
		{FamilyRowSum, 1, 2*splitMinSeg - 1, 132, FamilyRowSum, 0, 0, 0},
		{FamilySoftmax, 131, 2 * splitMinSeg, 132, FamilySoftmaxSplit, 262, 256, 2},
		{FamilyRowSum, 33, 2 * splitMinSeg, 132, FamilyRowSumSplit, 66, 256, 2}, // 4*rows <= SMs
		{FamilyRowSum, 34, 2 * splitMinSeg, 132, FamilyRowSum, 0, 0, 0},
		{FamilyRowSum, 131, 2 * splitMinSeg, 132, FamilyRowSum, 0, 0, 0},
		{FamilySoftmax, 132, 2 * splitMinSeg, 132, FamilySoftmax, 0, 0, 0}, // rows fill the SMs
		{FamilyRowSum, 132, 1 << 20, 132, FamilyRowSum, 0, 0, 0},
		{FamilySoftmax, 132, 32768, 132, FamilySoftmax, 0, 0, 0}, // one read already
		{FamilySoftmax, 132, 32769, 132, FamilySoftmax, 0, 0, 0}, // reads twice, still faster (H100)
		{FamilySoftmax, 4096, 65536, 132, FamilySoftmax, 0, 0, 0},
		{FamilyRowSum, 4096, 65536, 132, FamilyRowSum, 0, 0, 0},
		{FamilySoftmax, 132, 132*32768 + 8, 132, FamilySoftmax, 0, 0, 0}, // the split would read twice too
		{FamilySoftmax, 131, 132*32768 + 8, 132, FamilySoftmaxSplit, 132, 1024, 132},
		{FamilySoftmax, 64, 262144, 132, FamilySoftmaxSplit, 126, 1024, 9}, // the bench's shapes
		{FamilySoftmax, 16, 1 << 20, 132, FamilySoftmaxSplit, 132, 1024, 33},
		{FamilyRowSum, 8, 1 << 21, 132, FamilyRowSumSplit, 132, 1024, 66},
		{FamilySoftmax, 15, 16384, 16, FamilySoftmaxSplit, 30, 256, 2}, // the emulator's boundaries
		{FamilySoftmax, 16, 16384, 16, FamilySoftmax, 0, 0, 0},
		{FamilySoftmax, 16, 32769, 16, FamilySoftmax, 0, 0, 0},
		{FamilyRowSum, 4, 16384, 16, FamilyRowSumSplit, 8, 256, 2},
		{FamilyRowSum, 5, 16384, 16, FamilyRowSum, 0, 0, 0},
	} {
		name := fmt.Sprintf("%s/%dx%d/%dSMs", c.f, c.rows, c.cols, c.sms)
		got, err := ChooseRowKernel(c.f, dsl.F32, c.rows, c.cols, c.sms)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got.ID.Family != c.want || got.ID.DType != dsl.F32 || got.Split != (c.want != c.f) || got.Why == "" {
			t.Errorf("%s: chose %+v, want %s", name, got, c.want)
			continue
		}
		if !got.Split {
			want := SoftmaxShape(c.rows, c.cols)
			if c.f == FamilyRowSum {
				want = RowSumShape(c.rows, c.cols)
			}
			if got.Grid != want.Grid || got.Block != want.Block || got.Parts != 0 || got.ScratchWords != 0 {
				t.Errorf("%s: launch %+v, want %+v", name, got.SplitShape, want)
			}
			continue
		}
		if got.Grid != c.grid || got.Block != c.blk || got.Parts != c.parts {
			t.Errorf("%s: launch %+v, want %d blocks of %d, %d a row", name, got.SplitShape, c.grid, c.blk, c.parts)
		}
		if got.Grid*got.Block > c.sms*splitSMThreads || got.Grid%got.Parts != 0 || got.ScratchWords != got.Grid/got.Parts*(2+4*got.Parts) {
			t.Errorf("%s: launch %+v does not fit %d SMs or its scratch", name, got.SplitShape, c.sms)
		}
	}
}

// TestChooseRowKernelErrors: bad families, dtypes and sizes are errors naming the value.
func TestChooseRowKernelErrors(t *testing.T) {
	for _, c := range []struct {
		f               Family
		dt              dsl.Type
		rows, cols, sms int
		want            string
	}{
		{FamilyVectorAdd, dsl.F32, 1, 1, 1, `"vector_add" is not a row family`},
		{FamilySoftmaxSplit, dsl.F32, 1, 1, 1, `"softmax_split" is not a row family`},
		{FamilySoftmax, dsl.U8, 1, 1, 1, `no dtype "u8"`},
		{FamilyRowSum, dsl.F32, 0, 1, 1, "0 x 1"},
		{FamilyRowSum, dsl.F32, 1, -3, 1, "1 x -3"},
		{FamilyRowSum, dsl.F32, 1, 1 << 32, 1, "1 x 4294967296"},
		{FamilySoftmax, dsl.F32, 1, 1, 0, "0 multiprocessors"},
	} {
		_, err := ChooseRowKernel(c.f, c.dt, c.rows, c.cols, c.sms)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ChooseRowKernel(%s, %s, %d, %d, %d) = %v, want an error with %q", c.f, c.dt, c.rows, c.cols, c.sms, err, c.want)
		}
	}
}

// TestChooseRowKernelLimits: shapes whose u32 index arithmetic would wrap in the row kernels
// are refused, naming the operand and the limit; at the limits, a host model of the
// kernels' u32 arithmetic (row loops, chunk loops, the split's segments) stays below 2^32
// for every device size.
func TestChooseRowKernelLimits(t *testing.T) {
	for _, c := range []struct {
		f               Family
		rows, cols, sms int
		want            string
	}{
		{FamilySoftmax, 1 << 31, 1, 132, "rows"},
		{FamilySoftmax, 1<<32 - 1, 1, 132, "2^31-1"},
		{FamilyRowSum, 1, 1<<32 - 1, 132, "cols"},
		{FamilyRowSum, 1, MaxRowCols + 1, 132, "2^32-2^23"},
		{FamilySoftmax, 200, 1<<32 - 1, 132, "cols"},
		{FamilySoftmax, 1, 1, MaxRowSMs + 1, "multiprocessors"},
	} {
		_, err := ChooseRowKernel(c.f, dsl.F16, c.rows, c.cols, c.sms)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ChooseRowKernel(%s, %d x %d, %d SMs) = %v, want an error with %q", c.f, c.rows, c.cols, c.sms, err, c.want)
		}
	}
	const u32 = 1<<32 - 1
	for _, f := range []Family{FamilySoftmax, FamilyRowSum} {
		for _, rows := range []int{1, 2, 7, 131, 1 << 20, MaxRowRows} {
			for _, cols := range []int{1, rowWarpCols, rowWarpCols + 1, 1 << 20, MaxRowCols} {
				for _, sms := range []int{1, 2, 16, 132, 1 << 12, MaxRowSMs} {
					rl, err := ChooseRowKernel(f, dsl.F16, rows, cols, sms)
					if err != nil {
						t.Fatalf("%s %d x %d on %d SMs: %v", f, rows, cols, sms, err)
					}
					name := fmt.Sprintf("%s %d x %d on %d SMs (%+v)", f, rows, cols, sms, rl.SplitShape)
					chunk := rowMaxBlock * rowElems
					if !rl.Split {
						// Row loop: row < rows, row + step; step = grid*(block/32) or grid.
						step := rl.Grid * rl.Block / 32
						if cols > rowWarpCols {
							step = rl.Grid
						}
						if rows-1+step > u32 || rl.Grid > MaxRowRows {
							t.Errorf("%s: the row loop wraps (step %d)", name, step)
						}
						if cols-1+chunk > u32 {
							t.Errorf("%s: the chunk loop wraps", name)
						}
						continue
					}
					parts := rl.Parts
					seg := (cols + parts - 1) / parts
					aseg := seg + splitSegAlign - 1
					seg = aseg &^ (splitSegAlign - 1)
					slots := rl.Grid / parts
					lo := min(cols, (parts-1)*seg)
					for _, v := range []int{cols + parts - 1, aseg, (parts - 1) * seg, lo + seg, cols - 1 + chunk,
						rows - 1 + slots, rl.ScratchWords, rl.Grid} {
						if v > u32 {
							t.Errorf("%s: an intermediate %d wraps u32", name, v)
						}
					}
				}
			}
		}
	}
}
