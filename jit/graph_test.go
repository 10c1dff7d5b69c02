package jit

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// bumpKernel adds delta to p[i] for i < n.
// emuBump opens an emulated GPU (closed at the test's end) with bumpKernel loaded: its
// function and a 4-word buffer for it.
func emuBump(t testing.TB) (*Device, *Function, *Buffer[uint32]) {
	t.Helper()
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	_, fn := loadFunc(t, d, bumpKernel(t), "bump")
	buf, err := Alloc[uint32](d, 4)
	if err != nil {
		t.Fatal(err)
	}
	return d, fn, buf
}

func bumpKernel(t testing.TB) *ptx.Module {
	k := dsl.New("bump", dsl.WithTarget(ptx.SM90))
	p := k.PtrParam("p", dsl.U32)
	n := k.Param("n", dsl.U32)
	delta := k.Param("delta", dsl.U32)
	i := k.GlobalThreadIdx(dsl.X)
	k.If(i.Lt(n), func() {
		k.Store(p.At(i), k.Load(p.At(i)).Add(delta))
	})
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

type bumpArgs struct {
	P     Ptr[uint32]
	N     uint32
	Delta uint32
}

// graphProgram captures three launches of bump (deltas 1, 2, 3), replays them `replays`
// times, checks every element, then changes the second launch's delta and replays once more.
func graphProgram(d *Device, mod *ptx.Module, replays int) error {
	m, err := d.Load(Source{Module: mod})
	if err != nil {
		return err
	}
	defer m.Close()
	fn, err := m.Function("bump")
	if err != nil {
		return err
	}
	const n = 100
	buf, err := Alloc[uint32](d, n)
	if err != nil {
		return err
	}
	defer buf.Free()
	if err := buf.CopyFromHost(make([]uint32, n)); err != nil {
		return err
	}
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	cfg := LaunchConfig{Grid: D1(1), Block: D1(128), Stream: s}
	if err := s.BeginCapture(); err != nil {
		return err
	}
	for delta := uint32(1); delta <= 3; delta++ {
		if err := fn.LaunchArgs(cfg, bumpArgs{P: buf, N: n, Delta: delta}); err != nil {
			return err
		}
	}
	g, err := s.EndCapture()
	if err != nil {
		return err
	}
	defer g.Close()
	if ks := g.Kernels(); len(ks) != 3 || ks[2].Name != "bump" || ks[2].Block != D1(128) {
		return fmt.Errorf("Kernels() = %+v, want 3 launches of bump with 128 threads", ks)
	}
	got := make([]uint32, n)
	if err := buf.CopyToHost(got); err != nil {
		return err
	}
	if got[0] != 0 {
		return fmt.Errorf("after capture p[0] = %d; capturing must not run the launches", got[0])
	}
	x, err := g.Instantiate()
	if err != nil {
		return err
	}
	defer x.Close()
	for r := 0; r < replays; r++ {
		if err := x.Launch(s); err != nil {
			return err
		}
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	check := func(want uint32) error {
		if err := buf.CopyToHost(got); err != nil {
			return err
		}
		for i, v := range got {
			if v != want {
				return fmt.Errorf("p[%d] = %d, want %d", i, v, want)
			}
		}
		return nil
	}
	want := uint32(6 * replays)
	if err := check(want); err != nil {
		return fmt.Errorf("after %d replays: %w", replays, err)
	}
	if err := x.SetLaunchArgs(1, bumpArgs{P: buf, N: n, Delta: 10}); err != nil {
		return err
	}
	if err := x.SetArgs(2, buf, uint32(n), uint32(100)); err != nil {
		return err
	}
	if err := x.Launch(s); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	if err := check(want + 1 + 10 + 100); err != nil {
		return fmt.Errorf("after SetArgs: %w", err)
	}
	// A second executable of the same graph keeps the captured arguments.
	x2, err := g.Instantiate()
	if err != nil {
		return err
	}
	defer x2.Close()
	if err := x2.Launch(s); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	return check(want + 111 + 6)
}

func TestEmuGraphReplay(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := graphProgram(d, bumpKernel(t), 1000); err != nil {
		t.Fatal(err)
	}
}

func TestEmuGraphMisuse(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, err := d.Load(Source{Module: bumpKernel(t)})
	if err != nil {
		t.Fatal(err)
	}
	fn, _ := m.Function("bump")
	buf, err := Alloc[uint32](d, 4)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := d.NewStream()
	want := func(err error, sub string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), sub) {
			t.Fatalf("got %v, want an error containing %q", err, sub)
		}
	}
	var nilStream *Stream
	want(nilStream.BeginCapture(), "default stream cannot be captured")
	_, err = s.EndCapture()
	want(err, "not capturing")
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	want(s.BeginCapture(), "already capturing")
	want(buf.CopyFromHostAsync(make([]uint32, 4), s), "captures kernel launches only")
	want(s.Synchronize(), "capturing stream")
	e, _ := d.NewEvent()
	want(e.Record(s), "capturing stream")
	cfg := LaunchConfig{Grid: D1(1), Block: D1(4), Stream: s}
	if err := fn.Launch(cfg, buf, uint32(4), uint32(1)); err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	x, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	want(x.SetArgs(1, buf, uint32(4), uint32(1)), "launch 1 of a graph of 1 kernel launches")
	want(x.SetArgs(0, buf, uint32(4)), "takes 3 arguments, got 2")
	var short struct {
		P Ptr[uint32]
		N uint32
	}
	want(x.SetLaunchArgs(0, short), "SetLaunchArgs of launch 0")
	if err := x.SetLaunchArgs(0, nil); err == nil {
		t.Fatal("SetLaunchArgs(nil) succeeded")
	}
	// The capturing stream itself cannot replay a graph.
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	want(x.Launch(s), "graphs inside graphs")
	// A launch that fails while capturing fails EndCapture.
	want(fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(2048), Stream: s}, buf, uint32(4), uint32(1)), "at most 1024 threads")
	if _, err := s.EndCapture(); err != nil {
		t.Fatalf("EndCapture after a launch refused by the front end: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	want(x.Launch(s), "its module was closed")
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	want(x.Launch(s), "was closed")
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = g.Instantiate()
	want(err, "graph was closed")
}

// ringEpochKernel is ringKernel with its epoch kept on the device: every launch reads
// epoch[0], uses epoch+1 for its data and flags, and stores it back, so a graph replaying
// the launch advances the epoch without host arguments (which capture would freeze).
func ringEpochKernel(t testing.TB) *ptx.Module {
	k := dsl.New("ring_put_epoch", dsl.WithTarget(ptx.SM90))
	peerData := k.PtrParam("peer_data", dsl.U32)
	peerFlag := k.PtrParam("peer_flag", dsl.U32)
	myFlag := k.PtrParam("my_flag", dsl.U32)
	epochp := k.PtrParam("epoch", dsl.U32)
	rank := k.Param("rank", dsl.U32)
	n := k.Param("n", dsl.U32)
	e := k.Load(epochp.At(0)).Add(uint32(1))
	i := k.GlobalThreadIdx(dsl.X)
	k.If(i.Lt(n), func() {
		k.Store(peerData.At(i), rank.Mul(uint32(1000)).Add(i).Add(e))
	})
	k.SyncThreads()
	k.If(k.ThreadIdx(dsl.X).Eq(uint32(0)), func() {
		k.Store(peerFlag.At(0), e, dsl.Release(dsl.System))
		k.WaitUntil(myFlag.At(0), dsl.Ge, e, dsl.Acquire(dsl.System))
		k.Store(epochp.At(0), e)
	})
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// graphRingProgram captures one ring_put_epoch launch, replays it `replays` times on every
// rank and checks what each rank received: the graph's launches are gathered on the
// emulator like direct ones, and the device-side epoch advances with every replay.
func graphRingProgram(mod *ptx.Module, n, replays int) func(r *Rank) error {
	return func(r *Rank) error {
		sh := r.NVSHMEM
		m, err := r.Device.Load(Source{Module: mod})
		if err != nil {
			return err
		}
		fn, err := m.Function("ring_put_epoch")
		if err != nil {
			return err
		}
		data, err := SymAlloc[uint32](sh, n)
		if err != nil {
			return err
		}
		flag, err := SymAlloc[uint32](sh, 1)
		if err != nil {
			return err
		}
		epoch, err := Alloc[uint32](r.Device, 1)
		if err != nil {
			return err
		}
		if err := epoch.CopyFromHost([]uint32{0}); err != nil {
			return err
		}
		next, prev := (r.Rank+1)%r.World, (r.Rank+r.World-1)%r.World
		peerData, err := sh.PeerPtr(data, next)
		if err != nil {
			return err
		}
		peerFlag, err := sh.PeerPtr(flag, next)
		if err != nil {
			return err
		}
		s, err := r.Device.NewStream()
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.BeginCapture(); err != nil {
			return err
		}
		cfg := LaunchConfig{Grid: D1(1), Block: D1(256), Stream: s, Collective: CollectiveOn}
		if err := fn.Launch(cfg, peerData, peerFlag, flag, epoch, uint32(r.Rank), uint32(n)); err != nil {
			return err
		}
		g, err := s.EndCapture()
		if err != nil {
			return err
		}
		defer g.Close()
		x, err := g.Instantiate()
		if err != nil {
			return err
		}
		defer x.Close()
		for i := 0; i < replays; i++ {
			if err := x.Launch(s); err != nil {
				return err
			}
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		if err := sh.BarrierAll(); err != nil {
			return err
		}
		got := make([]uint32, n)
		if err := data.CopyToHost(got); err != nil {
			return err
		}
		for i, v := range got {
			if want := uint32(prev*1000+i) + uint32(replays); v != want {
				return fmt.Errorf("after %d replays data[%d] = %d, want %d (from rank %d)", replays, i, v, want, prev)
			}
		}
		e := []uint32{0}
		if err := epoch.CopyToHost(e); err != nil {
			return err
		}
		if e[0] != uint32(replays) {
			return fmt.Errorf("device epoch %d after %d replays", e[0], replays)
		}
		return nil
	}
}

func TestEmuGraphRanks(t *testing.T) {
	mod := ringEpochKernel(t)
	for _, world := range []int{2, 4} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			if err := RunRanks(RanksOptions{Backend: Emulator, World: world, NVSHMEM: true}, graphRingProgram(mod, 200, 1000)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// BenchmarkGraphReplay measures host time per replayed launch (a graph of 8 bump launches)
// against direct launches of the same 8, on the default backend.
func BenchmarkGraphReplay(b *testing.B) {
	d, err := Open(0)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	m, err := d.Load(Source{Module: bumpKernel(b)})
	if err != nil {
		b.Fatal(err)
	}
	fn, _ := m.Function("bump")
	buf, err := Alloc[uint32](d, 1)
	if err != nil {
		b.Fatal(err)
	}
	s, _ := d.NewStream()
	const launches = 8
	cfg := LaunchConfig{Grid: D1(1), Block: D1(32), Stream: s}
	args := bumpArgs{P: buf, N: 1, Delta: 1}
	b.Run("direct", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for j := 0; j < launches; j++ {
				if err := fn.LaunchArgs(cfg, args); err != nil {
					b.Fatal(err)
				}
			}
		}
		s.Synchronize()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*launches), "ns/launch")
	})
	b.Run("graph", func(b *testing.B) {
		if err := s.BeginCapture(); err != nil {
			b.Fatal(err)
		}
		for j := 0; j < launches; j++ {
			if err := fn.LaunchArgs(cfg, args); err != nil {
				b.Fatal(err)
			}
		}
		g, err := s.EndCapture()
		if err != nil {
			b.Fatal(err)
		}
		x, err := g.Instantiate()
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := x.Launch(s); err != nil {
				b.Fatal(err)
			}
		}
		s.Synchronize()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*launches), "ns/launch")
	})
}
