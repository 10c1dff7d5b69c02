package jit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// TestWaitCondHolds pins the conditions to CUDA's CU_STREAM_WAIT_VALUE_* (GEQ is cyclic).
func TestWaitCondHolds(t *testing.T) {
	for _, c := range []struct {
		cond     WaitCond
		v, value uint32
		want     bool
	}{
		{WaitGEQ, 5, 5, true}, {WaitGEQ, 6, 5, true}, {WaitGEQ, 4, 5, false},
		{WaitGEQ, 2, 0xffff_fffe, true}, {WaitGEQ, 0xffff_fffe, 2, false}, // wrapped around
		{WaitEQ, 7, 7, true}, {WaitEQ, 8, 7, false},
		{WaitAND, 6, 4, true}, {WaitAND, 3, 4, false},
		{WaitNOR, 0xffff_fff0, 0x0f, false}, {WaitNOR, 0xffff_ff00, 0x0f, true},
	} {
		if got := c.cond.holds(c.v, c.value); got != c.want {
			t.Errorf("%v: holds(%#x, %#x) = %v, want %v", c.cond, c.v, c.value, got, c.want)
		}
	}
}

// TestStreamWaitValueSideCopy: rank 1's setter stores into rank 0's data and raises rank 0's
// flag with st.release.sys; rank 0 has queued, before rank 1 launches anything, a side-stream
// WaitValue32(flag >= epoch) and a copy of data into out. The copy must see every store the
// release ordered before the flag (weak memory on odd seeds buffers the setter's stores to
// the peer until its release). Back to back with increasing epochs, the flag never reset.
func TestStreamWaitValueSideCopy(t *testing.T) {
	for _, seed := range []int64{0, 1, 2, 3} {
		err := streamRanks(t, seed, 0, func(r *Rank, waiter, setter *Function, flag, data, out *Buffer[uint32]) error {
			const n = 48
			peerFlag, err := r.NVSHMEM.PeerPtr(flag, 0)
			if err != nil {
				return err
			}
			peerData, err := r.NVSHMEM.PeerPtr(data, 0)
			if err != nil {
				return err
			}
			side, err := r.Device.NewStream()
			if err != nil {
				return err
			}
			for epoch := 1; epoch <= 3; epoch++ {
				if r.Rank == 0 {
					if err := side.WaitValue32(flag.DevPtr(), uint32(epoch), WaitGEQ); err != nil {
						return err
					}
					if err := side.CopyDtoD(out.DevPtr(), data.DevPtr(), 4*n); err != nil {
						return err
					}
					if err := side.Synchronize(); err != nil {
						return err
					}
					if err := checkOut(out, 1, epoch, n); err != nil {
						return fmt.Errorf("epoch %d: %w", epoch, err)
					}
				} else {
					if err := setter.Launch(LaunchConfig{Grid: D1(1), Block: D1(64)}, peerFlag, peerData, uint32(1), uint32(n), uint32(epoch)); err != nil {
						return err
					}
					if err := r.Device.Synchronize(); err != nil {
						return err
					}
				}
				if err := r.NVSHMEM.BarrierAll(); err != nil { // rank 0 has read epoch's data
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// TestStreamWriteValueReleasesWait: on one device, stream b waits for a word that stream a
// writes with WriteValue32 after a copy; b's copy then sees a's copy (the write is a
// release of a's earlier work). The wait is queued first.
func TestStreamWriteValueReleasesWait(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	flag, _ := Alloc[uint32](d, 1)
	src, _ := Alloc[uint32](d, 16)
	mid, _ := Alloc[uint32](d, 16)
	dst, _ := Alloc[uint32](d, 16)
	want := make([]uint32, 16)
	for i := range want {
		want[i] = uint32(100 + i)
	}
	if err := src.CopyFromHost(want); err != nil {
		t.Fatal(err)
	}
	a, _ := d.NewStream()
	b, _ := d.NewStream()
	for epoch := uint32(1); epoch <= 3; epoch++ {
		if err := b.WaitValue32(flag.DevPtr(), epoch, WaitEQ); err != nil {
			t.Fatal(err)
		}
		if err := b.CopyDtoD(dst.DevPtr(), mid.DevPtr(), 64); err != nil {
			t.Fatal(err)
		}
		if err := a.CopyDtoD(mid.DevPtr(), src.DevPtr(), 64); err != nil {
			t.Fatal(err)
		}
		if err := a.WriteValue32(flag.DevPtr(), epoch); err != nil {
			t.Fatal(err)
		}
		if err := b.Synchronize(); err != nil {
			t.Fatal(err)
		}
		got := make([]uint32, 16)
		if err := dst.CopyToHost(got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("epoch %d: dst[%d] = %d, want %d", epoch, i, got[i], want[i])
			}
		}
	}
}

// TestStreamWaitValueNeverSatisfied: a wait nothing satisfies is reported, not a hang: as a
// deadlock by Synchronize (no kernel in flight can write the word), and within a deadline
// by SynchronizeContext.
func TestStreamWaitValueNeverSatisfied(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	flag, _ := Alloc[uint32](d, 1)
	s, _ := d.NewStream()
	if err := s.WaitValue32(flag.DevPtr(), 9, WaitGEQ); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	err = s.SynchronizeContext(ctx)
	if err == nil || time.Since(t0) > 30*time.Second {
		t.Fatalf("SynchronizeContext = %v after %v", err, time.Since(t0))
	}
	t.Log(err)
	err = s.Synchronize()
	if err == nil || !strings.Contains(err.Error(), "deadlock") || !strings.Contains(err.Error(), ">= 9 (cyclic) (it is 0)") {
		t.Fatalf("Synchronize = %v, want a deadlock report naming the wait", err)
	}
	t.Log(err)
	// The word written from the host (a synchronous copy waits for every stream: the
	// default stream cannot be used) frees the stream only through another stream.
	w, _ := d.NewStream()
	if err := w.WriteValue32(flag.DevPtr(), 9); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatalf("after the write: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStreamWaitValueDeadlockRanks: on a machine of ranks, a wait no kernel can satisfy is
// reported on the rank that waits, naming the wait.
func TestStreamWaitValueDeadlockRanks(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		done <- RunRanks(RanksOptions{Backend: Emulator, World: 2, Open: []Option{WithEmuOptions(emu.Options{Seed: 2})}}, func(r *Rank) error {
			flag, err := Alloc[uint32](r.Device, 1)
			if err != nil {
				return err
			}
			s, err := r.Device.NewStream()
			if err != nil {
				return err
			}
			if err := s.WaitValue32(flag.DevPtr(), 1, WaitEQ); err != nil {
				return err
			}
			return s.Synchronize()
		})
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "deadlock") || !strings.Contains(err.Error(), "== 1 (it is 0)") {
			t.Fatalf("RunRanks = %v, want a deadlock naming the wait", err)
		}
		t.Log(err)
	case <-time.After(60 * time.Second):
		t.Fatal("the stuck wait hung")
	}
}

// TestStreamValueChecks: misuse is refused with a clear error.
func TestStreamValueChecks(t *testing.T) {
	d, err := OpenBackend(Emulator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	flag, _ := Alloc[uint32](d, 2)
	s, _ := d.NewStream()
	var nilStream *Stream
	for _, c := range []struct {
		err  error
		want string
	}{
		{nilStream.WaitValue32(flag.DevPtr(), 1, WaitEQ), "nil *Stream"},
		{s.WaitValue32(flag.DevPtr()+2, 1, WaitEQ), "not 4-byte aligned"},
		{s.WaitValue32(0, 1, WaitEQ), "address is 0"},
		{s.WaitValue32(flag.DevPtr(), 1, WaitCond(9)), "unknown condition"},
		{s.WriteValue32(flag.DevPtr()+1, 1), "not 4-byte aligned"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("got %v, want an error with %q", c.err, c.want)
		}
	}
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitValue32(flag.DevPtr(), 1, WaitEQ); err == nil || !strings.Contains(err.Error(), "capturing") {
		t.Errorf("WaitValue32 while capturing on the emulator: %v", err)
	}
	if _, err := s.EndCapture(); err != nil {
		t.Fatal(err)
	}
}

// TestStreamWaitValueWhileKernelRuns: the wait is satisfied while the kernel that released
// the word still runs: the kernel stores data, releases flag = epoch, then spins until ack
// reaches epoch; the side stream waits for flag, copies data and writes ack. With events
// (done only at the kernel's end) this would deadlock.
func TestStreamWaitValueWhileKernelRuns(t *testing.T) {
	k := dsl.New("signal_then_wait", dsl.WithTarget(ptx.SM90))
	flag := k.PtrParam("flag", dsl.U32)
	ack := k.PtrParam("ack", dsl.U32)
	data := k.PtrParam("data", dsl.U32)
	epoch := k.Param("epoch", dsl.U32)
	i := k.ThreadIdx(dsl.X)
	k.Store(data.At(i), epoch.Mul(uint32(1000)).Add(i))
	k.SyncThreads()
	k.If(i.Eq(uint32(0)), func() {
		k.Store(flag.At(0), epoch, dsl.Release(dsl.System))
		k.WaitUntil(ack.At(0), dsl.Ge, epoch, dsl.Acquire(dsl.System))
	})
	m, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, weak := range []bool{false, true} {
		d, err := OpenBackend(Emulator, 0, WithEmuOptions(emu.Options{Weak: weak, Seed: 5}))
		if err != nil {
			t.Fatal(err)
		}
		mod, err := d.Load(Source{Module: m})
		if err != nil {
			t.Fatal(err)
		}
		fn, _ := mod.Function("signal_then_wait")
		fl, _ := Alloc[uint32](d, 1)
		ak, _ := Alloc[uint32](d, 1)
		dat, _ := Alloc[uint32](d, 32)
		out, _ := Alloc[uint32](d, 32)
		main, _ := d.NewStream()
		side, _ := d.NewStream()
		for e := uint32(1); e <= 3; e++ {
			if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32), Stream: main}, fl, ak, dat, e); err != nil {
				t.Fatal(err)
			}
			if err := side.WaitValue32(fl.DevPtr(), e, WaitGEQ); err != nil {
				t.Fatal(err)
			}
			if err := side.CopyDtoD(out.DevPtr(), dat.DevPtr(), 128); err != nil {
				t.Fatal(err)
			}
			if err := side.WriteValue32(ak.DevPtr(), e); err != nil {
				t.Fatal(err)
			}
		}
		if err := main.Synchronize(); err != nil {
			t.Fatalf("weak %v: %v", weak, err)
		}
		if err := side.Synchronize(); err != nil {
			t.Fatalf("weak %v: %v", weak, err)
		}
		got := make([]uint32, 32)
		if err := out.CopyToHost(got); err != nil {
			t.Fatal(err)
		}
		for j, v := range got {
			if v != uint32(3000+j) {
				t.Fatalf("weak %v: out[%d] = %d, want %d", weak, j, v, 3000+j)
			}
		}
		d.Close()
	}
}
