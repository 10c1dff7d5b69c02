package collectives

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
)

// argsOnly is a Backend whose launches only build each GPU's arguments: what remains is the
// host-side cost of a collective call in this package (kernel lookup, choice, arguments).
type argsOnly struct{ *Emu }

func (a argsOnly) Launch(l Launch) error {
	for _, g := range a.Local() {
		_ = l.Args(g)
	}
	return nil
}

// BenchmarkAllReduceHostCost measures a call of AllReduce on the host, without the launch
// itself (see argsOnly), for each peer-to-peer algorithm.
func BenchmarkAllReduceHostCost(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
	}{{"lamport", 1 << 10}, {"1shot", 3 << 10}, {"2shot", 1 << 16}} {
		b.Run(c.name, func(b *testing.B) {
			sys, err := emu.New(1)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
			comm, err := New(ctx, argsOnly{&Emu{Sys: sys, NoMulticast: true}}, Options{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer comm.Close()
			buf, err := comm.Alloc(dsl.F32, c.n)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := comm.AllReduce(ctx, buf, Sum); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if got := comm.LastAlgorithm(); got[:len("p2p_allreduce_"+c.name)] != "p2p_allreduce_"+c.name {
				b.Fatalf("ran %s, want p2p_allreduce_%s", got, c.name)
			}
		})
	}
}
