package ref

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// TestGemmSM90Pieces runs the Pieces option on the emulator: D as without it (against the
// Go reference), every piece's counter advanced by exactly PieceSignals from where earlier
// launches left it, and, on one block, watched mid-run: piece-major (no counter moves before
// the earlier pieces are complete) with pieces complete before the kernel ends.
func TestGemmSM90Pieces(t *testing.T) {
	pp := kernels.GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 128, Consumers: 2, Stages: 4, PingPong: true}
	for _, c := range []struct {
		cfg                 kernels.GemmSM90Config
		store               bool
		m, n, k, rows, grid int
		epoch, shift        int
	}{
		{kernels.DefaultGemmSM90Config(dsl.BF16), false, 512, 264, 72, 128, 1, 3, 0},
		{kernels.DefaultGemmSM90Config(dsl.BF16), true, 256, 136, 64, 128, 1, 1, 128},
		{pp, false, 256, 136, 64, 64, 1, 2, 192},
		{pp, true, 256, 136, 64, 128, 2, 1, 0},
		{kernels.GemmSM90Config{In: dsl.F16, Out: dsl.F32, BN: 64, Consumers: 1, Stages: 3}, false, 384, 200, 72, 128, 3, 5, 256},
		{kernels.DefaultGemmSM90Config(dsl.E4M3), false, 256, 136, 80, 128, 2, 1, 128},
	} {
		cfg := c.cfg
		cfg.Pieces, cfg.TMAStore = true, c.store
		t.Run(fmt.Sprintf("%s_%dx%dx%d_rows%d_grid%d_shift%d", cfg.Name(), c.m, c.n, c.k, c.rows, c.grid, c.shift), func(t *testing.T) {
			res, err := RunGemmSM90(GemmSM90Problem{Config: cfg, M: c.m, N: c.n, K: c.k, Alpha: 1, Beta: 0, Seed: 11, Blocks: c.grid,
				PieceRows: c.rows, PieceEpoch: c.epoch, RowShift: c.shift})
			if err != nil {
				t.Fatal(err)
			}
			if res.Checked != c.m*c.n {
				t.Fatalf("checked %d values, want %d", res.Checked, c.m*c.n)
			}
		})
	}
}

// TestGemmSM90PiecesShape: a piece size the kernel cannot signal for is refused.
func TestGemmSM90PiecesShape(t *testing.T) {
	cfg := kernels.DefaultGemmSM90Config(dsl.BF16)
	cfg.Pieces = true
	_, err := RunGemmSM90(GemmSM90Problem{Config: cfg, M: 200, N: 64, K: 64, Alpha: 1, PieceRows: 128})
	if err == nil || !strings.Contains(err.Error(), "not a multiple") {
		t.Fatalf("M 200 in pieces of 128: %v", err)
	}
}
