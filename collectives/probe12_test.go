package collectives

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// TestProbe12OptionsNotReplaced: Options values outside their documented range, or a
// Matmul/MatmulSM90 configuration set in part (its key tile field left zero), are refused
// by New naming the field (before: a negative MaxBlocks or OneShotMaxBytes became the
// default, and a configuration whose BM (BN) was zero was replaced whole by the default,
// the fields set dropped silently).
func TestProbe12OptionsNotReplaced(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"MaxBlocks -1", Options{MaxBlocks: -1}, "Options.MaxBlocks -1"},
		{"MaxBlocks huge", Options{MaxBlocks: 1 << 40}, "Options.MaxBlocks"},
		{"OneShotMaxBytes -1", Options{OneShotMaxBytes: -1}, "Options.OneShotMaxBytes -1"},
		{"Matmul BM 0", Options{Matmul: kernels.GemmConfig{BN: 64, BK: 32, WarpsM: 2, WarpsN: 2, Stages: 2}}, "Options.Matmul"},
		{"Matmul stages only", Options{Matmul: kernels.GemmConfig{Stages: 4}}, "Options.Matmul"},
		{"MatmulSM90 BN 0", Options{MatmulSM90: kernels.GemmSM90Config{Stages: 2, Consumers: 1}}, "Options.MatmulSM90"},
	}
	runRanks(t, 1, false, false, 1, Options{}, func(e *rankEnv) error {
		for _, tc := range cases {
			o := tc.o
			o.Logger = e.c.o.Logger
			c, err := New(ctx, e.r, o)
			if err == nil {
				c.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				return fmt.Errorf("%s: New = %v; want an error naming %s", tc.name, err, tc.want)
			}
		}
		// The documented zero values and the documented negatives still run.
		for _, o := range []Options{{}, {PushMinBytes: -1, ReduceScatterPullMinBytes: -1, Push4MinBytes: -1}, {Matmul: kernels.DefaultFusedConfig(0)}} {
			o.Logger = e.c.o.Logger
			c, err := New(ctx, e.r, o)
			if err != nil {
				return fmt.Errorf("New(%+v) = %v; want a Comm", o, err)
			}
			if err := c.Close(); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestProbe12TensorMapBox: a Buffer.TensorMap box extent outside 1..2^32-1 is refused
// naming the box (before: it was cut to 32 bits, so a box of 2^32+64 rows made a map of 64
// rows and reported success).
func TestProbe12TensorMapBox(t *testing.T) {
	runRanks(t, 1, false, false, 1, Options{}, func(e *rankEnv) error {
		b, err := e.c.Alloc(dsl.BF16, 64*64)
		if err != nil {
			return err
		}
		if _, err := b.TensorMap(64, 64, [2]int{64, 64}); err != nil {
			return fmt.Errorf("a 64 x 64 box: %w", err)
		}
		for _, box := range [][2]int{{1<<32 + 64, 64}, {64, 1<<32 + 8}, {-1, 64}, {64, 0}} {
			_, err := b.TensorMap(64, 64, box)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("box %v", box)) {
				return fmt.Errorf("box %v: %v; want an error naming the box", box, err)
			}
		}
		return nil
	})
}
