package dsl_test

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe22BarrierOverBounds: a named barrier waiting for more threads than the kernel's
// LaunchBounds let a block have (NamedBarrier(1, 1024) in a kernel of at most 128 threads)
// can never complete: the block hangs. Build took it and ptxas assembles it; now Build
// names the barrier, the threads it expects and the bound, whichever of the two calls came first. Probe 22.
func TestProbe22BarrierOverBounds(t *testing.T) {
	for name, c := range map[string]struct {
		f    func(k *dsl.Kernel)
		want string
	}{
		"NamedBarrier":         {func(k *dsl.Kernel) { k.LaunchBounds(128, 1); k.NamedBarrier(1, 1024) }, "barrier.sync 1 expects 1024 threads"},
		"bounds after":         {func(k *dsl.Kernel) { k.NamedBarrier(2, 256); k.LaunchBounds(128, 0) }, "barrier.sync 2 expects 256 threads"},
		"NamedBarrierArrive":   {func(k *dsl.Kernel) { k.LaunchBounds(64, 1); k.NamedBarrierArrive(3, 96) }, "barrier.arrive 3 expects 96 threads"},
		"NamedBarrierFor.Sync": {func(k *dsl.Kernel) { k.LaunchBounds(128, 1); k.NamedBarrierFor("x", 256).Sync() }, "barrier.sync 1 expects 256 threads"},
	} {
		k := dsl.New("k", dsl.WithTarget(ptx.SM90))
		c.f(k)
		_, err := k.Build()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "LaunchBounds") {
			t.Errorf("%s: Build = %v; want an error holding %q and naming LaunchBounds", name, err, c.want)
		}
	}
	// At the bound, and without bounds, the barriers build.
	for name, f := range map[string]func(k *dsl.Kernel){
		"at the bound": func(k *dsl.Kernel) {
			k.LaunchBounds(128, 1)
			k.NamedBarrier(1, 128)
			k.NamedBarrierFor("x", 64).Arrive()
		},
		"no bounds": func(k *dsl.Kernel) { k.NamedBarrier(1, 1024) },
	} {
		k := dsl.New("k", dsl.WithTarget(ptx.SM90))
		f(k)
		if _, err := k.Build(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
