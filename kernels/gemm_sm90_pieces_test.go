package kernels

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestGemmSM90PiecesPtxas assembles the Pieces option with both store paths, one and two
// consumer warpgroups and PingPong: no spills, no ptxas performance warning.
func TestGemmSM90PiecesPtxas(t *testing.T) {
	var cfgs []GemmSM90Config
	for _, base := range []GemmSM90Config{DefaultGemmSM90Config(dsl.BF16), DefaultGemmSM90Config(dsl.E4M3),
		{In: dsl.BF16, Out: dsl.F32, BN: 128, Consumers: 1, Stages: 6}, {In: dsl.BF16, Out: dsl.BF16, BN: 256, Consumers: 2, Stages: 4, PingPong: true}} {
		for _, tma := range []bool{false, true} {
			c := base
			c.Pieces, c.TMAStore = true, tma
			if c.Check() == nil {
				cfgs = append(cfgs, c)
			}
		}
	}
	gemmSM90Ptxas(t, cfgs)
}

// TestGemmSM90PiecesMisuse: what Pieces cannot do is refused by name.
func TestGemmSM90PiecesMisuse(t *testing.T) {
	c := DefaultGemmSM90Config(dsl.BF16)
	c.Pieces, c.ClusterM = true, 2
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "Pieces") {
		t.Errorf("Pieces with clusters: %v", err)
	}
	g := GemmSM90GroupedConfig{GemmSM90Config: DefaultGemmSM90Config(dsl.BF16)}
	g.Pieces = true
	if err := g.Check(); err == nil || !strings.Contains(err.Error(), "Pieces") {
		t.Errorf("grouped with Pieces: %v", err)
	}
	c = DefaultGemmSM90Config(dsl.BF16)
	if err := c.CheckPieces(1024, 256); err == nil {
		t.Error("CheckPieces without Pieces passed")
	}
	c.Pieces = true
	for _, x := range []struct {
		m, rows int
		want    string
	}{{1024, 0, "positive multiple"}, {1024, 192, "positive multiple"}, {1000, 256, "not a multiple"}} {
		if err := c.CheckPieces(x.m, x.rows); err == nil || !strings.Contains(err.Error(), x.want) {
			t.Errorf("CheckPieces(%d, %d) = %v, want %q", x.m, x.rows, err, x.want)
		}
	}
	if err := c.CheckPieces(1024, 256); err != nil {
		t.Error(err)
	}
	if got := c.PieceSignals(256, 1000); got != 4*4 {
		t.Errorf("PieceSignals(256, 1000) = %d, want 16", got)
	}
	if !strings.HasSuffix(c.Name(), "_pieces") {
		t.Errorf("name %s", c.Name())
	}
	// The fused kernels' hooks and Pieces do not mix.
	k := dsl.New("g", dsl.WithTarget(ptx.SM90a))
	gemmSM90Body(k, c, GemmSM90Args{}, GemmOut{}, gemmSM90Hooks{})
	if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), "Pieces needs") {
		t.Errorf("Pieces without counters: %v", err)
	}
}
