package collectives

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
)

// TestRanksDisagree: a collective call whose ranks disagree (element count, dtype, op,
// root) fails on every rank, naming the rank that differs, instead of returning nil with a
// wrong element. The ranks' streams run on their own, so the emulator compares the calls'
// descriptions once every rank has launched its own, and the error comes back from the
// ranks' next synchronizing calls (or, on a rank that got there first, as the failure of the
// rank that found it).
func TestRanksDisagree(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		mc   bool
		call func(e *rankEnv, odd bool) error
		want string
	}{
		{"count", false, func(e *rankEnv, odd bool) error {
			n := 301
			if odd {
				n = 302 // pads to the same bytes as 301
			}
			b, err := e.c.Alloc(dsl.F32, n)
			if err != nil {
				return err
			}
			return e.c.AllReduce(ctx, b, Sum)
		}, "rank 0 has AllReduce of 302 f32 by sum in place where ranks 1, 2 have AllReduce of 301 f32 by sum in place"},
		{"count multicast", true, func(e *rankEnv, odd bool) error {
			n := 301
			if odd {
				n = 302
			}
			b, err := e.c.Alloc(dsl.F32, n)
			if err != nil {
				return err
			}
			return e.c.AllReduce(ctx, b, Sum)
		}, "rank 0 has AllReduce of 302 f32"},
		{"dtype", false, func(e *rankEnv, odd bool) error {
			dt := dsl.F32
			if odd {
				dt = dsl.I32
			}
			b, err := e.c.Alloc(dt, 64)
			if err != nil {
				return err
			}
			return e.c.AllReduce(ctx, b, Sum)
		}, "PE 0 has 65536 bytes where PEs 1, 2 have 8192 bytes"}, // the one-shot's staging buffer against Lamport's slots and state words
		{"op", true, func(e *rankEnv, odd bool) error {
			op := Sum
			if odd {
				op = Max
			}
			b, err := e.c.Alloc(dsl.F16, 64)
			if err != nil {
				return err
			}
			return e.c.AllReduce(ctx, b, op)
		}, "rank 0 has AllReduce of 64 f16 by max in place where ranks 1, 2 have AllReduce of 64 f16 by sum"},
		{"root", false, func(e *rankEnv, odd bool) error {
			root := 1
			if odd {
				root = 2
			}
			b, err := e.c.Alloc(dsl.F32, 64)
			if err != nil {
				return err
			}
			return e.c.Broadcast(ctx, b, b, root)
		}, "rank 0 has Broadcast of 64 f32 from root 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := make([]error, 3)
			err := runRanksErr(3, c.mc, false, 0, testOpts, func(e *rankEnv) error {
				err := c.call(e, e.c.Rank() == 0)
				if err == nil {
					err = e.r.Device.Synchronize()
				}
				if err == nil {
					err = e.r.NVSHMEM.BarrierAll()
				}
				if err == nil {
					err = e.r.Device.Synchronize()
				}
				errs[e.c.Rank()] = err
				return err
			})
			if err == nil {
				t.Fatal("every rank succeeded")
			}
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// TestMissingRankDeadline: rank 2 never calls AllReduce; the others' calls (or, once they
// are launched, the waits for them) end at their context's deadline, naming rank 2, instead
// of hanging.
func TestMissingRankDeadline(t *testing.T) {
	for _, mc := range []bool{false, true} {
		t.Run(fmt.Sprintf("mc=%v", mc), func(t *testing.T) {
			missingRank(t, mc, "AllReduce", "rank 2 never made it", func(e *rankEnv, b *Buffer, ctx context.Context) error {
				err := e.c.AllReduce(ctx, b, Sum)
				if err == nil {
					err = e.r.Device.Synchronize()
				}
				return err
			})
		})
	}
}

// missingRank runs 3 ranks that each allocate a buffer; rank 2 then stays away (in Go code)
// while ranks 0 and 1 make call with a context of 100 ms. Their calls must end at the
// deadline, wrapping context.DeadlineExceeded and naming the missing rank (want), not wait
// forever; the whole run must end within 30 s.
func missingRank(t *testing.T, mc bool, what, want string, call func(e *rankEnv, b *Buffer, ctx context.Context) error) {
	t.Helper()
	var mu sync.Mutex
	errs := map[int]error{}
	release := make(chan struct{})
	done := make(chan error, 1)
	calling := make(chan struct{}) // closed when a rank begins the call: the deadline's clock starts
	var once sync.Once
	go func() {
		done <- runRanksErr(3, mc, false, 0, testOpts, func(e *rankEnv) error {
			b, err := e.c.Alloc(dsl.F32, 1000)
			if err != nil {
				return err
			}
			if e.c.Rank() == 2 {
				<-release
				return nil
			}
			once.Do(func() { close(calling) })
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			err = call(e, b, ctx)
			mu.Lock()
			errs[e.c.Rank()] = err
			if len(errs) == 2 {
				close(release)
			}
			mu.Unlock()
			return err
		})
	}()
	// Setup (the Comm, its kernels, the allocation) and teardown may take long under the race
	// detector on a loaded machine: the deadline's check times the two calls alone (release
	// closes when both have returned).
	select {
	case <-calling:
	case err := <-done:
		t.Fatalf("the ranks ended before the call: %v", err)
	}
	select {
	case <-release:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not honour its context's deadline", what)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("every rank succeeded")
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("the ranks did not end after %s returned", what)
	}
	for r := 0; r < 2; r++ {
		if err := errs[r]; err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), want) {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestAllocContextDeadline: rank 2 never calls AllocContext; the others' calls end at their
// context's deadline with an error naming the missing rank, instead of waiting forever
// (HARDENING 2). Alloc (no context) is AllocContext with no deadline.
func TestAllocContextDeadline(t *testing.T) {
	missingRank(t, false, "AllocContext", "rank 2", func(e *rankEnv, _ *Buffer, ctx context.Context) error {
		_, err := e.c.AllocContext(ctx, dsl.F32, 1000)
		return err
	})
}

// TestCloseContextDeadline: rank 2 never closes its Comm; the others' CloseContext ends at
// its context's deadline with an error naming the missing rank, instead of waiting forever
// in the collective frees (HARDENING 2).
func TestCloseContextDeadline(t *testing.T) {
	missingRank(t, false, "CloseContext", "rank 2", func(e *rankEnv, _ *Buffer, ctx context.Context) error {
		return e.c.CloseContext(ctx)
	})
}

// TestLaunchContextEndsMidKernel: a fused matmul's context is cancelled right after every
// rank launched it. A wait may report the cancellation, but the kernel runs on (as a GPU's
// does when its host stops waiting), so its result is right and later calls on the group
// work on every rank (HARDENING 2: after such a deadline every later collective failed).
func TestLaunchContextEndsMidKernel(t *testing.T) {
	for _, seed := range []int64{0, 3} {
		runRanks(t, 2, false, false, seed, fusedOpts, func(e *rankEnv) error {
			shape := MatmulShape{M: 2 * 36, N: 40, K: 24}
			rs, err := e.allocAll(dsl.BF16, shape.M*shape.K, shape.K*shape.N, shape.M/2*shape.N, dsl.F32)
			if err != nil {
				return err
			}
			if err := e.checkRS(context.Background(), rs, shape, dsl.F32, false); err != nil { // loads and allocates
				return err
			}
			ctx, cancel := context.WithCancel(context.Background())
			err = e.c.MatmulReduceScatter(ctx, rs[0], rs[1], rs[2], shape)
			cancel()
			if err == nil {
				err = e.r.Device.Synchronize()
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("the cancelled call: %w", err)
			}
			for call := 0; call < 2; call++ {
				if err := e.checkRS(context.Background(), rs, shape, dsl.F32, false); err != nil {
					return fmt.Errorf("call %d after the cancelled one: %w", call, err)
				}
				if err := e.c.Barrier(context.Background()); err != nil {
					return err
				}
			}
			return nil
		})
	}
}
