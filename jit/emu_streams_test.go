package jit

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/ptx"
)

// streamKernels: waiter (thread 0 waits until flag >= epoch, then every thread copies n
// words of data into out) and setter (every thread stores rank*1000+epoch*100+i into n
// words of peer data, then thread 0 raises the peer's flag to epoch with a release).
// waitLine is the Go line of waiter's wait.
func streamKernels(t *testing.T) (waiter, setter *ptx.Module, waitLine int) {
	k := dsl.New("waiter", dsl.WithTarget(ptx.SM90))
	flag := k.PtrParam("flag", dsl.U32)
	data := k.PtrParam("data", dsl.U32)
	out := k.PtrParam("out", dsl.U32)
	n := k.Param("n", dsl.U32)
	epoch := k.Param("epoch", dsl.U32)
	_, _, line, _ := runtime.Caller(0)
	k.If(k.ThreadIdx(dsl.X).Eq(uint32(0)), func() {
		k.WaitUntil(flag.At(0), dsl.Ge, epoch, dsl.Acquire(dsl.System)) // line+2
	})
	k.SyncThreads()
	i := k.ThreadIdx(dsl.X)
	k.If(i.Lt(n), func() { k.Store(out.At(i), k.Load(data.At(i))) })
	w, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	k = dsl.New("setter", dsl.WithTarget(ptx.SM90))
	pflag := k.PtrParam("peer_flag", dsl.U32)
	pdata := k.PtrParam("peer_data", dsl.U32)
	rank := k.Param("rank", dsl.U32)
	n = k.Param("n", dsl.U32)
	epoch = k.Param("epoch", dsl.U32)
	i = k.GlobalThreadIdx(dsl.X)
	k.If(i.Lt(n), func() { k.Store(pdata.At(i), rank.Mul(uint32(1000)).Add(epoch.Mul(uint32(100))).Add(i)) })
	k.SyncThreads()
	k.If(k.GlobalThreadIdx(dsl.X).Eq(uint32(0)), func() { k.Store(pflag.At(0), epoch, dsl.Release(dsl.System)) })
	s, err := k.Build()
	if err != nil {
		t.Fatal(err)
	}
	return w, s, line + 2
}

// streamRanks runs f on 2 emulated ranks with NVSHMEM, giving each its kernels, a
// symmetric flag and data buffer of n words and a private output buffer.
func streamRanks(t *testing.T, seed int64, budget int64, f func(r *Rank, waiter, setter *Function, flag, data, out *Buffer[uint32]) error) error {
	t.Helper()
	wm, sm, _ := streamKernels(t)
	return RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true, Open: []Option{WithEmuOptions(emu.Options{Seed: seed, Weak: seed%2 == 1, StepBudget: budget})}},
		func(r *Rank) error {
			wmod, err := r.Device.Load(Source{Module: wm})
			if err != nil {
				return err
			}
			smod, err := r.Device.Load(Source{Module: sm})
			if err != nil {
				return err
			}
			waiter, _ := wmod.Function("waiter")
			setter, _ := smod.Function("setter")
			flag, err := SymAlloc[uint32](r.NVSHMEM, 1)
			if err != nil {
				return err
			}
			data, err := SymAlloc[uint32](r.NVSHMEM, 64)
			if err != nil {
				return err
			}
			out, err := Alloc[uint32](r.Device, 64)
			if err != nil {
				return err
			}
			if err := r.NVSHMEM.BarrierAll(); err != nil { // every copy is zero before a kernel writes
				return err
			}
			return f(r, waiter, setter, flag, data, out)
		})
}

func checkOut(out *Buffer[uint32], from, epoch, n int) error {
	got := make([]uint32, n)
	if err := out.CopyToHost(got); err != nil {
		return err
	}
	for i, v := range got {
		if want := uint32(from*1000 + epoch*100 + i); v != want {
			return fmt.Errorf("out[%d] = %d, want %d", i, v, want)
		}
	}
	return nil
}

// TestEmuStreamsDifferentKernels: rank 0 launches waiter, rank 1 (later, with another grid
// shape) setter, which raises the flag waiter waits for. The kernels are different, so the
// emulator's old gathering of the ranks' launches refused them; now each rank's stream runs
// on its own and they meet as on GPUs.
func TestEmuStreamsDifferentKernels(t *testing.T) {
	for _, seed := range []int64{0, 1, 2, 3} {
		err := streamRanks(t, seed, 0, func(r *Rank, waiter, setter *Function, flag, data, out *Buffer[uint32]) error {
			const n = 48
			if r.Rank == 0 {
				if err := waiter.Launch(LaunchConfig{Grid: D1(1), Block: D1(64)}, flag, data, out, uint32(n), uint32(1)); err != nil {
					return err
				}
				return checkOut(out, 1, 1, n) // a synchronous copy: waits for waiter
			}
			time.Sleep(5 * time.Millisecond) // let rank 0's kernel start and spin first
			peerFlag, err := r.NVSHMEM.PeerPtr(flag, 0)
			if err != nil {
				return err
			}
			peerData, err := r.NVSHMEM.PeerPtr(data, 0)
			if err != nil {
				return err
			}
			if err := setter.Launch(LaunchConfig{Grid: D1(1), Block: D1(96)}, peerFlag, peerData, uint32(1), uint32(n), uint32(1)); err != nil {
				return err
			}
			return r.Device.Synchronize()
		})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// TestEmuStreamsWaitForLaterLaunch: rank 0's one kernel waits for rank 1's SECOND launch
// (flag >= 2); rank 1 launches setter twice back to back without synchronizing (one launch
// ahead of rank 0, whose k-th launch would have met rank 1's k-th in the old lockstep).
func TestEmuStreamsWaitForLaterLaunch(t *testing.T) {
	for _, seed := range []int64{0, 1, 2, 3, 4, 5} {
		err := streamRanks(t, seed, 0, func(r *Rank, waiter, setter *Function, flag, data, out *Buffer[uint32]) error {
			const n = 40
			if r.Rank == 0 {
				if err := waiter.Launch(LaunchConfig{Grid: D1(1), Block: D1(64)}, flag, data, out, uint32(n), uint32(2)); err != nil {
					return err
				}
				return checkOut(out, 1, 2, n)
			}
			peerFlag, _ := r.NVSHMEM.PeerPtr(flag, 0)
			peerData, _ := r.NVSHMEM.PeerPtr(data, 0)
			s, err := r.Device.NewStream()
			if err != nil {
				return err
			}
			for epoch := 1; epoch <= 2; epoch++ {
				if err := setter.Launch(LaunchConfig{Grid: D1(1), Block: D1(64), Stream: s}, peerFlag, peerData, uint32(1), uint32(n), uint32(epoch)); err != nil {
					return err
				}
			}
			return s.Synchronize()
		})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// TestEmuStreamsDeadlock: both ranks launch waiter on flags nobody raises and wait for it:
// a real deadlock, reported on both ranks (not a hang) with the kernel, GPU and Go line.
func TestEmuStreamsDeadlock(t *testing.T) {
	_, _, line := streamKernels(t)
	errs := make([]error, 2)
	done := make(chan error, 1)
	go func() {
		done <- streamRanks(t, 3, 100000, func(r *Rank, waiter, setter *Function, flag, data, out *Buffer[uint32]) error {
			if err := waiter.Launch(LaunchConfig{Grid: D1(1), Block: D1(32)}, flag, data, out, uint32(1), uint32(1)); err != nil {
				return err
			}
			errs[r.Rank] = r.Device.Synchronize()
			return errs[r.Rank]
		})
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the deadlock hung")
	}
	if err == nil {
		t.Fatal("RunRanks succeeded")
	}
	for r, err := range errs {
		if err == nil || errors.Is(err, errStopped) {
			continue // rank r saw the other's failure first
		}
		for _, want := range []string{"can never finish", "waiter on GPU(s) 0", "waiter on GPU(s) 1", fmt.Sprintf("emu_streams_test.go:%d", line)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("rank %d: report lacks %q: %v", r, want, err)
			}
		}
	}
	if errs[0] == nil && errs[1] == nil {
		t.Fatalf("no rank got the deadlock: %v", err)
	}
	t.Log(err)
}
