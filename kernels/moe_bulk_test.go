package kernels

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/ptx"
)

// TestMoEBulkPtxas assembles the normal-mode MoE kernels for sm_90a (the bulk paths:
// cp.async.bulk present) and sm_80 (the register paths: none) with ptxas -v: no spills
// (the combine's 64 f32 accumulators a lane), no performance warning.
func TestMoEBulkPtxas(t *testing.T) {
	ptxas := tooltest.Ptxas(t)
	for _, f := range []Family{FamilyMoEDispatchCount, FamilyMoEDispatchLayout, FamilyMoEDispatchSend, FamilyMoEDispatchExpand, FamilyMoECombine} {
		s, err := Find(ID{Family: f, DType: dsl.BF16})
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range []ptx.Target{ptx.SM90a, ptx.SM80} {
			b, err := s.BuildVariant(Config{Target: tg, DType: dsl.BF16})
			if err != nil {
				t.Fatalf("%s %s: %v", f, tg, err)
			}
			src := b.Module.String()
			rows := f == FamilyMoEDispatchSend || f == FamilyMoEDispatchExpand || f == FamilyMoECombine
			if bulk := strings.Contains(src, "cp.async.bulk.global.shared::cta"); bulk != (rows && MoEBulk(tg)) {
				t.Errorf("%s %s: bulk stores %v, want %v", f, tg, bulk, rows && MoEBulk(tg))
			}
			file := filepath.Join(t.TempDir(), "m.ptx")
			if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(ptxas, "-arch="+string(tg), "-v", file, "-o", file+".cubin").CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: ptxas: %v: %s", f, tg, err, out)
			}
			if o := string(out); strings.Contains(o, "bytes spill stores") && !strings.Contains(o, " 0 bytes spill stores") ||
				strings.Contains(o, "Potential Performance Loss") {
				t.Errorf("%s %s: ptxas warns or spills: %s", f, tg, o)
			}
		}
	}
}

// TestMoEPieceBytes: rows split into the fewest pieces of at most the budget, equal sizes
// rounded up to 16 bytes, and the stage budgets fit a block's shared memory.
func TestMoEPieceBytes(t *testing.T) {
	for _, c := range []struct{ row, max, want int }{
		{16, MoESendMaxPiece, 16}, {48, 32, 32}, {14336, MoESendMaxPiece, 4784}, {14336, MoECombineMaxPiece, 3584},
		{32768, MoESendMaxPiece, 5472}, {32768, MoECombineMaxPiece, 4096}, {592, 64, 64}, {80, 16, 16},
	} {
		if got := MoEPieceBytes(c.row, c.max); got != c.want || got%16 != 0 || got > c.max {
			t.Errorf("MoEPieceBytes(%d, %d) = %d, want %d", c.row, c.max, got, c.want)
		}
	}
	if s, c := MoESendShared(MoESendMaxPiece), MoECombineShared(MoECombineMaxPiece); s > MoESharedBudget || c > MoESharedBudget {
		t.Errorf("shared memory %d and %d past the budget %d", s, c, MoESharedBudget)
	}
}
