package collectives

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/jit"
)

// TestCaptureHostile: a Capture inside another's record function is refused saying so,
// once (before: "collectives: Capture: collectives: Capture: jit: BeginCapture: the stream
// is already capturing"); a host read inside record, and a panicking record, fail that
// capture only: the Comm runs and reads after them.
func TestCaptureHostile(t *testing.T) {
	ctx := context.Background()
	runRanks(t, 2, false, false, 0, Options{}, func(e *rankEnv) error {
		o := graphOpts
		o.DisableMulticast = true
		return withStream(e, o, func(c *Comm, s *jit.Stream) error {
			buf, err := c.Alloc(dsl.F32, 64)
			if err != nil {
				return err
			}
			_, err = c.Capture(ctx, func() error {
				_, err := c.Capture(ctx, func() error { return c.AllReduce(ctx, buf, Sum) })
				return err
			})
			if err == nil || !strings.Contains(err.Error(), "inside another Capture's record function") || strings.Count(err.Error(), "Capture:") != 1 {
				return fmt.Errorf("nested Capture: %v; want one refusal saying so", err)
			}
			_, err = c.Capture(ctx, func() error {
				if err := c.AllReduce(ctx, buf, Sum); err != nil {
					return err
				}
				_, err := buf.ReadF32()
				return err
			})
			if err == nil || !strings.Contains(err.Error(), "synchronize on a capturing stream") {
				return fmt.Errorf("a read inside record: %v", err)
			}
			func() {
				defer func() { _ = recover() }()
				_, _ = c.Capture(ctx, func() error { panic("boom") })
			}()
			want := make([]float32, 64)
			for i := range want {
				want[i] = float32(i + c.Rank())
			}
			if err := buf.WriteF32(want); err != nil {
				return err
			}
			if err := c.AllReduce(ctx, buf, Sum); err != nil {
				return fmt.Errorf("AllReduce after the failed captures: %w", err)
			}
			got, err := buf.ReadF32()
			if err != nil {
				return err
			}
			for i, g := range got {
				if w := float32(2*i + 1); g != w {
					return fmt.Errorf("after the failed captures: element %d = %v; want %v", i, g, w)
				}
			}
			return nil
		})
	})
}
