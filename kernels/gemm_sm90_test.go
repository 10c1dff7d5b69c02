package kernels

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/internal/tooltest"
	"github.com/kgen-dev/kgen/ptx"
)

// TestGemmSM90AccCoord: the epilogue's fragment formula is the GMMA atom's D layout for
// every thread and value.
func TestGemmSM90AccCoord(t *testing.T) {
	for _, n := range []int{64, 128, 256} {
		atom, err := dsl.MakeGMMAAtom(dsl.BF16, n)
		if err != nil {
			t.Fatal(err)
		}
		for th := 0; th < 128; th++ {
			for i := 0; i < atom.AccRegs(); i++ {
				r, c := GemmSM90AccCoord(th, i)
				if wr, wc := atom.Coord(th, i); r != wr || c != wc {
					t.Fatalf("N=%d thread %d value %d: (%d, %d), the atom says (%d, %d)", n, th, i, r, c, wr, wc)
				}
			}
		}
	}
}

// TestGemmSM90Misuse: bad configurations and targets are Build errors naming the problem.
func TestGemmSM90Misuse(t *testing.T) {
	for _, c := range []struct {
		cfg    GemmSM90Config
		target ptx.Target
		want   string
	}{
		{GemmSM90Config{In: dsl.F32, Out: dsl.F32, BN: 128, Consumers: 2, Stages: 4}, ptx.SM90a, "input type f32"},
		{GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 96, Consumers: 2, Stages: 4}, ptx.SM90a, "BN 96"},
		{GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 256, Consumers: 2, Stages: 6}, ptx.SM90a, "shared memory"},
		{DefaultGemmSM90Config(dsl.BF16), ptx.SM90, "sm_90a"},
	} {
		k := dsl.New("g", dsl.WithTarget(c.target))
		GemmSM90(k, c.cfg)
		if _, err := k.Build(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v on %s: err %v, want one naming %q", c.cfg, c.target, err, c.want)
		}
	}
}

var spillRE = regexp.MustCompile(`(\d+) bytes spill stores, (\d+) bytes spill loads`)

// usedRE matches ptxas -v's register line.
var usedRE = regexp.MustCompile(`Used \d+ registers[^\n]*`)

// TestGemmSM90Ptxas assembles every configuration GemmSM90For can pick (bf16 -> bf16, f16
// -> f32, e4m3 -> bf16) with ptxas -v: no spills, and no performance warning (setmaxnreg
// ignored, a warpgroup.wait injected before a wgmma result is read).
func TestGemmSM90Ptxas(t *testing.T) {
	cfgs := append(GemmSM90Candidates(dsl.BF16, dsl.BF16), GemmSM90Candidates(dsl.F16, dsl.F32)...)
	gemmSM90Ptxas(t, append(cfgs, GemmSM90Candidates(dsl.E4M3, dsl.BF16)...))
}

// TestGemmSM90OptionsPtxas assembles the cluster and TMA-store options (alone and together)
// of the large-tile configurations, as TestGemmSM90Ptxas does the candidates.
func TestGemmSM90OptionsPtxas(t *testing.T) {
	var cfgs []GemmSM90Config
	for _, base := range []GemmSM90Config{DefaultGemmSM90Config(dsl.BF16), DefaultGemmSM90Config(dsl.E4M3),
		{In: dsl.BF16, Out: dsl.BF16, BN: 128, Consumers: 2, Stages: 5}, {In: dsl.BF16, Out: dsl.F32, BN: 64, Consumers: 1, Stages: 4}} {
		for _, o := range [][2]int{{2, 0}, {0, 1}, {2, 1}} {
			c := base
			c.ClusterM, c.TMAStore = o[0], o[1] == 1
			cfgs = append(cfgs, c)
		}
	}
	gemmSM90Ptxas(t, cfgs)
}

func gemmSM90Ptxas(t *testing.T, cfgs []GemmSM90Config) {
	ptxas := tooltest.Ptxas(t)
	for _, cfg := range cfgs {
		k := dsl.New(cfg.Name(), dsl.WithTarget(ptx.SM90a))
		GemmSM90(k, cfg)
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
		for _, w := range []string{"C7508", "C7509", "C7517", "C7510", "Potential Performance Loss"} { // setmaxnreg ignored, waits injected, ...
			if strings.Contains(string(out), w) {
				t.Errorf("%s: ptxas warns: %s", cfg.Name(), out)
				break
			}
		}
		s := spillRE.FindStringSubmatch(string(out))
		if s == nil {
			t.Fatalf("%s: no spill counts in ptxas -v: %s", cfg.Name(), out)
		}
		if s[1] != "0" || s[2] != "0" {
			t.Errorf("%s spills: %s", cfg.Name(), s[0])
		}
		t.Logf("%s: %s", cfg.Name(), strings.TrimSpace(regexp.MustCompile(`Used \d+ registers[^\n]*`).FindString(string(out))))
	}
}

// BenchmarkGemmSM90Build builds and prints the default sm_90a gemm (issue 15: under 5 ms).
func BenchmarkGemmSM90Build(b *testing.B) {
	for b.Loop() {
		k := dsl.New("g", dsl.WithTarget(ptx.SM90a))
		GemmSM90(k, DefaultGemmSM90Config(dsl.BF16))
		m, err := k.Build()
		if err != nil {
			b.Fatal(err)
		}
		_ = m.String()
	}
}

// BenchmarkGemmSM90BuildOptions builds and prints GemmSM90For's large-problem pick (the
// 128x256 tile with the TMA-store epilogue) and the same with clusters of 2.
func BenchmarkGemmSM90BuildOptions(b *testing.B) {
	pick, err := GemmSM90For(dsl.BF16, dsl.BF16, 8192, 8192, 8192, 132)
	if err != nil {
		b.Fatal(err)
	}
	cl := pick
	cl.ClusterM = 2
	for _, cfg := range []GemmSM90Config{pick, cl} {
		b.Run(cfg.Name(), func(b *testing.B) {
			for b.Loop() {
				k := dsl.New("g", dsl.WithTarget(ptx.SM90a))
				GemmSM90(k, cfg)
				m, err := k.Build()
				if err != nil {
					b.Fatal(err)
				}
				_ = m.String()
			}
		})
	}
}

// TestGemmSM90For: the heuristic's picks for the shapes on 132 SMs (each the best or
// within 0.1% of the best measured on an H100, docs/bench.md), and every pick is a
// configuration that builds.
func TestGemmSM90For(t *testing.T) {
	for _, c := range []struct {
		m, n, k int
		want    string
	}{
		{8192, 8192, 8192, "128x256"},
		{8192, 4096, 4096, "128x256"},
		{1024, 14336, 4096, "128x256"},
		{128, 4096, 4096, "64x64"},
		{128, 4096, 14336, "64x64"},
		{128, 14336, 4096, "128x128"},
	} {
		cfg, err := GemmSM90For(dsl.BF16, dsl.BF16, c.m, c.n, c.k, 132)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%dx%d", cfg.BM(), cfg.BN); got != c.want {
			t.Errorf("%dx%dx%d: %s (%s), want %s", c.m, c.n, c.k, got, cfg.Name(), c.want)
		}
		// The TMA-store epilogue measured faster on 128x256 tiles only (docs/bench.md).
		if cfg.TMAStore != (c.want == "128x256") || cfg.Cluster() != 1 {
			t.Errorf("%dx%dx%d: %s: TMA store %v, cluster %d; want the TMA store on 128x256 tiles only, no clusters", c.m, c.n, c.k, cfg.Name(), cfg.TMAStore, cfg.Cluster())
		}
	}
	for _, m := range []int{1, 64, 128, 200, 1024, 8192} {
		for _, nk := range [][2]int{{8, 16}, {4096, 4096}, {14336, 4096}, {4096, 14336}} {
			cfg, err := GemmSM90For(dsl.BF16, dsl.F32, m, nk[0], nk[1], 132)
			if err == nil {
				err = cfg.Check()
			}
			if err != nil {
				t.Errorf("%dx%dx%d: %v", m, nk[0], nk[1], err)
			}
			t.Logf("%dx%dx%d: %s, %d tiles", m, nk[0], nk[1], cfg.Name(), cfg.Tiles(m, nk[0]))
		}
	}
}

// TestFusedSM90Ptxas assembles the sm_90a fused kernels (the default configuration and
// gpubench's 128x128x64, 4 stages) with ptxas -v: no spills and no performance warning, as
// TestGemmSM90Ptxas asks of gemm_sm90. It logs each kernel's registers.
func TestFusedSM90Ptxas(t *testing.T) {
	ptxas := tooltest.Ptxas(t)
	cfgs := []GemmSM90Config{DefaultGemmSM90Config(dsl.BF16), {In: dsl.BF16, Out: dsl.BF16, BN: 128, Consumers: 2, Stages: 4}}
	for _, f := range []Family{FamilyAGGemmSM90, FamilyGemmRSSM90, FamilyGemmARSM90, FamilyGemmARMCSM90} {
		for _, cfg := range cfgs {
			name := FusedSM90Name(f, cfg)
			file := filepath.Join(t.TempDir(), "f.ptx")
			if err := os.WriteFile(file, []byte(fusedSM90PTX(t, f, cfg)), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(ptxas, "-arch=sm_90a", "-v", file, "-o", file+".cubin").CombinedOutput()
			if err != nil {
				t.Fatalf("%s: ptxas: %v: %s", name, err, out)
			}
			if strings.Contains(string(out), "warning") {
				t.Errorf("%s: ptxas warns: %s", name, out)
			}
			s := spillRE.FindStringSubmatch(string(out))
			if s == nil || s[1] != "0" || s[2] != "0" {
				t.Errorf("%s: spills or no spill counts: %s", name, out)
			}
			t.Logf("%s: %s", name, usedRE.FindString(string(out)))
		}
	}
}

// TestFusedSM90Misuse: a bad configuration or a target without wgmma is a Build error that
// names the kernel and the problem; an unknown family is an error.
func TestFusedSM90Misuse(t *testing.T) {
	for _, f := range []Family{FamilyAGGemmSM90, FamilyGemmRSSM90, FamilyGemmARSM90, FamilyGemmARMCSM90} {
		for _, c := range []struct {
			cfg    GemmSM90Config
			target ptx.Target
			want   string
		}{
			{GemmSM90Config{In: dsl.BF16, Out: dsl.BF16, BN: 96, Consumers: 2, Stages: 4}, ptx.SM90a, "BN 96"},
			{DefaultGemmSM90Config(dsl.BF16), ptx.SM90, "sm_90a"},
		} {
			k := dsl.New("f", dsl.WithTarget(c.target))
			if err := fusedSM90Build(k, f, c.cfg); err != nil {
				t.Fatal(err)
			}
			_, err := k.Build()
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), strings.TrimSuffix(string(f), "_sm90")) {
				t.Errorf("%s %+v on %s: err %v, want one naming the kernel and %q", f, c.cfg, c.target, err, c.want)
			}
		}
	}
	if err := fusedSM90Build(dsl.New("f", dsl.WithTarget(ptx.SM90a)), FamilyAGGemm, DefaultGemmSM90Config(dsl.BF16)); err == nil {
		t.Error("fusedSM90Build took the sm_80 family ag_gemm")
	}
}

// TestGemmSM90SharedCountsBarriers: a configuration whose dynamic shared memory alone is
// exactly 227 KiB (f32 out, 128x256, 2 stages, TMA store, bias) but whose static mbarriers
// push the block past it is refused by Check naming the barriers, not left to fail at
// launch; one stage of 64-wide tiles less fits.
func TestGemmSM90SharedCountsBarriers(t *testing.T) {
	c := GemmSM90Config{In: dsl.BF16, Out: dsl.F32, BN: 256, Consumers: 2, Stages: 2, TMAStore: true, Epilogue: Epilogue{Bias: true}}
	if c.SharedBytes() != gemmSM90MaxShared {
		t.Fatalf("the case's dynamic bytes are %d; it probes the barriers only at exactly %d", c.SharedBytes(), gemmSM90MaxShared)
	}
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "32 of barriers") {
		t.Fatalf("Check = %v; want a refusal naming the 32 bytes of barriers", err)
	}
	c.Epilogue = Epilogue{}
	if err := c.Check(); err != nil {
		t.Fatalf("without the bias's staged vector the block fits, but Check = %v", err)
	}
}

// TestGemmSM90WithEpilogue: the library's epilogue variant of GemmSM90For's pick takes the
// TMA store on 64 x 64 tiles (16-bit output) and leaves every other pick's store alone.
func TestGemmSM90WithEpilogue(t *testing.T) {
	e := Epilogue{Bias: true, Act: SiLU}
	small, err := GemmSM90For(dsl.BF16, dsl.BF16, 128, 4096, 4096, 132)
	if err != nil {
		t.Fatal(err)
	}
	if small.BN != 64 || small.TMAStore {
		t.Fatalf("128x4096x4096 pick %s: want 64x64 tiles with the register store", small.Name())
	}
	if c := small.WithEpilogue(e); !c.TMAStore || c.Epilogue != e || c.Check() != nil {
		t.Errorf("64x64 with bias+SiLU: %s (%v); want the TMA store", c.Name(), c.Check())
	}
	if c := small.WithEpilogue(Epilogue{}); c.TMAStore {
		t.Errorf("64x64 without an epilogue: %s; want the pick's register store", c.Name())
	}
	f32 := small
	f32.Out = dsl.F32
	if c := f32.WithEpilogue(e); c.TMAStore {
		t.Errorf("64x64 to f32: %s; want the register store", c.Name())
	}
	for _, shape := range [][3]int{{8192, 4096, 4096}, {128, 14336, 4096}} {
		c, err := GemmSM90For(dsl.BF16, dsl.BF16, shape[0], shape[1], shape[2], 132)
		if err != nil {
			t.Fatal(err)
		}
		if w := c.WithEpilogue(e); w.TMAStore != c.TMAStore || w.Stages != c.Stages || w.BN != c.BN {
			t.Errorf("%v: %s became %s; want only the epilogue added", shape, c.Name(), w.Name())
		}
	}
}

// TestShiftDivisionConfigs builds gemm_sm90, attention_sm90 and the decode kernel with and without
// ShiftDivision: the option must be in the name (a variant of its own) and take the
// divisions by powers of two out of the PTX.
func TestShiftDivisionConfigs(t *testing.T) {
	divPow2 := regexp.MustCompile(`(div|rem)\.u32 [^,]+, [^,]+, (2|4|8|16|32|64|128|256);`)
	for _, c := range []struct {
		name  string
		build func(k *dsl.Kernel, on bool) string
	}{
		{"gemm_sm90", func(k *dsl.Kernel, on bool) string {
			cfg := DefaultGemmSM90Config(dsl.BF16)
			cfg.ShiftDivision = on
			GemmSM90(k, cfg)
			return cfg.Name()
		}},
		{"attention_decode", func(k *dsl.Kernel, on bool) string {
			cfg := DefaultAttentionDecodeConfig(dsl.BF16, 128, 16, 8)
			cfg.ShiftDivision = on
			AttentionDecode(k, cfg)
			return cfg.Name()
		}},
		{"attention_sm90", func(k *dsl.Kernel, on bool) string {
			cfg := DefaultAttentionSM90Config(dsl.BF16, 64, true)
			cfg.ShiftDivision = on
			AttentionSM90(k, cfg)
			return cfg.Name()
		}},
	} {
		var names [2]string
		var divs [2]int
		for i, on := range []bool{false, true} {
			k := dsl.New("k", dsl.WithTarget(ptx.SM90a))
			names[i] = c.build(k, on)
			m, err := k.Build()
			if err != nil {
				t.Fatalf("%s ShiftDivision %v: %v", c.name, on, err)
			}
			divs[i] = len(divPow2.FindAllString(m.String(), -1))
		}
		if names[0] == names[1] || !strings.HasSuffix(names[1], "_sdiv") {
			t.Errorf("%s: names %q and %q: want the option's own suffix", c.name, names[0], names[1])
		}
		if divs[0] == 0 || divs[1] != 0 {
			t.Errorf("%s: div/rem by powers of two: %d without the option, %d with it; want some, then none", c.name, divs[0], divs[1])
		}
	}
}
