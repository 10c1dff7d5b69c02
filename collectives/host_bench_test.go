package collectives

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
)

// BenchmarkAllReduceHostCost measures a call of AllReduce on the host, without the launch
// itself (launchFn does nothing): what remains is the host-side cost of a collective call in
// this package (choice, kernel lookup, arguments), for each peer-to-peer algorithm, in place
// (the 1-shot kernel then stages its input with a device copy) and, on a CaptureSafe Comm,
// out of place (AllReduceTo; the call graphHostCost makes).
func BenchmarkAllReduceHostCost(b *testing.B) {
	for _, c := range []struct {
		name, algorithm string
		n               int
		captureSafe     bool
	}{{"lamport", "lamport", 1 << 10, false}, {"1shot", "1shot", 3 << 10, false}, {"2shot", "2shot", 1 << 16, false},
		{"capturesafe-1shot-to", "1shot_graph", 1 << 10, true}} {
		b.Run(c.name, func(b *testing.B) {
			err := jit.RunRanks(jit.RanksOptions{Backend: jit.Emulator, World: 1, NVSHMEM: true}, func(r *jit.Rank) error {
				ctx := context.Background()
				quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
				comm, err := New(ctx, r, Options{Logger: quiet, DisableMulticast: true, CaptureSafe: c.captureSafe})
				if err != nil {
					return err
				}
				defer comm.Close()
				comm.launchFn = func(*jit.Function, jit.LaunchConfig, any) error { return nil }
				buf, err := comm.Alloc(dsl.F32, c.n)
				if err != nil {
					return err
				}
				dst := buf
				if c.captureSafe {
					if dst, err = comm.Alloc(dsl.F32, c.n); err != nil {
						return err
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := comm.AllReduceTo(ctx, dst, buf, Sum); err != nil {
						return err
					}
				}
				b.StopTimer()
				if got := comm.LastAlgorithm(); !strings.HasPrefix(got, "p2p_allreduce_"+c.algorithm) {
					b.Errorf("ran %s, want p2p_allreduce_%s", got, c.algorithm)
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
