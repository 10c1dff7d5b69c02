package collectives

import (
	"context"
	"fmt"
	"strings"
	"testing"

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
