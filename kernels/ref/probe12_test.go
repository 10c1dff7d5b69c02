package ref

import (
	"strings"
	"testing"
)

// TestRunSingleGPURefusesRanks: a single-GPU kernel's check with Ranks above 1 or Weak is
// refused (it ran on one device and reported success for what was asked of several; probe
// 12); a collective takes both.
func TestRunSingleGPURefusesRanks(t *testing.T) {
	for _, p := range []Problem{{Kernel: "axpy", Ranks: 4}, {Kernel: "vector_add", Weak: true}} {
		if _, err := Run(p); err == nil || !strings.Contains(err.Error(), "single-GPU kernel") {
			t.Errorf("%+v: %v; want a refusal", p, err)
		}
	}
	if !SingleGPU("axpy") || SingleGPU("p2p_allgather") || SingleGPU("ag_gemm") {
		t.Errorf("SingleGPU: axpy %v, p2p_allgather %v, ag_gemm %v", SingleGPU("axpy"), SingleGPU("p2p_allgather"), SingleGPU("ag_gemm"))
	}
	if _, err := Run(Problem{Kernel: "p2p_allgather", Ranks: 2, Weak: true, Size: 64}); err != nil {
		t.Errorf("p2p_allgather on 2 weak GPUs: %v", err)
	}
}
