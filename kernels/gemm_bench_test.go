package kernels

import (
	"io"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// BenchmarkGemmBuild measures building and printing the registry's gemm (bf16, sm_90; the
// target is under 2 ms per op on an idle machine) beside a reference kernel,
// p2p_allreduce_lamport_sum (0.7 ms per op idle), so that the ratio of the two means
// something on a loaded machine: compare the sub-benchmarks of one run.
func BenchmarkGemmBuild(b *testing.B) {
	for _, c := range []struct {
		name string
		dt   dsl.Type
	}{{"gemm", dsl.BF16}, {"p2p_allreduce_lamport_sum", dsl.F32}} {
		s, err := Lookup(c.name)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				m, err := s.Build(Config{Target: ptx.SM90, DType: c.dt})
				if err != nil {
					b.Fatal(err)
				}
				if err := ptx.Print(io.Discard, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
