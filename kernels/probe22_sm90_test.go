package kernels_test

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/fp"
	"github.com/kgen-dev/kgen/jit"
)

// TestProbe22ExtraBlocksSM90: the sm_90a attention (not Persistent) on more blocks than its
// Grid: the blocks past it mapped to tiles past the batch and stored LSE (and O) outside
// their buffers (the emulator's out-of-bounds access); now they return at once and O and
// LSE are right. Probe 22.
func TestProbe22ExtraBlocksSM90(t *testing.T) {
	for _, causal := range []bool{false, true} {
		d, err := jit.OpenBackend(jit.Emulator, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		p := sm90Problem{cfg: sm90Cfg(dsl.BF16, 64, causal, false, false), b: 1, h: 2, hk: 1, sq: 70, sk: 90}
		r := prepSM90T[fp.BF16](t, d, p, 22)
		r.lc.Grid += 3
		if err := r.launch(nil, nil); err != nil {
			t.Fatalf("%v on %d blocks: %v", p, r.lc.Grid, err)
		}
		if err := d.Synchronize(); err != nil {
			t.Fatalf("%v on %d blocks: %v", p, r.lc.Grid, err)
		}
		r.check(t)
	}
}
