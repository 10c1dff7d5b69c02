package kernels

import (
	"fmt"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/excerpt"
	"github.com/kgen-dev/kgen/ptx"
)

// The gemm families, as the host chooses between them (ChooseGemm).
const (
	FamilyGemm     Family = "gemm"
	FamilyGemmSM90 Family = "gemm_sm90"
)

// GemmChoice is the gemm the host runs for a problem: FamilyGemmSM90 with SM90, or
// FamilyGemm (mma.sync) with Config; Why says which rule picked it.
type GemmChoice struct {
	Family Family
	Config GemmConfig     // FamilyGemm's
	SM90   GemmSM90Config // FamilyGemmSM90's
	Why    string
}

// UseSM90 reports whether a gemm-shaped kernel for target t with N columns and a K-long
// inner dimension runs on the sm_90a path (TMA + wgmma): t is sm_90a and N and K are
// multiples of 8 (TMA needs 16-byte row strides); why says which rule decided.
func UseSM90(t ptx.Target, n, k int) (ok bool, why string) {
	switch {
	case t != ptx.SM90a:
		return false, fmt.Sprintf("target %s has no wgmma (sm_90a only): the mma.sync kernel", t)
	case n%8 != 0 || k%8 != 0:
		return false, fmt.Sprintf("N = %d, K = %d: TMA needs multiples of 8 (16-byte row strides); the mma.sync kernel", n, k)
	}
	return true, "sm_90a: TMA + wgmma"
}

// ChooseGemm picks the gemm of dt (out = dt) for an m x n x k problem on target t, a GPU of
// sms multiprocessors: gemm_sm90 in the configuration GemmSM90For picks for the shape
// (SM90.TMAStore says whether the launch passes D's tensor map) where UseSM90 says so, the
// mma.sync gemm (DefaultGemmConfig, aligned when M, N and K are multiples of 8) otherwise.
// A shape the chosen kernel's CheckShape refuses is an error naming the limit.
func ChooseGemm(t ptx.Target, dt dsl.Type, m, n, k, sms int) (GemmChoice, error) {
	if !t.Valid() {
		return GemmChoice{}, fmt.Errorf("ChooseGemm: unknown target %s", excerpt.Quote(string(t)))
	}
	if dt != dsl.F16 && dt != dsl.BF16 {
		return GemmChoice{}, fmt.Errorf("ChooseGemm: element type %s (want f16 or bf16)", typeName(dt))
	}
	if m <= 0 || n <= 0 || k <= 0 {
		return GemmChoice{}, fmt.Errorf("ChooseGemm: shape %dx%dx%d: every extent must be positive", m, n, k)
	}
	if sms <= 0 {
		return GemmChoice{}, fmt.Errorf("ChooseGemm: %d multiprocessors: want a positive count (the device's)", sms)
	}
	ok, why := UseSM90(t, n, k)
	if ok {
		c, err := GemmSM90For(dt, dt, m, n, k, sms)
		if err != nil {
			return GemmChoice{}, fmt.Errorf("ChooseGemm: %w", err)
		}
		return GemmChoice{Family: FamilyGemmSM90, SM90: c, Why: why}, nil
	}
	c := DefaultGemmConfig(dt)
	c.Aligned = m%8 == 0 && n%8 == 0 && k%8 == 0
	if err := c.CheckShape(m, n, k); err != nil {
		return GemmChoice{}, fmt.Errorf("ChooseGemm: %w", err)
	}
	return GemmChoice{Family: FamilyGemm, Config: c, Why: why}, nil
}
