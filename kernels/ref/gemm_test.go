package ref

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/emu"
	"github.com/kgen-dev/kgen/kernels"
	"github.com/kgen-dev/kgen/layout"
)

// smallGemm is a small tile configuration (4 warps, 64x32x32, 3 stages), so that the test
// shapes span several blocks and K tiles.
func smallGemm(in, out dsl.Type, a, b kernels.MatrixLayout, aligned bool) kernels.GemmConfig {
	return kernels.GemmConfig{In: in, Out: out, A: a, B: b, BM: 64, BN: 32, BK: 32, WarpsM: 2, WarpsN: 2, Stages: 3, Aligned: aligned}
}

var layouts = []kernels.MatrixLayout{kernels.RowMajor, kernels.ColMajor}

// TestGemmAllCombos runs every input type, output type and layout of A and B at the issue's
// shapes with edges and K tails everywhere (the general kernel: 1x1x1, 17x33x65,
// 257x129x300), and at multiples of 8 (the aligned, cp.async kernel: 72x40x48, 128x136x72).
func TestGemmAllCombos(t *testing.T) {
	for _, in := range []dsl.Type{dsl.F16, dsl.BF16} {
		for _, out := range []dsl.Type{dsl.F16, dsl.BF16, dsl.F32} {
			for _, a := range layouts {
				for _, b := range layouts {
					for _, s := range []struct {
						m, n, k int
						aligned bool
					}{{1, 1, 1, false}, {17, 33, 65, false}, {72, 40, 48, true}, {128, 136, 72, true}, {257, 129, 300, false}} {
						cfg := smallGemm(in, out, a, b, s.aligned)
						name := fmt.Sprintf("%s/%dx%dx%d", cfg.Name(), s.m, s.n, s.k)
						res, err := RunGemm(GemmProblem{Config: cfg, M: s.m, N: s.n, K: s.k, Alpha: 1.25, Beta: -0.75, Seed: int64(s.m)})
						if err != nil {
							t.Errorf("%s: %v", name, err)
							continue
						}
						if res.Checked != s.m*s.n {
							t.Errorf("%s: checked %d values, want %d", name, res.Checked, s.m*s.n)
						}
					}
				}
			}
		}
	}
}

// TestGemmShapes runs the issue's shapes with the library's tile configuration (128x128x64,
// 4 warps, 3 stages), a 128x256x32 one on 8 warps, and the small one, over a few type and
// layout combinations.
func TestGemmShapes(t *testing.T) {
	def := kernels.DefaultGemmConfig(dsl.BF16)
	unaligned := def
	unaligned.Aligned = false
	colA := smallGemm(dsl.F16, dsl.F32, kernels.ColMajor, kernels.ColMajor, false)
	wide := kernels.GemmConfig{In: dsl.F16, Out: dsl.BF16, A: kernels.ColMajor, B: kernels.RowMajor, BM: 128, BN: 256, BK: 32, WarpsM: 2, WarpsN: 4, Stages: 4}
	wideAligned := wide
	wideAligned.Aligned = true
	doubleBuffered := smallGemm(dsl.BF16, dsl.F32, kernels.ColMajor, kernels.RowMajor, false)
	doubleBuffered.DoubleBuffer, doubleBuffered.IssueAfter, doubleBuffered.BK = true, 1, 64
	doubleBufferedAligned := kernels.DefaultGemmConfig(dsl.F16)
	doubleBufferedAligned.DoubleBuffer = true
	issueLate := kernels.DefaultGemmConfig(dsl.BF16)
	issueLate.IssueAfter = 4
	threeBlocks := kernels.DefaultGemmConfig(dsl.BF16)
	threeBlocks.BK, threeBlocks.Stages, threeBlocks.MinBlocks = 32, 4, 3
	for _, c := range []struct {
		cfg     kernels.GemmConfig
		m, n, k int
	}{
		{unaligned, 1, 1, 1},
		{unaligned, 17, 33, 65},
		{def, 128, 136, 72},
		{unaligned, 257, 129, 300},
		{colA, 128, 136, 72},
		{colA, 257, 129, 300},
		{smallGemm(dsl.BF16, dsl.BF16, kernels.RowMajor, kernels.ColMajor, true), 256, 136, 296},
		{wide, 257, 129, 300},
		{wideAligned, 256, 136, 296},
		{doubleBuffered, 257, 129, 300},
		{doubleBufferedAligned, 128, 136, 72},
		{issueLate, 256, 136, 296},
		{threeBlocks, 256, 136, 296},
	} {
		res, err := RunGemm(GemmProblem{Config: c.cfg, M: c.m, N: c.n, K: c.k, Alpha: 1.5, Beta: 0.5, Seed: 3})
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		t.Log(res)
	}
}

// TestGemmBetaZero runs the beta = 0 path with C a null pointer: the epilogue branches
// around C's load at run time, so any read of C would fault. Edges in M and N (and a K
// tail) on the general kernel, a partial tile on the aligned one, and the registry's tiles.
func TestGemmBetaZero(t *testing.T) {
	for _, c := range []struct {
		cfg     kernels.GemmConfig
		m, n, k int
	}{
		{smallGemm(dsl.BF16, dsl.F32, kernels.RowMajor, kernels.RowMajor, false), 33, 17, 40},
		{smallGemm(dsl.F16, dsl.F16, kernels.ColMajor, kernels.RowMajor, true), 72, 40, 48},
		{kernels.DefaultGemmConfig(dsl.BF16), 136, 24, 72},
	} {
		if _, err := RunGemm(GemmProblem{Config: c.cfg, M: c.m, N: c.n, K: c.k, Alpha: 2, Beta: 0, NullC: true}); err != nil {
			t.Fatal(err)
		}
	}
	// The same with beta != 0 reads C: the null pointer faults, so the test above can fail.
	_, err := RunGemm(GemmProblem{Config: smallGemm(dsl.BF16, dsl.F32, kernels.RowMajor, kernels.RowMajor, false), M: 33, N: 17, K: 40, Alpha: 2, Beta: 1, NullC: true})
	if err == nil {
		t.Fatal("beta = 1 with a null C ran without a fault")
	}
	t.Log(err)
	// Nor does beta = 0 read anything in C's place (D, as an epilogue that selected beta*C
	// away did): the blend's loads, conversions and FMAs are skipped, so fewer instructions
	// run than with beta != 0 on the same problem (a select would run as many).
	var zero, nonzero emu.Stats
	cfg := kernels.DefaultGemmConfig(dsl.BF16)
	for _, r := range []struct {
		beta float64
		s    *emu.Stats
	}{{0, &zero}, {0.5, &nonzero}} {
		if _, err := RunGemm(GemmProblem{Config: cfg, M: 128, N: 128, K: 64, Alpha: 1, Beta: r.beta, Stats: r.s}); err != nil {
			t.Fatal(err)
		}
	}
	// Each thread blends 16 runs of 8 elements: a load, 8 conversions and 8 FMAs at least.
	if min := nonzero.ThreadInstructions - 128*16*17; zero.ThreadInstructions > min {
		t.Fatalf("beta = 0 ran %d thread instructions, beta = 0.5 %d: want at most %d", zero.ThreadInstructions, nonzero.ThreadInstructions, min)
	}
}

// TestGemmWrongCLayout swaps two values of the accumulator fragment's layout: the kernel
// still builds (nothing checks C against the instruction) and must fail the reference.
func TestGemmWrongCLayout(t *testing.T) {
	atom := dsl.MMA_16x8x16_F32BF16BF16F32
	atom.CLayout = layout.MustParse("((4,8),(2,2)):((32,1),(8,16))") // c1 and c2 swapped
	cfg := smallGemm(dsl.BF16, dsl.F32, kernels.RowMajor, kernels.RowMajor, true)
	cfg.Atom = &atom
	_, err := RunGemm(GemmProblem{Config: cfg, M: 64, N: 32, K: 32, Alpha: 1, Beta: 0})
	if err == nil || !strings.Contains(err.Error(), "values differ") {
		t.Fatalf("a gemm with a wrong C fragment layout matched the reference (err %v)", err)
	}
	t.Log(err)
}

func TestGemmRegistryRun(t *testing.T) {
	for _, dt := range []dsl.Type{dsl.F16, dsl.BF16} {
		res, err := Run(Problem{Kernel: "gemm", DType: dt, Size: 24 * 24 * 24})
		if err != nil {
			t.Fatal(err)
		}
		if res.Checked == 0 {
			t.Fatalf("%v: nothing checked", res)
		}
	}
}

// TestGemmHarnessRefusesShapes: every emulator gemm harness (RunGemm, RunGemmSM90, RunFused,
// RunFusedSM90) names the shape it refuses, empty or past its limits, before it allocates
// anything (2^20 x 2^20 would take 8 TiB of float64 references).
func TestGemmHarnessRefusesShapes(t *testing.T) {
	mma := kernels.DefaultGemmConfig(dsl.F16)
	sm90 := kernels.DefaultGemmSM90Config(dsl.BF16)
	fused := kernels.DefaultFusedConfig(dsl.F16)
	for _, c := range []struct {
		name string
		run  func() (Result, error)
		want string
	}{
		{"RunGemm M=0", func() (Result, error) { return RunGemm(GemmProblem{Config: mma, M: 0, N: 64, K: 64}) }, "shape 0x64x64: every extent must be positive"},
		{"RunGemm 2^20", func() (Result, error) { return RunGemm(GemmProblem{Config: mma, M: 1 << 20, N: 1 << 20, K: 64}) }, "MaxEmuElements"},
		{"RunGemm A 2^31", func() (Result, error) { return RunGemm(GemmProblem{Config: mma, M: 1 << 20, N: 8, K: 1 << 11}) }, "fewer than 2^31"},
		{"RunGemmSM90 M=0", func() (Result, error) { return RunGemmSM90(GemmSM90Problem{Config: sm90, M: 0, N: 64, K: 64}) }, "every extent must be positive"},
		{"RunGemmSM90 2^20", func() (Result, error) {
			return RunGemmSM90(GemmSM90Problem{Config: sm90, M: 1 << 20, N: 1 << 20, K: 64})
		}, "MaxEmuElements"},
		{"RunFused 2^20", func() (Result, error) {
			return RunFused(FusedProblem{Family: kernels.FamilyGemmRS, Config: fused, GPUs: 2, M: 1 << 20, N: 1 << 20, K: 64})
		}, "2^31"},
		{"RunFused M=0", func() (Result, error) {
			return RunFused(FusedProblem{Family: kernels.FamilyGemmRS, Config: fused, GPUs: 2, M: 0, N: 64, K: 64})
		}, "must be positive"},
		{"RunFusedSM90 2^20", func() (Result, error) {
			return RunFusedSM90(FusedSM90Problem{Family: kernels.FamilyGemmRSSM90, Config: sm90, GPUs: 2, M: 1 << 12, N: 1 << 12, K: 64})
		}, "MaxEmuElements"},
	} {
		_, err := c.run()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one naming %q", c.name, err, c.want)
		}
	}
}
