package collectives

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestProbe20AlgorithmSizes: the *Algorithm queries multiplied a huge count by the element
// size (and the GPUs) in an int: AllReduceAlgorithm(f32, Sum, math.MaxInt) named the
// small-message p2p_allreduce_lamport_sum and ReduceScatterAlgorithm another kernel than
// for a large part, though no Buffer holds that many elements (Alloc refuses them); they
// answer "" for a count beyond a Buffer's. An unknown reduction was named "ReduceOp(?)", not by its
// value, and AllReduceTo's refusals said "AllReduce: dst holds ...". Probe 20.
func TestProbe20AlgorithmSizes(t *testing.T) {
	runRanks(t, 2, false, false, 1, Options{}, func(e *rankEnv) error {
		c := e.c
		most := func(bytes int) int { return (math.MaxInt32 - 15) / bytes } // Alloc's bound
		for _, n := range []int{math.MaxInt, math.MaxInt/4 + 1, 1 << 40, most(2) + 1} {
			if got := c.AllReduceAlgorithm(dsl.F32, Sum, n); got != "" {
				t.Errorf("AllReduceAlgorithm(f32, Sum, %d) = %q; want \"\" (no Buffer holds that many)", n, got)
			}
			if got := c.ReduceScatterAlgorithm(dsl.F32, Max, n); got != "" {
				t.Errorf("ReduceScatterAlgorithm(f32, Max, %d) = %q; want \"\"", n, got)
			}
			if got := c.AllGatherAlgorithm(dsl.F16, n); got != "" {
				t.Errorf("AllGatherAlgorithm(f16, %d) = %q; want \"\"", n, got)
			}
		}
		// The largest sizes a call can have still have an algorithm.
		if c.AllReduceAlgorithm(dsl.F32, Sum, most(4)) == "" || c.ReduceScatterAlgorithm(dsl.F32, Sum, most(4)/2) == "" ||
			c.AllGatherAlgorithm(dsl.F16, most(2)/2) == "" {
			t.Errorf("no algorithm for the largest Buffers")
		}
		if got := c.AllReduceAlgorithm(dsl.U8, Sum, 16); got != "" {
			t.Errorf("AllReduceAlgorithm(u8) = %q; want \"\"", got)
		}
		b, err := c.Alloc(dsl.F32, 16)
		if err != nil {
			return err
		}
		if err := c.AllReduce(context.Background(), b, Op(99)); err == nil || !strings.Contains(err.Error(), "ReduceOp(99) is not supported") {
			t.Errorf("AllReduce with Op(99): %v; want an error naming ReduceOp(99)", err)
		}
		i32, err := c.Alloc(dsl.I32, 16)
		if err != nil {
			return err
		}
		if err := c.AllReduceTo(context.Background(), i32, b, Sum); err == nil || !strings.Contains(err.Error(), "collectives: AllReduceTo: dst holds 16 s32, src 16 f32") {
			t.Errorf("AllReduceTo of s32 from f32: %v; want an error naming AllReduceTo", err)
		}
		return errors.Join(i32.Free(), b.Free())
	})
}
