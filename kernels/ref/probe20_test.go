package ref

import (
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// TestProbe20ProblemNumbers: the harnesses took numbers besides the shape that they could
// not check. FusedProblem.Launches -1 ran no launch and passed having checked 0 elements; a
// DecodeProblem.BadPage of -1 or math.MaxInt put a page id in range (numPages-2, or the
// int32 of an overflowed sum) and the run passed where the sanitizer was to report it;
// Splits -3 ran one split; a NaN Scale or Alpha failed with "= NaN, want NaN"; a negative
// Scale failed on NaN outputs; a context length of math.MaxInt overflowed the page count
// and was reported as "pages -576460752303423484"; a batch of 2000 lengths was quoted whole
// in every message; Problem.Nodes and Grid below 0 were taken as their defaults. Probe 20.
func TestProbe20ProblemNumbers(t *testing.T) {
	dec := func(mod func(p *DecodeProblem)) func() (Result, error) {
		return func() (Result, error) {
			p := DecodeProblem{Config: kernels.DefaultAttentionDecodeConfig(dsl.F16, 64, 16, 4), Batch: 1, QLen: 1, Heads: 4, KVHeads: 1, SeqLens: []int{20}}
			mod(&p)
			return RunAttentionDecode(p)
		}
	}
	for _, c := range []struct {
		name string
		run  func() (Result, error)
		want string
	}{
		{"Launches -1", func() (Result, error) {
			return RunFused(FusedProblem{Family: kernels.FamilyGemmRS, Config: kernels.DefaultFusedConfig(dsl.F16), GPUs: 2, M: 18, N: 16, K: 24, Launches: -1})
		}, "Launches -1 is negative (0 means 2 launches)"},
		{"BadPage -1", dec(func(p *DecodeProblem) { p.BadPage = -1 }), "BadPage -1 is negative (0 means no bad page)"},
		{"BadPage MaxInt", dec(func(p *DecodeProblem) { p.BadPage = math.MaxInt }), "is past 2^31-1 (block-table ids are s32)"},
		{"Splits -3", dec(func(p *DecodeProblem) { p.Splits = -3 }), "Splits -3 is negative (0 means 1 split)"},
		{"decode Scale NaN", dec(func(p *DecodeProblem) { p.Scale = math.NaN() }), "Scale NaN: want a finite value"},
		{"decode Scale -1", dec(func(p *DecodeProblem) { p.Scale = -1 }), "Scale -1: want a positive scale"},
		{"context MaxInt", dec(func(p *DecodeProblem) { p.SeqLens = []int{math.MaxInt} }), "context length 9223372036854775807: want 0 to 2^31-1"},
		{"2000 lengths", dec(func(p *DecodeProblem) { p.SeqLens = make([]int, 2000) }), "ctx[0 0 0 0 0 0 0 0] ... (2000 lengths)"},
		{"attention Scale -1", func() (Result, error) {
			return RunAttention(AttentionProblem{Config: kernels.DefaultAttentionConfig(dsl.F16, 64, true), Batch: 1, Heads: 1, KVHeads: 1, SeqQ: 8, SeqK: 8, Scale: -1})
		}, "Scale -1: want a positive scale"},
		{"gemm Alpha NaN", func() (Result, error) {
			return RunGemm(GemmProblem{Config: kernels.DefaultGemmConfig(dsl.F16), M: 16, N: 16, K: 16, Alpha: math.NaN(), Beta: 1})
		}, "Alpha NaN: want a finite value"},
		{"gemm Beta 1e39", func() (Result, error) {
			return RunGemm(GemmProblem{Config: kernels.DefaultGemmConfig(dsl.F16), M: 16, N: 16, K: 16, Alpha: 1, Beta: 1e39})
		}, "Beta 1e+39: want a finite value within float32's range"},
		{"Nodes -2", func() (Result, error) { return Run(Problem{Kernel: "p2p_allreduce_1shot_sum", Ranks: 2, Nodes: -2}) }, "Problem.Nodes -2 is negative"},
		{"Grid -1", func() (Result, error) { return Run(Problem{Kernel: "vector_add", Grid: -1}) }, "Problem.Grid -1 is negative"},
	} {
		_, err := c.run()
		if err == nil || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 400 {
			t.Errorf("%s: %v; want a short error holding %q", c.name, err, c.want)
		}
	}
}
