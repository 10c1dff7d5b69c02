package ref

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// smallGemm is a small tile configuration, so that the test shapes span several blocks.
func smallGemm(in, out dsl.Type, a, b kernels.MatrixLayout, aligned bool) kernels.GemmConfig {
	return kernels.GemmConfig{In: in, Out: out, A: a, B: b, BM: 64, BN: 32, BK: 32, WarpsM: 2, WarpsN: 2, Stages: 3, Aligned: aligned}
}

func TestGemmQuick(t *testing.T) {
	res, err := RunGemm(GemmProblem{Config: smallGemm(dsl.BF16, dsl.F32, kernels.RowMajor, kernels.RowMajor, true), M: 64, N: 32, K: 64, Alpha: 1, Beta: 0})
	t.Log(res)
	if err != nil {
		t.Fatal(err)
	}
}
