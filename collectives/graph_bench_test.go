package collectives

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
)

// graphCost is what graphHostCost measured: host time per all-reduce call, replayed from a
// graph and made directly, and the algorithm.
type graphCost struct {
	graph, direct       time.Duration
	graphGPU, directGPU time.Duration // the stream's time for the same calls (events)
	algorithm           string
}

// profileDirect, when set, is started before the direct calls of graphHostCost and its
// result called after them (the GPU test profiles the CPU there).
var profileDirect func() (stop func())

// graphHostCost measures, on rank r's device (1 rank) with a Comm of options o made
// capture-safe on a stream of its own, the host time per call of an f32
// sum all-reduce of n elements: `per` calls captured in one graph replayed `replays` times
// (graph), and the same calls made directly (direct); the time is that of the calls alone
// (the stream is synchronized before and after, not inside). It checks every output after
// the replays, with inputs written before the last replay, and the device epoch of block 0
// (every call's launch has a block 0: 2 barriers per call).
func graphHostCost(r *jit.Rank, o Options, n, per, replays int) (graphCost, error) {
	ctx := context.Background()
	s, err := r.Device.NewStream()
	if err != nil {
		return graphCost{}, err
	}
	defer s.Close()
	o.CaptureSafe, o.Stream, o.Logger = true, s, slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := New(ctx, r, o)
	if err != nil {
		return graphCost{}, err
	}
	defer c.Close()
	ins, outs := make([]*Buffer, per), make([]*Buffer, per)
	for i := range ins {
		if ins[i], err = c.Alloc(dsl.F32, n); err != nil {
			return graphCost{}, err
		}
		if outs[i], err = c.Alloc(dsl.F32, n); err != nil {
			return graphCost{}, err
		}
	}
	calls := func() error {
		for i := range ins {
			if err := c.AllReduceTo(ctx, outs[i], ins[i], Sum); err != nil {
				return err
			}
		}
		return nil
	}
	// Warm-up (loads the kernel), then direct calls.
	if err := calls(); err != nil {
		return graphCost{}, err
	}
	if err := s.Synchronize(); err != nil {
		return graphCost{}, err
	}
	ev0, err := r.Device.NewEvent()
	if err != nil {
		return graphCost{}, err
	}
	defer ev0.Close()
	ev1, err := r.Device.NewEvent()
	if err != nil {
		return graphCost{}, err
	}
	defer ev1.Close()
	// gpuTime records ev1 after the calls on s (ev0 was recorded before) and returns the time
	// between the two once s is idle.
	gpuTime := func() (time.Duration, error) {
		if err := ev1.Record(s); err != nil {
			return 0, err
		}
		if err := s.Synchronize(); err != nil {
			return 0, err
		}
		return ev0.Elapsed(ev1)
	}
	if err := ev0.Record(s); err != nil {
		return graphCost{}, err
	}
	var stop func()
	if profileDirect != nil {
		stop = profileDirect()
	}
	t0 := time.Now()
	for i := 0; i < replays; i++ {
		if err := calls(); err != nil {
			return graphCost{}, err
		}
	}
	direct := time.Since(t0)
	if stop != nil {
		stop()
	}
	directGPU, err := gpuTime()
	if err != nil {
		return graphCost{}, err
	}
	x, err := c.Capture(ctx, calls)
	if err != nil {
		return graphCost{}, err
	}
	defer x.Close()
	if err := s.Synchronize(); err != nil {
		return graphCost{}, err
	}
	if err := ev0.Record(s); err != nil {
		return graphCost{}, err
	}
	t0 = time.Now()
	for i := 0; i < replays-1; i++ {
		if err := x.Launch(s); err != nil {
			return graphCost{}, err
		}
	}
	graph := time.Since(t0)
	graphGPU, err := gpuTime()
	if err != nil {
		return graphCost{}, err
	}
	// The last replay on fresh inputs (1 GPU: the sum is the input).
	rng := rand.New(rand.NewSource(int64(per)))
	want := make([][]float32, per)
	for i, b := range ins {
		want[i] = make([]float32, n)
		for j := range want[i] {
			want[i][j] = float32(rng.Intn(129)-64) / 8
		}
		if err := b.WriteF32(want[i]); err != nil {
			return graphCost{}, err
		}
	}
	t0 = time.Now()
	if err := x.Launch(s); err != nil {
		return graphCost{}, err
	}
	graph += time.Since(t0)
	if err := s.Synchronize(); err != nil {
		return graphCost{}, err
	}
	for i, b := range outs {
		got, err := b.ReadF32()
		if err != nil {
			return graphCost{}, err
		}
		for j := range got {
			if got[j] != want[i][j] {
				return graphCost{}, fmt.Errorf("graph of %d all-reduces, replay %d, call %d: element %d = %v, want %v", per, replays, i, j, got[j], want[i][j])
			}
		}
	}
	if err := deviceEpochs(c, uint32(2*per*(1+2*replays))); err != nil {
		return graphCost{}, err
	}
	calls64 := time.Duration(replays * per)
	return graphCost{graph: graph / calls64, direct: direct / calls64, graphGPU: graphGPU / (calls64 - time.Duration(per)),
		directGPU: directGPU / calls64, algorithm: c.LastAlgorithm()}, nil
}

// TestGraphHostCost runs graphHostCost on one emulated GPU (50 replays of graphs of 1 and
// 8 all-reduces of 256 f32, one block per launch) for its checks; the GPU version is
// TestGPUGraphHostCost (cuda tag).
func TestGraphHostCost(t *testing.T) {
	for _, per := range []int{1, 8} {
		err := jit.RunRanks(jit.RanksOptions{Backend: jit.Emulator, World: 1, NVSHMEM: true}, func(r *jit.Rank) error {
			cost, err := graphHostCost(r, Options{MaxBlocks: 1}, 256, per, 50)
			if err == nil {
				t.Logf("emulator, graph of %d %s: %v per call replayed, %v direct", per, cost.algorithm, cost.graph, cost.direct)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkGraphAllReduce measures the host time per all-reduce call (1 rank) replayed
// from a graph of 1 and of 8 calls, against direct calls, on the default backend: on the
// GPU (cuda tag) 1024 f32 with the default Options; on the emulator 256 f32 with one block
// per launch (there a replay runs the kernels before it returns, so it measures the
// emulator, not a launch path). Metrics: graph-ns/call and direct-ns/call.
func BenchmarkGraphAllReduce(b *testing.B) {
	for _, per := range []int{1, 8} {
		b.Run(fmt.Sprintf("calls=%d", per), func(b *testing.B) {
			err := jit.RunRanks(jit.RanksOptions{World: 1, NVSHMEM: true}, func(r *jit.Rank) error {
				o, n := Options{}, 1024
				if r.Backend == jit.Emulator {
					o.MaxBlocks, n = 1, 256
				}
				cost, err := graphHostCost(r, o, n, per, max(b.N, 2))
				if err != nil {
					return err
				}
				b.ReportMetric(float64(cost.graph.Nanoseconds()), "graph-ns/call")
				b.ReportMetric(float64(cost.direct.Nanoseconds()), "direct-ns/call")
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
