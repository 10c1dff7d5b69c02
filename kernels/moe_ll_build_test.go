package kernels

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestMoELLBuild builds both low-latency kernels for every golden target.
func TestMoELLBuild(t *testing.T) {
	for _, f := range []Family{FamilyMoELLDispatch, FamilyMoELLCombine} {
		s, err := Find(ID{Family: f, DType: dsl.BF16})
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range []ptx.Target{ptx.SM80, ptx.SM90} {
			if _, err := s.BuildVariant(Config{Target: tg, DType: dsl.BF16}); err != nil {
				t.Errorf("%s %s: %v", f, tg, err)
			}
		}
	}
}
