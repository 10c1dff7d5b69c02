package shmemu_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/nvshmem"
)

// TestProbe20CountBeforeBuffer: a put, get or collective whose element count (from the
// kernel) runs past its buffers allocated a host buffer of that size before the access
// faulted: 2^26 floats past a 64-byte symmetric buffer allocated 256 MB, 2^32 would have
// allocated 16 GiB. The spans are checked first (emu.ExternCall.Check). Probe 20.
func TestProbe20CountBeforeBuffer(t *testing.T) {
	for _, op := range []string{"put", "get", "put_nbi", "put_signal", "fcollect"} {
		s, e, launch := emuKernel(t, func(k *dsl.Kernel) {
			p := k.PtrParam("p", dsl.F32)
			sig := k.PtrParam("sig", dsl.U64)
			n := k.Param("n", dsl.U64)
			span := nvshmem.SpanOf(p, n)
			switch op {
			case "fcollect":
				nvshmem.Fcollect(k, nvshmem.Block, nvshmem.TeamWorld, span, span)
				return
			}
			k.If(k.ThreadIdx(dsl.X).Eq(0), func() {
				switch op {
				case "put":
					nvshmem.Put(k, nvshmem.Thread, span, span, 1)
				case "get":
					nvshmem.Get(k, nvshmem.Thread, span, span, 1)
				case "put_nbi":
					nvshmem.PutNBI(k, nvshmem.Thread, span, span, 1)
				case "put_signal":
					nvshmem.PutSignal(k, nvshmem.Thread, span, span, sig, 1, nvshmem.SignalSet, 1)
				}
			})
		})
		sym, _ := s.MallocSymmetric(64)
		sg, _ := s.MallocSymmetric(8)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		err := launch(func(g int) []any { return []any{sym.On(g), sg.On(g), uint64(1 << 26)} })
		runtime.ReadMemStats(&m1)
		if err == nil || !strings.Contains(err.Error(), "past the end of a 64-byte symmetric allocation") {
			t.Errorf("%s of 2^26 floats over 64 bytes: %v; want the out-of-bounds access", op, err)
		}
		if mb := (m1.TotalAlloc - m0.TotalAlloc) >> 20; mb > 64 {
			t.Errorf("%s of 2^26 floats over 64 bytes allocated %d MB before failing", op, mb)
		}
		e.Reset()
	}
}
