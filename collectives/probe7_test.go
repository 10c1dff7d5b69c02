package collectives

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
)

// TestProbe7DifferentCollectives: rank 0 calls AllReduce where rank 1 calls AllGather on
// buffers of the same Alloc: every rank gets an error naming the deadlock before its
// deadline, never nil. The emulator finds it by its no-progress budget, which takes 27 s
// under -race on the 2-core CI machine: the deadline leaves room for a loaded one.
func TestProbe7DifferentCollectives(t *testing.T) {
	errs := make([]error, 2)
	done := make(chan error, 1)
	go func() {
		done <- runRanksErr(2, false, false, 0, testOpts, func(e *rankEnv) error {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			a, err := e.c.Alloc(dsl.F32, 64)
			if err != nil {
				return err
			}
			b, err := e.c.Alloc(dsl.F32, 128)
			if err != nil {
				return err
			}
			if e.c.Rank() == 0 {
				err = e.c.AllReduce(ctx, a, Sum)
			} else {
				err = e.c.AllGather(ctx, b, a)
			}
			if err == nil {
				err = e.r.Device.SynchronizeContext(ctx)
			}
			if err == nil {
				err = e.r.NVSHMEM.BarrierAllContext(ctx)
			}
			if err == nil {
				err = e.r.Device.SynchronizeContext(ctx)
			}
			errs[e.c.Rank()] = err
			return err
		})
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("every rank succeeded")
		}
	case <-time.After(240 * time.Second):
		t.Fatal("no answer 240 s after start (deadline 120 s)")
	}
	for r, err := range errs {
		if err == nil {
			t.Errorf("rank %d: nil", r)
		} else if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("rank %d waited to its deadline: %v; want the deadlock reported", r, err)
		} else {
			t.Logf("rank %d: %v", r, err)
		}
	}
}
