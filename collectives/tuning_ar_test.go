package collectives

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestAROverlapChoice holds MatmulAllReduce's round counts against what 4 and 2 x H100
// measured (bf16, docs/bench.md "gemm_ar on the copy engines"): the most rounds whose GEMM
// pieces keep a wave of 128 x 256 tiles, split where even one round's pieces do not, and 1
// round under MatmulOverlap there.
func TestAROverlapChoice(t *testing.T) {
	for _, c := range []struct {
		g       int
		s       MatmulShape
		force   bool
		want    int
		measure string
	}{
		{4, MatmulShape{M: 4096, N: 8192, K: 7168}, false, 2, "2 rounds 879-945 us, 4 rounds 1084-1199"},
		{4, MatmulShape{M: 8192, N: 4096, K: 14336}, false, 2, "2 rounds 1394-1435, 4 rounds 1539-1614"},
		{4, MatmulShape{M: 8192, N: 8192, K: 7168}, false, 4, "4 rounds 1650-1742, 2 rounds 1543-1663, split 1864-1909"},
		{4, MatmulShape{M: 16384, N: 8192, K: 7168}, false, 4, "4 rounds 2970-3122, 2 rounds 3028-3120"},
		{4, MatmulShape{M: 4096, N: 4096, K: 4096}, false, 1, "1 round 368, split 372-390"},
		{4, MatmulShape{M: 1024, N: 8192, K: 7168}, false, 0, "pieces of 256 rows: half a wave"},
		{4, MatmulShape{M: 1024, N: 8192, K: 7168}, true, 1, "MatmulOverlap"},
		{2, MatmulShape{M: 4096, N: 4096, K: 4096}, false, 2, "2 rounds 311, 1 round 320, split 328"},
		{2, MatmulShape{M: 16384, N: 8192, K: 14336}, false, 4, "4 rounds 4995, 2 rounds 5054, split 5396-5472"},
		{4, MatmulShape{M: 4100, N: 8192, K: 7168}, false, 1, "M / 8 not whole: 1 round"},
		{1, MatmulShape{M: 4096, N: 8192, K: 7168}, true, 0, "one GPU: nothing to overlap"},
		{4, MatmulShape{M: 4098, N: 8192, K: 7168}, true, 0, "M not divisible by the GPUs"},
	} {
		if got := arOverlapRounds(c.g, 132, dsl.BF16, c.s, c.force); got != c.want {
			t.Errorf("%d GPUs %v force=%v: %d rounds, want %d (%s)", c.g, c.s, c.force, got, c.want, c.measure)
		}
	}
}
