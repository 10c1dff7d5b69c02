package dist

import (
	"context"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/ops"
)

// TestProbe13NilMoELayer: every method of a nil *MoELayer returns an error or a zero value
// (Config and MoE panicked: nil pointer; probe 13).
func TestProbe13NilMoELayer(t *testing.T) {
	ctx := context.Background()
	for _, l := range []*MoELayer{nil, {}} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("a %v MoELayer: panic %v", l == nil, r)
				}
			}()
			if c := l.Config(); c != (MoELayerConfig{}) {
				t.Errorf("Config = %+v; want the zero configuration", c)
			}
			if m := l.MoE(); m != nil {
				t.Errorf("MoE = %v; want nil", m)
			}
			var x ops.Tensor[fp.BF16]
			for name, err := range map[string]error{
				"Forward": l.Forward(ctx, x, x, ops.Tensor[int32]{}, ops.Tensor[float32]{}),
				"GateUp":  l.GateUp(ctx),
				"Check":   l.Check(ctx),
				"Free":    l.Free(ctx),
			} {
				if err == nil || !strings.Contains(err.Error(), "nil or freed MoELayer") {
					t.Errorf("%s: %v; want an error naming the nil layer", name, err)
				}
			}
		}()
	}
}
