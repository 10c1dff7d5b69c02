package jit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEmuMallocMismatchNamesOddPE: of three PEs, the one whose size differs is named (not
// PE 0, whose size is the common one).
func TestEmuMallocMismatchNamesOddPE(t *testing.T) {
	err := RunRanks(RanksOptions{Backend: Emulator, World: 3, NVSHMEM: true}, func(r *Rank) error {
		n := int64(64)
		if r.Rank == 1 {
			n = 128
		}
		_, err := r.NVSHMEM.Malloc(n)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "PE 1 has 128 bytes where PEs 0, 2 have 64 bytes") {
		t.Fatalf("got %v", err)
	}
}

// TestDisagreement checks the wording of the odd ranks.
func TestDisagreement(t *testing.T) {
	for _, c := range []struct {
		vals []string
		want string
	}{
		{[]string{"a", "a", "a"}, ""},
		{[]string{"b", "a", "a"}, "rank 0 has b where ranks 1, 2 have a"},
		{[]string{"a", "b"}, "rank 1 has b where rank 0 has a"},
		{[]string{"a", "b", "c", "a"}, "rank 1 has b, rank 2 has c where ranks 0, 3 have a"},
	} {
		if got := disagreement("rank", c.vals); got != c.want {
			t.Errorf("disagreement(%q) = %q, want %q", c.vals, got, c.want)
		}
	}
}

// TestEmuLaunchContextNamesMissingRank: rank 2 never launches; the others' kernels wait for
// it, and their waits for them (Device.Synchronize) end at the launches' context deadline,
// naming the launch.
func TestEmuLaunchContextNamesMissingRank(t *testing.T) {
	mod := ringKernel(t)
	var mu sync.Mutex
	errs := map[int]error{}
	release := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- RunRanks(RanksOptions{Backend: Emulator, World: 3, NVSHMEM: true}, func(r *Rank) error {
			flag, err := SymAlloc[uint32](r.NVSHMEM, 1)
			if err != nil {
				return err
			}
			if r.Rank == 2 {
				<-release // never launches
				return nil
			}
			m, err := r.Device.Load(Source{Module: mod})
			if err != nil {
				return err
			}
			fn, err := m.Function("ring_put")
			if err != nil {
				return err
			}
			other, err := Alloc[uint32](r.Device, 1)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			err = fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32), Context: ctx}, other, other, flag, uint32(0), uint32(0), uint32(1))
			if err == nil {
				err = r.Device.Synchronize()
			}
			mu.Lock()
			errs[r.Rank] = err
			if len(errs) == 2 {
				once.Do(func() { close(release) })
			}
			mu.Unlock()
			return err
		})
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("RunRanks succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the wait did not honour the launch's context")
	}
	for r := 0; r < 2; r++ {
		err := errs[r]
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "launch of ring_put") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestEmuRanksContext: RanksOptions.Context bounds a host collective call (BarrierAll) that
// one rank never makes.
func TestEmuRanksContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	release := make(chan struct{})
	var once sync.Once
	err := RunRanks(RanksOptions{Backend: Emulator, World: 2, NVSHMEM: true, Context: ctx}, func(r *Rank) error {
		if r.Rank == 1 {
			<-release
			return nil
		}
		err := r.NVSHMEM.BarrierAll()
		once.Do(func() { close(release) })
		return err
	})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "rank 1 never made it") {
		t.Fatalf("got %v", err)
	}
}

// TestEmuLaunchCallsDiffer: launches whose Calls differ fail on every rank, naming the odd
// rank. Nothing waits for the comparison (the ranks' streams run on their own): it is made
// once every rank has launched its call, and the error comes back from each rank's launch or
// next synchronizing call (or, where another rank failed first, as that failure).
func TestEmuLaunchCallsDiffer(t *testing.T) {
	mod := ringKernel(t)
	errs := make([]error, 3)
	err := RunRanks(RanksOptions{Backend: Emulator, World: 3, NVSHMEM: true}, func(r *Rank) error {
		flag, err := SymAlloc[uint32](r.NVSHMEM, 1)
		if err != nil {
			return err
		}
		m, err := r.Device.Load(Source{Module: mod})
		if err != nil {
			return err
		}
		fn, err := m.Function("ring_put")
		if err != nil {
			return err
		}
		call := "AllReduce of 301 f32"
		if r.Rank == 0 {
			call = "AllReduce of 302 f32"
		}
		err = fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32), Call: call}, flag, flag, flag, uint32(0), uint32(0), uint32(0))
		for _, f := range []func() error{r.Device.Synchronize, r.NVSHMEM.BarrierAll, r.Device.Synchronize} {
			if err == nil {
				err = f()
			}
		}
		errs[r.Rank] = err
		return err
	})
	if err == nil {
		t.Fatal("RunRanks succeeded")
	}
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 0 has AllReduce of 302 f32 where ranks 1, 2 have AllReduce of 301 f32") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestEmuFaultNamesCall: a kernel fault comes back from the rank's next synchronizing call,
// naming the rank, the launch's Call and the kernel.
func TestEmuFaultNamesCall(t *testing.T) {
	mod := ringKernel(t)
	errs := make([]error, 3)
	err := RunRanks(RanksOptions{Backend: Emulator, World: 3, NVSHMEM: true}, func(r *Rank) error {
		flag, err := SymAlloc[uint32](r.NVSHMEM, 1)
		if err != nil {
			return err
		}
		m, err := r.Device.Load(Source{Module: mod})
		if err != nil {
			return err
		}
		fn, err := m.Function("ring_put")
		if err != nil {
			return err
		}
		n := uint32(0)
		if r.Rank == 0 {
			n = 32 // stores 32 words into a 4-byte allocation
		}
		if err := fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32), Call: "AllReduce of 302 f32"}, flag, flag, flag, uint32(0), n, uint32(0)); err != nil {
			return err
		}
		errs[r.Rank] = r.Device.Synchronize()
		return errs[r.Rank]
	})
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 0 {
		t.Fatalf("RunRanks: %v", err)
	}
	if err := errs[0]; err == nil || !strings.Contains(err.Error(), "rank 0") || !strings.Contains(err.Error(), "AllReduce of 302 f32: launch of ring_put") ||
		!strings.Contains(err.Error(), "out-of-bounds") {
		t.Errorf("rank 0: %v", err)
	}
	for r := 1; r < 3; r++ { // done, or stopped by rank 0's failure
		if errs[r] != nil && !errors.Is(errs[r], errStopped) {
			t.Errorf("rank %d: %v", r, errs[r])
		}
	}
}
