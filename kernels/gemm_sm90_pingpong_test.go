package kernels

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestGemmSM90PingPongPtxas assembles the ping-pong schedule (bf16 64x256 and 64x128 tiles
// per consumer warpgroup, plain and with bias+SiLU, register and TMA-store epilogues; f16 ->
// f32, e4m3 with scales; clusters of 2) with ptxas -v: no spills, no setmaxnreg or wgmma serialization
// warning.
func TestGemmSM90PingPongPtxas(t *testing.T) {
	var cfgs []GemmSM90Config
	bs := Epilogue{Bias: true, Act: SiLU}
	for _, bn := range []int{256, 128} {
		for _, store := range []bool{false, true} {
			for _, e := range []Epilogue{{}, bs} {
				c := GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: bn, Consumers: 2, Stages: 4, PingPong: true, TMAStore: store, Epilogue: e}
				for c.Check() != nil {
					c.Stages--
				}
				cfgs = append(cfgs, c)
			}
		}
	}
	cfgs = append(cfgs,
		GemmSM90Config{In: dsl.F16, Out: dsl.F32, BN: 128, Consumers: 2, Stages: 4, PingPong: true, Epilogue: Epilogue{Bias: true, Act: GELU, Residual: true}},
		GemmSM90Config{In: dsl.E4M3, Out: dsl.BF16, BN: 256, Consumers: 2, Stages: 3, PingPong: true, Epilogue: Epilogue{Scales: true, Bias: true, Act: SiLU}},
		GemmSM90Config{In: dsl.E4M3, Out: dsl.BF16, BN: 256, Consumers: 2, Stages: 2, PingPong: true, TMAStore: true, Epilogue: Epilogue{Scales: true, Bias: true, Act: SiLU}},
		GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 256, Consumers: 2, Stages: 4, PingPong: true, ClusterM: 2, Epilogue: bs},
		GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 256, Consumers: 2, Stages: 3, PingPong: true, ClusterM: 2, TMAStore: true, Epilogue: bs},
	)
	gemmSM90Ptxas(t, cfgs)
}

// TestGemmSM90PingPongConfig: the name tells the schedule, a tile is one warpgroup's 64 rows
// (tiles, grid, A's box, shared memory follow), and Check and the build refuse what the
// schedule does not run.
func TestGemmSM90PingPongConfig(t *testing.T) {
	c := GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 256, Consumers: 2, Stages: 4, PingPong: true}
	if got, want := c.Name(), "gemm_sm90_bf16_bf16_64x256x64_4s_pingpong"; got != want {
		t.Errorf("Name %q, want %q", got, want)
	}
	coop := c
	coop.PingPong = false
	if c.Name() == coop.Name() {
		t.Errorf("ping-pong and cooperative share the name %q", c.Name())
	}
	if c.BM() != 64 || c.Threads() != 384 || c.Tiles(257, 520) != 5*3 || c.Grid(257, 520, 132) != 15 || c.TMABoxA() != [2]int{64, 64} {
		t.Errorf("BM %d threads %d tiles %d grid %d box A %v; want 64, 384, 15, 15, [64 64]", c.BM(), c.Threads(), c.Tiles(257, 520), c.Grid(257, 520, 132), c.TMABoxA())
	}
	// Stages of a 64-row A; the TMA-store tiles are one 64 x BN tile per warpgroup.
	if got, want := c.SharedBytes(), 4*(64+256)*64*2+dsl.DynamicSharedTilePad; got != want {
		t.Errorf("SharedBytes %d, want %d", got, want)
	}
	st := c
	st.TMAStore, st.Stages = true, 3
	if got, want := st.SharedBytes(), 3*(64+256)*64*2+2*64*256*2+dsl.DynamicSharedTilePad; got != want {
		t.Errorf("TMAStore SharedBytes %d, want %d", got, want)
	}
	for _, bad := range []struct {
		cfg  GemmSM90Config
		want string
	}{
		{GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 256, Consumers: 1, Stages: 4, PingPong: true}, "two consumer warpgroups"},
	} {
		if err := bad.cfg.Check(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: Check %v, want %q", bad.cfg, err, bad.want)
		}
	}
	// The grouped kernel shares the body but not the schedule: its Check refuses it by name,
	// and a build of it is an error, not a kernel.
	g := DefaultGemmSM90GroupedConfig(dsl.BF16)
	g.PingPong, g.Stages = true, 4
	if err := g.Check(); err == nil || !strings.Contains(err.Error(), "PingPong: the grouped gemm runs the cooperative schedule") {
		t.Errorf("grouped gemm with PingPong: Check %v, want the schedule's refusal", err)
	}
	k := dsl.New("g", dsl.WithTarget(ptx.SM90a))
	GemmSM90Grouped(k, g)
	if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), "PingPong") {
		t.Errorf("grouped gemm with PingPong: Build %v, want the schedule's refusal", err)
	}
}
