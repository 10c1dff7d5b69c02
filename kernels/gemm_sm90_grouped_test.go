package kernels

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/ptx"
)

// TestGemmSM90GroupedPtxas assembles every configuration GemmSM90GroupedFor can pick for
// bf16 and for e4m3 with Scales, each also Masked (and f16, scaled bf16 -> f32 samples, and
// the bench's variants of the 128x256 tile: register or TMA store, row-tile or banded order)
// with ptxas -v: no spills, no performance warning.
func TestGemmSM90GroupedPtxas(t *testing.T) {
	ptxas := tooltest.Ptxas(t)
	cfgs := append(gemmSM90GroupedCandidates(dsl.BF16, dsl.BF16), DefaultGemmSM90GroupedConfig(dsl.F16),
		GemmSM90GroupedConfig{GemmSM90Config: GemmSM90Config{In: dsl.BF16, Out: dsl.F32, BN: 64, Consumers: 1, Stages: 4}, Scales: true})
	for _, v := range []struct {
		store bool
		band  int
	}{{false, 0}, {true, 0}, {false, 8}, {true, 16}} {
		c := DefaultGemmSM90GroupedConfig(dsl.BF16)
		c.TMAStore, c.BandM = v.store, v.band
		cfgs = append(cfgs, c)
	}
	for _, c := range gemmSM90GroupedCandidates(dsl.E4M3, dsl.BF16) {
		c.Scales = true
		cfgs = append(cfgs, c)
	}
	// The masked layout of every pick (the low-latency MoE layer's) and the golden one.
	for _, c := range append(gemmSM90GroupedCandidates(dsl.BF16, dsl.BF16), gemmSM90GroupedCandidates(dsl.E4M3, dsl.BF16)...) {
		c.Scales, c.Masked = c.FP8(), true
		cfgs = append(cfgs, c)
	}
	cfgs = append(cfgs, gemmSM90GroupedMaskedGolden(dsl.F16))
	for _, cfg := range cfgs {
		k := dsl.New(cfg.Name(), dsl.WithTarget(ptx.SM90a))
		GemmSM90Grouped(k, cfg)
		m, err := k.Build()
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "g.ptx")
		if err := os.WriteFile(f, []byte(m.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(ptxas, "-arch=sm_90a", "-v", f, "-o", f+".cubin").CombinedOutput()
		if err != nil {
			t.Fatalf("%s: ptxas: %v: %s", cfg.Name(), err, out)
		}
		for _, w := range []string{"C7508", "C7517", "C7510", "Potential Performance Loss"} {
			if strings.Contains(string(out), w) {
				t.Errorf("%s: ptxas warns: %s", cfg.Name(), out)
				break
			}
		}
		s := spillRE.FindStringSubmatch(string(out))
		if s == nil {
			t.Fatalf("%s: no spill counts in ptxas -v: %s", cfg.Name(), out)
		}
		// fp8 with scales and the TMA store keeps a few spilled bytes at 128x256 (8 stored,
		// 16 loaded under ptxas 13): measured 1.14-1.69x faster than the register store
		// that does not spill (docs/moe.md), so it is picked; anything more is an error.
		limit := 0
		if cfg.FP8() && cfg.TMAStore {
			limit = 32
		}
		if st, ld := atoiOr(s[1]), atoiOr(s[2]); st > limit || ld > limit {
			t.Errorf("%s spills: %s (allowed %d bytes)", cfg.Name(), s[0], limit)
		}
		t.Logf("%s: %s", cfg.Name(), usedRE.FindString(string(out)))
	}
}

// TestGemmSM90GroupedCheck: what the grouped kernel refuses, each with an error naming the
// field and the rule.
func TestGemmSM90GroupedCheck(t *testing.T) {
	def := DefaultGemmSM90GroupedConfig(dsl.BF16)
	if err := def.CheckShape(0, 4096, 7168, 8); err != nil {
		t.Errorf("0 rows: %v", err)
	}
	bad := func(f func(*GemmSM90GroupedConfig)) GemmSM90GroupedConfig { c := def; f(&c); return c }
	for _, tc := range []struct {
		cfg        GemmSM90GroupedConfig
		m, n, k, g int
		want       string
	}{
		{bad(func(c *GemmSM90GroupedConfig) { c.In = dsl.E4M3 }), 8, 8, 8, 1, "K must be a multiple of 16"},
		{bad(func(c *GemmSM90GroupedConfig) { c.In, c.Out = dsl.E4M3, dsl.E4M3 }), 8, 8, 16, 1, "output type e4m3"},
		{bad(func(c *GemmSM90GroupedConfig) { c.In = dsl.E4M3 }), 8, 1 << 24, 16, 256, "groups*N"},
		{bad(func(c *GemmSM90GroupedConfig) { c.BandM = -1 }), 8, 8, 16, 1, "BandM -1"},
		{bad(func(c *GemmSM90GroupedConfig) { c.BandM = 65 }), 8, 8, 16, 1, "BandM 65"},
		{bad(func(c *GemmSM90GroupedConfig) { c.TMAStore, c.Stages = true, 4 }), 8, 8, 16, 1, "65536 bytes of epilogue tile"},
		{bad(func(c *GemmSM90GroupedConfig) { c.ClusterM = 2 }), 8, 8, 16, 1, "ClusterM"},
		{bad(func(c *GemmSM90GroupedConfig) { c.PingPong = true }), 8, 8, 16, 1, "PingPong: the grouped gemm runs the cooperative schedule"},
		{bad(func(c *GemmSM90GroupedConfig) { c.Epilogue = Epilogue{Bias: true} }), 8, 8, 16, 1, "Epilogue"},
		{bad(func(c *GemmSM90GroupedConfig) { c.BN = 96 }), 8, 8, 16, 1, "BN 96"},
		{def, 8, 8, 16, 0, "0 groups"},
		{def, 8, 8, 16, GemmSM90MaxGroups + 1, "groups (want 1..256)"},
		{def, -1, 8, 16, 1, "rows must be >= 0"},
		{def, 8, 12, 16, 1, "multiples of 8"},
		{def, 8, 8, 1 << 24, 256, "groups*K"},
	} {
		err := tc.cfg.CheckShape(tc.m, tc.n, tc.k, tc.g)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckShape(%d, %d, %d, %d) of %s: %v; want an error containing %q", tc.m, tc.n, tc.k, tc.g, tc.cfg.Name(), err, tc.want)
		}
	}
	if g := def.Grid(4096, 4096, 8, 132); g != 132 {
		t.Errorf("Grid(4096, 4096, 8, 132) = %d, want 132", g)
	}
	if g := def.Grid(0, 256, 2, 132); g != 2 {
		t.Errorf("Grid(0, 256, 2, 132) = %d, want 2 (one partial tile per group)", g)
	}
	l, err := def.Launch(300, 256, 128, 4, 132)
	if err != nil {
		t.Fatal(err)
	}
	if l.B.Dims != [2]uint64{256, 512} || l.A.Dims != [2]uint64{128, 300} || l.HasD || l.Cluster != 1 {
		t.Errorf("Launch: %+v", l)
	}
	st := def
	st.TMAStore = true
	if err := st.Check(); err != nil {
		t.Fatalf("128x256 3s with the TMA store: %v", err)
	}
	l, err = st.Launch(300, 256, 128, 4, 132)
	if err != nil || !l.HasD || l.D.Dims != [2]uint64{256, 300} || l.D.Box != [2]uint32{64, 64} || l.D.Elem != dsl.BF16 || l.SharedBytes != st.SharedBytes() {
		t.Errorf("TMA-store Launch: %+v, %v; want D's map (N, M) = (256, 300), box (64, 64)", l, err)
	}
	if n := st.Name(); n != "gemm_sm90_grouped_bf16_bf16_128x256x64_3s_tmastore" {
		t.Errorf("Name: %s", n)
	}
}

// TestGemmSM90GroupedFor: large expert batches get the 128x256 tile, a few rows per expert
// a smaller one; every pick passes Check; bad input is an error.
func TestGemmSM90GroupedFor(t *testing.T) {
	big, err := GemmSM90GroupedFor(dsl.BF16, dsl.BF16, 8*4096, 4096, 7168, 8, 132)
	if err != nil {
		t.Fatal(err)
	}
	if big.BM() != 128 || big.BN != 256 || !big.TMAStore || big.BandM != 16 || big.Stages != 3 {
		t.Errorf("8 x 4096 rows: %s, want 128x256 3s with the TMA store, bands of 16", big.Name())
	}
	down, err := GemmSM90GroupedFor(dsl.BF16, dsl.BF16, 8*4096, 7168, 2048, 8, 132)
	if err != nil || down.BM() != 128 || down.BN != 256 || !down.TMAStore {
		t.Errorf("the down projection (K 2048 -> N 7168): %s, %v; want 128x256 with the TMA store", down.Name(), err)
	}
	small, err := GemmSM90GroupedFor(dsl.BF16, dsl.BF16, 64, 4096, 7168, 8, 132)
	if err != nil {
		t.Fatal(err)
	}
	if small.BM()*small.BN >= 128*256 {
		t.Errorf("64 rows in 8 groups: %s, want a smaller tile", small.Name())
	}
	for _, c := range []GemmSM90GroupedConfig{big, small} {
		if err := c.Check(); err != nil {
			t.Errorf("%s: %v", c.Name(), err)
		}
	}
	if _, err := GemmSM90GroupedFor(dsl.BF16, dsl.BF16, 64, 4096, 7168, 8, 0); err == nil {
		t.Error("0 multiprocessors: no error")
	}
	if _, err := GemmSM90GroupedFor(dsl.E4M3, dsl.E4M3, 64, 4096, 7168, 8, 132); err == nil || !strings.Contains(err.Error(), "output type") {
		t.Errorf("e4m3 -> e4m3: %v, want the output type refused", err)
	}
	f8, err := GemmSM90GroupedFor(dsl.E4M3, dsl.BF16, 8*4096, 4096, 7168, 8, 132)
	if err != nil || f8.BK() != 128 {
		t.Errorf("e4m3: %s, %v", f8.Name(), err)
	}
	l8, err := DefaultGemmSM90GroupedConfig(dsl.E4M3).Launch(300, 256, 128, 4, 132)
	if err != nil || l8.B.Dims != [2]uint64{128, 1024} || l8.B.Box != [2]uint32{128, 256} {
		t.Errorf("e4m3 Launch: %+v, %v; want B's map (K, groups*N) = (128, 1024), box (128, 256)", l8, err)
	}
}

// atoiOr is s as an int, or a large number when it is not one (a spill count ptxas printed
// oddly fails the test).
func atoiOr(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 1 << 30
	}
	return n
}
