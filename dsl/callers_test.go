package dsl_test

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/ptx"
)

// TestFrameWalkPositions builds every library kernel for every dtype with positions from
// runtime.Callers and then twice from the frame-pointer walk (the second time from what
// the first learned): the PTX, .loc lines included, must be the same.
func TestFrameWalkPositions(t *testing.T) {
	for _, s := range kernels.All() {
		for _, dt := range s.DTypes {
			c := kernels.Config{Target: ptx.SM90, DType: dt}
			if len(s.Targets) > 0 && !hasTarget(s.Targets, ptx.SM90) {
				c.Target = s.Targets[0]
			}
			build := func(exact bool) string {
				dsl.SetExactCallers(exact)
				defer dsl.SetExactCallers(false)
				m, err := s.Build(c)
				if err != nil {
					t.Fatalf("%s %s: %v", s.Name, dt, err)
				}
				return m.String()
			}
			want := build(true)
			for i := 0; i < 2; i++ {
				if got := build(false); got != want {
					t.Fatalf("%s %s: the frame walk gave other positions than runtime.Callers (build %d)", s.Name, dt, i+1)
				}
			}
		}
	}
}

func hasTarget(ts []ptx.Target, t ptx.Target) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}
