package ops

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/jit"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbeAttentionConfigForHostile: hostile types, head dims, lengths and devices give an
// error naming the problem or a configuration Check accepts that fits the device, never a
// panic.
func TestProbeAttentionConfigForHostile(t *testing.T) {
	for _, tc := range []struct {
		sm, d, sq int
		dt        ptx.Type
		want      string
	}{
		{90, 128, 128, ptx.F32, "input type f32"},
		{90, 0, 128, ptx.BF16, "head dim 0"},
		{90, -64, 128, ptx.BF16, "head dim -64"},
		{90, 1 << 40, 128, ptx.BF16, "head dim"},
		{90, 128, -1, ptx.BF16, ""},
		{90, 128, 0, ptx.BF16, ""},
		{1000, 256, 1 << 40, ptx.F16, ""},
		{0, 128, 128, ptx.BF16, "8.0 or newer"},
		{-90, 128, 128, ptx.BF16, "8.0 or newer"},
	} {
		name := fmt.Sprintf("sm%d/d%d/sq%d/%s", tc.sm, tc.d, tc.sq, tc.dt)
		var (
			err  error
			fits bool
		)
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			cfg, e := AttentionConfigFor(jit.Info{Name: "gpu", SM: tc.sm}, tc.dt, tc.d, tc.sq, false)
			err = e
			fits = e == nil && cfg.Check() == nil && cfg.SharedBytes() <= maxSharedPerBlock(tc.sm)
		}()
		switch {
		case tc.want == "" && (err != nil || !fits):
			t.Errorf("%s: %v (fits %v); want a configuration that fits", name, err, fits)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error containing %q", name, err, tc.want)
		}
	}
}
