package kernels

import (
	"io"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// BenchmarkGemmBuild measures building and printing the registry's gemm (bf16, sm_90; the
// target is under 2 ms per op on an idle machine). Each iteration also builds a reference
// kernel, p2p_allreduce_lamport_sum (about 0.7 ms idle), right after the gemm, so that on a
// loaded machine both see the same load: the metrics are gemm-ns/op, ref-ns/op and their
// ratio gemm/ref (ns/op is the two together).
func BenchmarkGemmBuild(b *testing.B) {
	build := func(name string, dt dsl.Type) func() {
		s, err := Lookup(name)
		if err != nil {
			b.Fatal(err)
		}
		return func() {
			m, err := s.Build(Config{Target: ptx.SM90, DType: dt})
			if err != nil {
				b.Fatal(err)
			}
			if err := ptx.Print(io.Discard, m); err != nil {
				b.Fatal(err)
			}
		}
	}
	gemm, ref := build("gemm", dsl.BF16), build("p2p_allreduce_lamport_sum", dsl.F32)
	b.ReportAllocs()
	var tg, tr time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		gemm()
		t1 := time.Now()
		ref()
		tg, tr = tg+t1.Sub(t0), tr+time.Since(t1)
	}
	b.ReportMetric(float64(tg.Nanoseconds())/float64(b.N), "gemm-ns/op")
	b.ReportMetric(float64(tr.Nanoseconds())/float64(b.N), "ref-ns/op")
	b.ReportMetric(float64(tg)/float64(tr), "gemm/ref")
}
