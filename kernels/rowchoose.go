package kernels

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/excerpt"
)

// The split-row families (rowsplit.go).
const (
	FamilyRowSumSplit  Family = "row_sum_split"
	FamilySoftmaxSplit Family = "softmax_split"
)

// The row kernels' limits. They index rows and columns in u32: a row loop steps from a row
// below rows by the grid's rows at once (at most 2^31 with rows <= 2^31-1, so the sum stays
// below 2^32, and a block-per-row grid of rows blocks stays within CUDA's 2^31-1); a chunk
// loop steps from a column below cols by up to 32768 columns, and the split kernels round
// each of at most cols/8192 segments up to 8 columns: both stay below 2^32 with cols <=
// 2^32-2^23. The split launch counts blocks and scratch words from the multiprocessors in
// u32 too: at most 2^16 of them keep those below 2^26.
const (
	MaxRowRows = 1<<31 - 1     // rows of a row kernel's matrix, at most
	MaxRowCols = 1<<32 - 1<<23 // columns, at most
	MaxRowSMs  = 1 << 16       // multiprocessors ChooseRowKernel plans for, at most
)

// RowLaunch is how the host runs a row family on one matrix: the kernel (ID) and its
// launch. For the split kernels (Split), launch Grid x Block co-resident
// (jit.LaunchConfig.CoResident) with Parts and ScratchWords u32 words of scratch, zero
// before the first launch (every launch leaves it ready for the next); otherwise Grid x Block
// plainly.
type RowLaunch struct {
	ID    ID
	Split bool
	SplitShape
	Why string // the rule that decided, in words
}

// ChooseRowKernel picks the kernel of a row family (FamilySoftmax or FamilyRowSum) for a
// rows x cols matrix of dt on a device of sms multiprocessors (jit.Info.Multiproc), and
// its launch. The split kernel (several blocks per row) is taken when a row cuts into at
// least two segments of splitMinSeg (8192) elements and there are too few rows to fill the
// device with a block a row: softmax when rows < sms, row_sum when 4*rows <= sms (row_sum's
// block a row reads at full speed from fewer rows than softmax's, and the split's per-row
// barrier costs more than it gains until then). Otherwise the block-per-row (or warp-per-row)
// kernel. The thresholds come from an H100 (132 SMs, 2026-11-25, docs/bench.md): at 64 x
// 262144 softmax_split took 79 us against softmax's 86, row_sum_split 44 against row_sum's 34;
// at 16 x 1048576 row_sum_split 43 us against 84; at 256 x 65536 softmax 69 us against
// softmax_split's 79.
func ChooseRowKernel(f Family, dt dsl.Type, rows, cols, sms int) (RowLaunch, error) {
	split := map[Family]Family{FamilySoftmax: FamilySoftmaxSplit, FamilyRowSum: FamilyRowSumSplit}[f]
	if split == "" {
		return RowLaunch{}, fmt.Errorf("ChooseRowKernel: family %s is not a row family (want %s or %s)", excerpt.Quote(string(f)), FamilySoftmax, FamilyRowSum)
	}
	if _, err := Find(ID{Family: f, DType: dt}); err != nil {
		return RowLaunch{}, fmt.Errorf("ChooseRowKernel: %w", err)
	}
	if err := CheckRowShape(rows, cols); err != nil {
		return RowLaunch{}, fmt.Errorf("ChooseRowKernel: %s of %d x %d: %w", f, rows, cols, err)
	}
	if sms < 1 || sms > MaxRowSMs {
		return RowLaunch{}, fmt.Errorf("ChooseRowKernel: %d multiprocessors: want 1 to %d (2^16)", sms, MaxRowSMs)
	}
	one := func(why string) (RowLaunch, error) {
		sh := SoftmaxShape(rows, cols)
		if f == FamilyRowSum {
			sh = RowSumShape(rows, cols)
		}
		return RowLaunch{ID: ID{Family: f, DType: dt}, SplitShape: SplitShape{Grid: sh.Grid, Block: sh.Block}, Why: why}, nil
	}
	if cols < 2*splitMinSeg {
		return one(fmt.Sprintf("rows of %d < %d elements: too short to split", cols, 2*splitMinSeg))
	}
	sh := SplitRowShape(rows, cols, sms)
	few := rows < sms
	if f == FamilyRowSum {
		few = 4*rows <= sms
	}
	if !few {
		return one(fmt.Sprintf("%d rows on %d SMs: a block a row fills the device", rows, sms))
	}
	why := fmt.Sprintf("%d rows on %d SMs: %d blocks a row fill the device", rows, sms, sh.Parts)
	return RowLaunch{ID: ID{Family: split, DType: dt}, Split: true, SplitShape: sh, Why: why}, nil
}

// CheckRowShape returns an error naming the operand and its limit unless a rows x cols
// matrix is within the row kernels' (softmax, row_sum, their split and strided forms):
// rows in [1, MaxRowRows], cols in [1, MaxRowCols].
func CheckRowShape(rows, cols int) error {
	if rows < 1 || rows > MaxRowRows {
		return fmt.Errorf("rows = %d: want 1 to %d (2^31-1: the kernels step through rows in u32)", rows, MaxRowRows)
	}
	if cols < 1 || int64(cols) > MaxRowCols {
		return fmt.Errorf("cols = %d: want 1 to %d (2^32-2^23: the kernels step through columns in u32)", cols, int64(MaxRowCols))
	}
	return nil
}
