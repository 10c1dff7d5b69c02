package jit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// vectorAddProgram is the single-rank test program: it runs on any backend.
func vectorAddProgram(t *testing.T, d *Device) error {
	m, err := d.Load(Source{Module: vectorAdd(t)})
	if err != nil {
		return err
	}
	defer m.Close()
	fn, err := m.Function("vector_add_f32")
	if err != nil {
		return err
	}
	if again, err := m.Function("vector_add_f32"); err != nil || again != fn {
		return fmt.Errorf("a second Function lookup gave %p, %v; want the first, %p", again, err, fn)
	}
	if _, err := m.Function("nosuch"); err == nil || !strings.Contains(err.Error(), `no kernel "nosuch"`) {
		return fmt.Errorf("Function(nosuch): %v", err)
	}
	const n = 1000
	a, b, c := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range a {
		a[i], b[i] = float32(i)*0.5, float32(n-i)
	}
	var bufs [4]*Buffer[float32]
	for i := range bufs {
		if bufs[i], err = Alloc[float32](d, n); err != nil {
			return err
		}
		defer bufs[i].Free()
	}
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	e0, _ := d.NewEvent()
	e1, _ := d.NewEvent()
	if err := bufs[0].CopyFromHost(a); err != nil {
		return err
	}
	if err := bufs[1].CopyFromHostAsync(b, s); err != nil {
		return err
	}
	if err := e0.Record(s); err != nil {
		return err
	}
	cfg := LaunchConfig{Grid: D1((n + 255) / 256), Block: D1(256), Stream: s}
	if err := fn.Launch(cfg, bufs[0], bufs[1], bufs[2], uint32(n)); err != nil {
		return err
	}
	if err := e1.Record(s); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	el, err := e0.Elapsed(e1)
	if err != nil || el <= 0 {
		return fmt.Errorf("Elapsed = %v, %v", el, err)
	}
	if err := bufs[3].CopyFrom(bufs[2]); err != nil {
		return err
	}
	if err := bufs[3].CopyToHostAsync(c, s); err != nil {
		return err
	}
	for i := range c {
		if c[i] != a[i]+b[i] {
			return fmt.Errorf("c[%d] = %v, want %v", i, c[i], a[i]+b[i])
		}
	}
	// The same argument checks as on the GPU.
	if err := fn.Launch(cfg, bufs[0], bufs[1], bufs[2]); err == nil || !strings.Contains(err.Error(), "takes 4 arguments, got 3") {
		return fmt.Errorf("argument count: %v", err)
	}
	if err := fn.Launch(cfg, bufs[0], bufs[1], bufs[2], n); err == nil || !strings.Contains(err.Error(), "depends on the platform") {
		return fmt.Errorf("int argument: %v", err)
	}
	if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(2048)}, bufs[0], bufs[1], bufs[2], uint32(n)); err == nil {
		return errors.New("a block of 2048 threads was accepted")
	}
	return d.Synchronize()
}

func TestEmuVectorAdd(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	inf := d.Info()
	if inf.Backend != Emulator || inf.Arch != "sm_90" || inf.SM != 90 || !strings.Contains(inf.Name, "emulator") {
		t.Fatalf("Info = %+v", inf)
	}
	if err := vectorAddProgram(t, d); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBackend(Emulator, 5); err == nil || !strings.Contains(err.Error(), "KGEN_EMU_GPUS") {
		t.Fatalf("GPU 5 of the default machine: %v", err)
	}
}

// TestEmuVectorAddOneRank runs the single-rank program through RunRanks.
func TestEmuVectorAddOneRank(t *testing.T) {
	t.Setenv("WORLD_SIZE", "")
	t.Setenv("RANK", "")
	ran := 0
	err := RunRanks(RanksOptions{Backend: Emulator}, func(r *Rank) error {
		ran++
		if r.Rank != 0 || r.World != 1 || r.Backend != Emulator {
			return fmt.Errorf("rank %+v", r)
		}
		return vectorAddProgram(t, r.Device)
	})
	if err != nil || ran != 1 {
		t.Fatalf("ran %d: %v", ran, err)
	}
}

func TestDefaultBackend(t *testing.T) {
	t.Setenv("KGEN_BACKEND", "emu")
	if b, err := DefaultBackend(); err != nil || b != Emulator {
		t.Fatalf("KGEN_BACKEND=emu: %v %v", b, err)
	}
	d, err := Open(0)
	if err != nil || d.Info().Backend != Emulator {
		t.Fatalf("Open with KGEN_BACKEND=emu: %v", err)
	}
	d.Close()
	t.Setenv("KGEN_BACKEND", "cuda")
	if b, err := DefaultBackend(); err != nil || b != GPU {
		t.Fatalf("KGEN_BACKEND=cuda: %v %v", b, err)
	}
	t.Setenv("KGEN_BACKEND", "tpu")
	if _, err := DefaultBackend(); err == nil || !strings.Contains(err.Error(), "cuda and emu") {
		t.Fatalf("KGEN_BACKEND=tpu: %v", err)
	}
	t.Setenv("KGEN_BACKEND", "")
	if b, _ := DefaultBackend(); !cudaTagged && b != Emulator {
		t.Fatalf("a binary without the cuda tag defaults to %s", b)
	}
}

// ringKernel: every rank writes rank*1000+i into the next rank's data through a peer
// pointer, then signals the next rank's flag (st.release.sys) and waits for its own flag
// (ld.acquire.sys). The wait needs the other GPUs' grids running at the same time.
func ringKernel(t *testing.T) *ptx.Module {
	k := dsl.New("ring_put", dsl.WithTarget(ptx.SM90))
	peerData := k.PtrParam("peer_data", dsl.U32)
	peerFlag := k.PtrParam("peer_flag", dsl.U32)
	myFlag := k.PtrParam("my_flag", dsl.U32)
	rank := k.Param("rank", dsl.U32)
	n := k.Param("n", dsl.U32)
	epoch := k.Param("epoch", dsl.U32)
	i := k.GlobalThreadIdx(dsl.X)
	k.If(i.Lt(n), func() {
		k.Store(peerData.At(i), rank.Mul(uint32(1000)).Add(i).Add(epoch))
	})
	k.SyncThreads()
	k.If(k.ThreadIdx(dsl.X).Eq(uint32(0)), func() {
		k.Store(peerFlag.At(0), epoch, dsl.Release(dsl.System))
		k.WaitUntil(myFlag.At(0), dsl.Ge, epoch, dsl.Acquire(dsl.System))
	})
	k.SyncThreads()
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ringProgram is the multi-rank test program: it runs on N GPUs (one process per rank) and
// on N simulated GPUs (one goroutine per rank) unchanged. n <= 256 (one block).
func ringProgram(mod *ptx.Module, n int) func(r *Rank) error {
	return func(r *Rank) error {
		sh := r.NVSHMEM
		if sh.MyPE() != r.Rank || sh.NPEs() != r.World {
			return fmt.Errorf("PE %d of %d, rank %d of %d", sh.MyPE(), sh.NPEs(), r.Rank, r.World)
		}
		m, err := r.Device.Load(Source{Module: mod})
		if err != nil {
			return err
		}
		fn, err := m.Function("ring_put")
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
		next, prev := (r.Rank+1)%r.World, (r.Rank+r.World-1)%r.World
		peerData, err := sh.PeerPtr(data, next)
		if err != nil {
			return err
		}
		peerFlag, err := sh.PeerPtr(flag, next)
		if err != nil {
			return err
		}
		if peerData == data.DevPtr() && r.World > 1 {
			return errors.New("the peer pointer is this rank's own address")
		}
		got := make([]uint32, n)
		for epoch := uint32(1); epoch <= 2; epoch++ {
			cfg := LaunchConfig{Grid: D1(1), Block: D1(256)}
			if err := fn.Launch(cfg, peerData, peerFlag, flag, uint32(r.Rank), uint32(n), epoch); err != nil {
				return err
			}
			if err := r.Device.Synchronize(); err != nil {
				return err
			}
			if err := sh.BarrierAll(); err != nil {
				return err
			}
			if err := data.CopyToHost(got); err != nil {
				return err
			}
			for i, v := range got {
				if want := uint32(prev*1000+i) + epoch; v != want {
					return fmt.Errorf("epoch %d: data[%d] = %d, want %d (from rank %d)", epoch, i, v, want, prev)
				}
			}
			// The previous rank writes again in the next epoch: everyone has read first.
			if err := sh.BarrierAll(); err != nil {
				return err
			}
		}
		return nil
	}
}

func TestEmuRanksPeerToPeer(t *testing.T) {
	mod := ringKernel(t)
	for _, world := range []int{2, 4} {
		t.Run(fmt.Sprint(world), func(t *testing.T) {
			err := RunRanks(RanksOptions{Backend: Emulator, World: world, NVSHMEM: true}, ringProgram(mod, 200))
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestEmuRanksWorldFromEnv(t *testing.T) {
	t.Setenv("WORLD_SIZE", "3")
	t.Setenv("RANK", "")
	seen := make(chan int, 3)
	err := RunRanks(RanksOptions{Backend: Emulator}, func(r *Rank) error {
		if r.World != 3 || r.Device.Info().Ordinal != r.Rank {
			return fmt.Errorf("rank %d of %d on GPU %d", r.Rank, r.World, r.Device.Info().Ordinal)
		}
		seen <- r.Rank
		return nil
	})
	if err != nil || len(seen) != 3 {
		t.Fatalf("%d ranks ran: %v", len(seen), err)
	}
	t.Setenv("RANK", "1")
	if err := RunRanks(RanksOptions{Backend: Emulator}, func(*Rank) error { return nil }); err == nil || !strings.Contains(err.Error(), "kgen launch --backend emu") {
		t.Fatalf("RANK set on the emulator: %v", err)
	}
}

func TestEmuNVSHMEMHost(t *testing.T) {
	t.Setenv("NVSHMEM_DISABLE_NVLS", "")
	err := RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true}, func(r *Rank) error {
		sh := r.NVSHMEM
		buf, err := SymAlloc[float32](sh, 64)
		if err != nil {
			return err
		}
		mc, err := sh.MulticastPtr(buf)
		if err != nil || mc == 0 {
			return fmt.Errorf("MulticastPtr: %v, %v", mc, err)
		}
		other, err := sh.PeerPtr(buf, 1-r.Rank)
		if err != nil {
			return err
		}
		// Each rank writes its rank into the other's copy (a device-to-device copy through
		// the peer address), a barrier, then each reads what the other wrote.
		src, err := Alloc[float32](r.Device, 64)
		if err != nil {
			return err
		}
		vals := make([]float32, 64)
		for i := range vals {
			vals[i] = float32(r.Rank*100 + i)
		}
		if err := src.CopyFromHost(vals); err != nil {
			return err
		}
		if err := r.Device.CopyDtoD(other, src.DevPtr(), 256); err != nil {
			return err
		}
		if err := sh.BarrierAll(); err != nil {
			return err
		}
		if err := buf.CopyToHost(vals); err != nil {
			return err
		}
		if want := float32((1-r.Rank)*100 + 5); vals[5] != want {
			return fmt.Errorf("rank %d read %v, want %v", r.Rank, vals[5], want)
		}
		if _, err := sh.PeerPtr(src, 0); err == nil {
			return errors.New("PeerPtr of private memory should fail")
		}
		return buf.Free()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NVSHMEM_DISABLE_NVLS", "1")
	err = RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true}, func(r *Rank) error {
		buf, err := SymAlloc[float32](r.NVSHMEM, 64)
		if err != nil {
			return err
		}
		var me *MulticastError
		if _, err := r.NVSHMEM.MulticastPtr(buf); !errors.As(err, &me) || !strings.Contains(err.Error(), "NVSHMEM_DISABLE_NVLS=1") {
			return fmt.Errorf("MulticastPtr with NVLS disabled: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestEmuRanksFailures(t *testing.T) {
	// A rank that fails stops the others waiting for it in a barrier.
	err := RunRanks(RanksOptions{Backend: Emulator, World: 3, NVSHMEM: true}, func(r *Rank) error {
		if r.Rank == 1 {
			return errors.New("boom")
		}
		return r.NVSHMEM.BarrierAll()
	})
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 1 || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("failing rank: %v", err)
	}
	// A panic is that rank's failure.
	err = RunRanks(RanksOptions{Backend: Emulator, World: 2}, func(r *Rank) error {
		if r.Rank == 0 {
			panic("oops")
		}
		return nil
	})
	if !errors.As(err, &re) || re.Rank != 0 || !strings.Contains(err.Error(), "panic: oops") {
		t.Fatalf("panicking rank: %v", err)
	}
	// Ranks whose collective calls disagree.
	err = RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true}, func(r *Rank) error {
		if r.Rank == 0 {
			return r.NVSHMEM.BarrierAll()
		}
		_, err := r.NVSHMEM.Malloc(64)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "disagree") {
		t.Fatalf("mismatched collectives: %v", err)
	}
	// A rank that returns while the others wait for it.
	err = RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true}, func(r *Rank) error {
		if r.Rank == 0 {
			return r.NVSHMEM.BarrierAll()
		}
		r.NVSHMEM.mu.Lock()
		r.NVSHMEM.done = true // skip the collective Finalize too
		r.NVSHMEM.mu.Unlock()
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "returned without making collective call") {
		t.Fatalf("rank returning early: %v", err)
	}
	// A launch on one rank that waits for a flag while the other calls BarrierAll: a real
	// deadlock (rank 0's Finalize waits for the kernel, rank 1 for rank 0), reported on the
	// rank that waits for the kernel, naming it.
	mod := ringKernel(t)
	err = RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true}, func(r *Rank) error {
		flag, err := SymAlloc[uint32](r.NVSHMEM, 1)
		if err != nil {
			return err
		}
		if r.Rank == 1 {
			return r.NVSHMEM.BarrierAll()
		}
		m, err := r.Device.Load(Source{Module: mod})
		if err != nil {
			return err
		}
		fn, _ := m.Function("ring_put")
		other, err := Alloc[uint32](r.Device, 1) // where it raises a flag no one waits for
		if err != nil {
			return err
		}
		return fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32)}, other, other, flag, uint32(0), uint32(0), uint32(1))
	})
	if !errors.As(err, &re) || re.Rank != 0 || !strings.Contains(err.Error(), "can never finish") || !strings.Contains(err.Error(), "ring_put on GPU(s) 0") ||
		!strings.Contains(err.Error(), "emu_test.go:") {
		t.Fatalf("launch against barrier: %v", err)
	}
	// Different symmetric sizes.
	err = RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true}, func(r *Rank) error {
		_, err := r.NVSHMEM.Malloc(int64(64 * (r.Rank + 1)))
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "same size") {
		t.Fatalf("different Malloc sizes: %v", err)
	}
}

// TestEmuCollectiveLaunchNeeded: the ring kernel launched on each rank with CollectiveOff
// (once: "alone", and it could not progress) runs beside the other rank's, as on GPUs; so
// do launches of the same kernel with different blocks on the ranks.
func TestEmuCollectiveLaunchNeeded(t *testing.T) {
	mod := ringKernel(t)
	err := RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true, Open: []Option{WithEmuOptions(emu.Options{StepBudget: 20000})}}, func(r *Rank) error {
		m, err := r.Device.Load(Source{Module: mod})
		if err != nil {
			return err
		}
		fn, _ := m.Function("ring_put")
		data, _ := SymAlloc[uint32](r.NVSHMEM, 32)
		flag, err := SymAlloc[uint32](r.NVSHMEM, 1)
		if err != nil {
			return err
		}
		pd, _ := r.NVSHMEM.PeerPtr(data, 1-r.Rank)
		pf, _ := r.NVSHMEM.PeerPtr(flag, 1-r.Rank)
		if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32), Collective: CollectiveOff}, pd, pf, flag, uint32(r.Rank), uint32(32), uint32(1)); err != nil {
			return err
		}
		got := make([]uint32, 32)
		if err := data.CopyToHost(got); err != nil {
			return err
		}
		for i, v := range got {
			if want := uint32((1-r.Rank)*1000 + i + 1); v != want {
				return fmt.Errorf("rank %d data[%d] = %d, want %d", r.Rank, i, v, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("CollectiveOff: %v", err)
	}
	// Launches of different shapes on the ranks.
	err = RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true}, func(r *Rank) error {
		m, err := r.Device.Load(Source{Module: mod})
		if err != nil {
			return err
		}
		fn, _ := m.Function("ring_put")
		flag, err := SymAlloc[uint32](r.NVSHMEM, 1)
		if err != nil {
			return err
		}
		return fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32 * (r.Rank + 1))}, flag, flag, flag, uint32(0), uint32(0), uint32(0))
	})
	if err != nil {
		t.Fatalf("different blocks: %v", err)
	}
}

// TestEmuHandWrittenPTX: Source.PTX is parsed and checked against Source.Module.
func TestEmuHandWrittenPTX(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var b strings.Builder
	if err := ptx.Print(&b, vectorAdd(t)); err != nil {
		t.Fatal(err)
	}
	sig := vectorAdd(t)
	if _, err := d.Load(Source{Module: sig, PTX: []byte(b.String())}); err != nil {
		t.Fatal(err)
	}
	// A module that passes ptx.Verify but disagrees with the text: its last parameter is
	// renamed (a module failing Verify is refused before the signatures are compared).
	wrong := vectorAdd(t)
	for _, f := range wrong.Funcs {
		if f.Entry {
			last := f.Params[len(f.Params)-1].Name
			f.Params[len(f.Params)-1].Name = "renamed"
			for _, in := range f.Body {
				for i, a := range in.Args {
					if ad, ok := a.(ptx.Addr); ok && ad.Base == ptx.Sym(last) {
						ad.Base = ptx.Sym("renamed")
						in.Args[i] = ad
					}
				}
			}
		}
	}
	if err := ptx.Verify(wrong); err != nil {
		t.Fatalf("the renamed module fails Verify: %v", err)
	}
	if _, err := d.Load(Source{Module: wrong, PTX: []byte(b.String())}); err == nil || !strings.Contains(err.Error(), "Source.Module says") {
		t.Fatalf("mismatched signature: %v", err)
	}
	text, err := os.ReadFile(filepath.Join("testdata", "put_block.ptx"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ptx.Parse(string(text)); err != nil {
		t.Logf("put_block.ptx does not parse (%v)", err)
	}
}

// TestEmuMulticast: the emulator has multicast. Every rank adds rank+1 to every GPU's copy
// of a symmetric buffer at once with multimem.red through the multicast address, and reads
// the sum from its own copy.
func TestEmuMulticast(t *testing.T) {
	t.Setenv("NVSHMEM_DISABLE_NVLS", "")
	k := dsl.New("mc_add", dsl.WithTarget(ptx.SM90))
	mc := k.PtrParam("mc", dsl.U32)
	rank := k.Param("rank", dsl.U32)
	n := k.Param("n", dsl.U32)
	i := k.GlobalThreadIdx(dsl.X)
	k.If(i.Lt(n), func() {
		k.MultimemReduce(mc.At(i), dsl.Sum, []dsl.Value{rank.Add(uint32(1))}, dsl.Relaxed(dsl.System))
	})
	mod, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	const world, count = 4, 100
	err = RunRanks(RanksOptions{Backend: Emulator, World: world, NVSHMEM: true}, func(r *Rank) error {
		buf, err := SymAlloc[uint32](r.NVSHMEM, count)
		if err != nil {
			return err
		}
		mcp, err := r.NVSHMEM.MulticastPtr(buf)
		if err != nil {
			return err
		}
		m, err := r.Device.Load(Source{Module: mod})
		if err != nil {
			return err
		}
		fn, _ := m.Function("mc_add")
		if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(128)}, mcp, uint32(r.Rank), uint32(count)); err != nil {
			return err
		}
		if err := r.NVSHMEM.BarrierAll(); err != nil {
			return err
		}
		got := make([]uint32, count)
		if err := buf.CopyToHost(got); err != nil {
			return err
		}
		for i, v := range got {
			if v != world*(world+1)/2 {
				return fmt.Errorf("buf[%d] = %d, want %d", i, v, world*(world+1)/2)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunRanksProcessRank: on a process-per-rank backend (the fake GPU backend here),
// RunRanks runs the function once, for this process's rank.
func TestRunRanksProcessRank(t *testing.T) {
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "2")
	t.Setenv("LOCAL_RANK", "1")
	t.Setenv("MASTER_ADDR", "127.0.0.1")
	t.Setenv("MASTER_PORT", "29500")
	calls := 0
	err := RunRanks(RanksOptions{Backend: "fake"}, func(r *Rank) error {
		calls++
		if r.Rank != 1 || r.World != 2 || r.LocalRank != 1 || r.Device == nil || r.NVSHMEM != nil {
			return fmt.Errorf("rank %+v", r)
		}
		return nil
	})
	if err != nil || calls != 1 {
		t.Fatalf("%d calls: %v", calls, err)
	}
	err = RunRanks(RanksOptions{Backend: "fake"}, func(r *Rank) error { return errors.New("bad") })
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 1 {
		t.Fatalf("failing rank: %v", err)
	}
	if err := RunRanks(RanksOptions{Backend: "fake", World: 4}, func(*Rank) error { return nil }); err == nil || !strings.Contains(err.Error(), "WORLD_SIZE=2") {
		t.Fatalf("World 4 under WORLD_SIZE=2: %v", err)
	}
	t.Setenv("RANK", "")
	t.Setenv("WORLD_SIZE", "")
	if err := RunRanks(RanksOptions{Backend: "fake", World: 4}, func(*Rank) error { return nil }); err == nil || !strings.Contains(err.Error(), "kgen launch -n 4") {
		t.Fatalf("World 4 in one process: %v", err)
	}
	if err := RunRanks(RanksOptions{Backend: "nosuch"}, func(*Rank) error { return nil }); err == nil || !strings.Contains(err.Error(), "unknown backend") {
		t.Fatalf("unknown backend: %v", err)
	}
}
