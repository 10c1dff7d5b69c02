package ref

import (
	"strings"
	"testing"
)

// TestNodesOnlyForKernelsThatSpanThem: for every checked kernel whose check does not run on
// the Problem's GPUs split into nodes (single-GPU kernels, the fused GEMMs and their sm_90a
// forms), Run with Nodes 2 is an error naming why, not a pass "in 2 nodes"; and the
// collectives that span nodes still run across them.
func TestNodesOnlyForKernelsThatSpanThem(t *testing.T) {
	own := 0
	for _, k := range Kernels() {
		ok, why := SpansNodes(k)
		if ok {
			continue
		}
		own++
		_, err := Run(Problem{Kernel: k, Ranks: 4, Nodes: 2})
		if err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "Nodes applies to the collective kernels") {
			t.Errorf("%s with 2 nodes: err %v, want one saying %q", k, err, why)
		}
	}
	for _, k := range []string{"gemm", "gemm_sm90", "vector_add", "softmax_split", "ag_gemm", "gemm_ar_mc", "ag_gemm_sm90", "gemm_rs_sm90", "gemm_ar_sm90", "gemm_ar_mc_sm90"} {
		if ok, _ := SpansNodes(k); ok {
			t.Errorf("%s: SpansNodes, but its check runs on a machine of its own", k)
		}
	}
	if own < 19 {
		t.Errorf("only %d kernels refuse nodes", own)
	}
	if _, err := Run(Problem{Kernel: "nvshmem_allgather_ring", Ranks: 4, Nodes: 2, Size: 1001}); err != nil {
		t.Errorf("nvshmem_allgather_ring across 2 nodes: %v", err)
	}
}
