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

// TestEmuLaunchContextNamesMissingRank: rank 2 never launches; the others' gathered launch
// ends at its context's deadline on both ranks, naming rank 2.
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
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			err = fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32), Context: ctx}, flag, flag, flag, uint32(0), uint32(0), uint32(0))
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
		t.Fatal("the launch did not honour its context")
	}
	for r := 0; r < 2; r++ {
		err := errs[r]
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "rank 2 never made it") {
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

// TestEmuLaunchCallsDiffer: gathered launches of the same kernel and shape whose Calls
// differ fail on every rank, naming the odd rank.
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
		errs[r.Rank] = fn.Launch(LaunchConfig{Grid: D1(1), Block: D1(32), Call: call}, flag, flag, flag, uint32(0), uint32(0), uint32(0))
		return errs[r.Rank]
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
