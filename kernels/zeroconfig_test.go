package kernels

import (
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestZeroConfigsDoNotPanic: the host-side helpers of the gemm configurations (grids, tile
// and signal counts) return 0 for configurations with empty tiles (BN 0, Consumers 0, the
// zero value) or GPU counts below 1, instead of dividing by zero; GemmSM90For refuses
// element types no candidate builds, empty or negative shapes and SM counts, naming them.
func TestZeroConfigsDoNotPanic(t *testing.T) {
	for _, c := range []GemmSM90Config{{}, {In: dsl.BF16, Out: dsl.BF16, Consumers: 2}, {In: dsl.BF16, Out: dsl.BF16, BN: 128}} {
		if g, tl := c.Grid(256, 256, 132), c.Tiles(256, 256); g != 0 || tl != 0 {
			t.Errorf("%+v: Grid %d, Tiles %d; want 0 (no tiles)", c, g, tl)
		}
		if n := FusedSM90Tiles(c, 256, 256, 2) + GemmRSSM90SignalWords(c, 256, 256, 2); n != 0 {
			t.Errorf("%+v: fused counts %d, want 0", c, n)
		}
	}
	good := DefaultGemmSM90Config(dsl.BF16)
	if g := good.Grid(256, 256, 0); g != 0 {
		t.Errorf("0 SMs: Grid %d, want 0", g)
	}
	for _, n := range []int{FusedSM90Tiles(good, 256, 256, 0), AGGemmSM90SignalWords(good, 256, -1), FusedGrid(DefaultFusedConfig(dsl.F16), 256, 256, 0),
		GemmRSSignalWords(DefaultFusedConfig(dsl.F16), 256, 256, 0), GemmConfig{}.Grid(256, 256), DefaultGemmConfig(dsl.F16).Grid(0, 256)} {
		if n != 0 {
			t.Errorf("count %d for 0 GPUs, an empty tile or an empty problem; want 0", n)
		}
	}
	for _, c := range []struct {
		in, out dsl.Type
		m, n, k int
		sms     int
		want    string
	}{
		{dsl.F32, dsl.F32, 256, 256, 256, 132, "no candidate for f32 -> f32"},
		{dsl.U8, dsl.U8, 256, 256, 256, 132, "no candidate for u8 -> u8"},
		{dsl.BF16, dsl.BF16, 0, 256, 256, 132, "every extent must be positive"},
		{dsl.BF16, dsl.BF16, 256, -8, 256, 132, "every extent must be positive"},
		{dsl.BF16, dsl.BF16, 256, 256, 256, 0, "0 multiprocessors"},
		{dsl.BF16, dsl.BF16, 256, 256, 256, -3, "-3 multiprocessors"},
	} {
		cfg, err := GemmSM90For(c.in, c.out, c.m, c.n, c.k, c.sms)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("GemmSM90For(%s, %s, %dx%dx%d, %d SMs) = %+v, %v; want an error naming %q", c.in, c.out, c.m, c.n, c.k, c.sms, cfg, err, c.want)
		}
	}
}

// TestZeroConfigShapeAndCycles: CheckShape refuses a configuration Check refuses (the zero
// value included) with Check's error, and Cycles, a cost, is +Inf for what cannot run: such a
// configuration, an extent below 1 or fewer than 1 multiprocessor.
func TestZeroConfigShapeAndCycles(t *testing.T) {
	zero := GemmSM90Config{}
	want := zero.Check()
	if want == nil {
		t.Fatal("the zero GemmSM90Config passes Check")
	}
	if err := zero.CheckShape(64, 64, 64); err == nil || err.Error() != want.Error() {
		t.Errorf("zero config CheckShape(64,64,64) = %v, want Check's %v", err, want)
	}
	good := DefaultGemmSM90Config(dsl.BF16)
	if err := good.CheckShape(64, 64, 64); err != nil {
		t.Errorf("default config CheckShape(64,64,64) = %v", err)
	}
	for _, c := range []struct {
		cfg        GemmSM90Config
		m, n, k, s int
	}{
		{good, -64, 64, 64, 132}, {good, 64, 0, 64, 132}, {good, 64, 64, -1, 132},
		{good, 64, 64, 64, 0}, {good, 64, 64, 64, -1},
		{zero, 64, 64, 64, 132}, {GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 128, Consumers: 2}, 64, 64, 64, 132},
	} {
		if got := c.cfg.Cycles(c.m, c.n, c.k, c.s); !math.IsInf(got, 1) {
			t.Errorf("%+v.Cycles(%d,%d,%d,%d) = %v, want +Inf", c.cfg, c.m, c.n, c.k, c.s, got)
		}
	}
	if got := good.Cycles(64, 64, 64, 132); math.IsInf(got, 0) || got <= 0 {
		t.Errorf("default config Cycles(64,64,64,132) = %v, want a positive finite cost", got)
	}
}
