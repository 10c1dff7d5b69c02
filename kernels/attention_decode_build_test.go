package kernels

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestAttentionDecodeBuilds builds the default decode kernel of every type, head dim and
// several page sizes, and the combine kernel.
func TestAttentionDecodeBuilds(t *testing.T) {
	for _, dt := range []dsl.Type{dsl.F16, dsl.BF16} {
		for _, d := range []int{64, 128, 256} {
			for _, ps := range []int{16, 32, 64, 256} {
				for _, rows := range []int{1, 32} {
					cfg := DefaultAttentionDecodeConfig(dt, d, ps, rows)
					k := dsl.New(cfg.Name())
					AttentionDecode(k, cfg)
					if _, err := k.Build(); err != nil {
						t.Errorf("%s: %v", cfg.Name(), err)
					}
				}
			}
			k := dsl.New(AttentionDecodeCombineName(dt, d))
			AttentionDecodeCombine(k, dt, d)
			if _, err := k.Build(); err != nil {
				t.Errorf("combine %s d%d: %v", dt, d, err)
			}
		}
	}
}
