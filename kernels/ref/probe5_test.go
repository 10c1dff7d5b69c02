package ref

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// TestProbeGemmNegativeIssueAfter: a negative GemmConfig.IssueAfter never issued the
// main loop's next loads, so a K longer than the prologue's stages read stale shared
// memory (before: 1024 of 1024 values of D wrong, no error): it must be refused.
func TestProbeGemmNegativeIssueAfter(t *testing.T) {
	cfg := kernels.GemmConfig{In: dsl.BF16, Out: dsl.F32, BM: 32, BN: 32, BK: 32, WarpsM: 2, WarpsN: 2, Stages: 2, Aligned: true, IssueAfter: -1}
	res, err := RunGemm(GemmProblem{Config: cfg, M: 32, N: 32, K: 256, Alpha: 1, Seed: 1})
	if err == nil || !strings.Contains(err.Error(), "IssueAfter -1") {
		t.Fatalf("RunGemm with IssueAfter -1 = %v (%+v); want the configuration refused naming IssueAfter", err, res)
	}
}
