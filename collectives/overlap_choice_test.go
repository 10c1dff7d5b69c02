package collectives

import (
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestAGOverlapChoice checks MatmulAuto's estimate against the shapes measured on 2 and 4 x
// H100 (132 SMs, bf16; docs/bench.md) where one design was clearly faster (by more than
// 3%): copy-engine overlap or split.
func TestAGOverlapChoice(t *testing.T) {
	for _, c := range []struct {
		g       int
		m, n, k int
		overlap bool // the faster design measured
	}{
		{4, 8192, 4096, 14336, true},  // 1265.8 vs 1692.7 us
		{4, 4096, 14336, 8192, false}, // 1422.7 vs 1304.8
		{4, 8192, 8192, 7168, true},   // 1348.1 vs 1423.0
		{4, 4096, 8192, 7168, true},   // 695.6 vs 734.8
		{4, 8192, 8192, 8192, true},   // 1488.4 vs 1626.1
		{2, 8192, 4096, 14336, true},  // 1200.8 vs 1518.5
		{2, 4096, 4096, 4096, true},   // 234.1 vs 264.4
		{2, 8192, 8192, 7168, true},   // 1258.7 vs 1356.1
		{2, 8192, 8192, 8192, true},   // 1425.0 vs 1526.8
		{4, 1024, 14336, 8192, false}, // 433.1-442.1 vs 407.7 (Llama-3-70B TP=4 up/gate)
		{4, 16384, 14336, 8192, true}, // 4577.9-4656.4 vs 5270.2
	} {
		got := agOverlapWins(c.g, 132, dsl.BF16, dsl.BF16, MatmulShape{M: c.m, N: c.n, K: c.k})
		if got != c.overlap {
			t.Errorf("%d GPUs %dx%dx%d: overlap %v, measured faster: overlap %v", c.g, c.m, c.n, c.k, got, c.overlap)
		}
	}
}

// TestRSOverlapChoice checks the reduce-scatter's estimate against the shapes measured on 4
// x H100 (132 SMs, bf16, Llama-3-70B TP=4 down projection; docs/bench.md): copy-engine
// overlap or split, the faster by more than 3%.
func TestRSOverlapChoice(t *testing.T) {
	for _, c := range []struct {
		g       int
		m, n, k int
		overlap bool
	}{
		{4, 1024, 8192, 7168, false}, // 247.4 vs 213.8-219.7
		{4, 16384, 8192, 7168, true}, // 2528.9-2554.8 vs 3030.0
	} {
		got := rsOverlapWins(c.g, 132, dsl.BF16, dsl.BF16, MatmulShape{M: c.m, N: c.n, K: c.k})
		if got != c.overlap {
			t.Errorf("%d GPUs %dx%dx%d: overlap %v, measured faster: overlap %v", c.g, c.m, c.n, c.k, got, c.overlap)
		}
	}
}

// TestOverlapChoiceDegenerate: no GPU count, SM count or shape that cannot overlap makes
// the estimates pick the overlap (or divide by zero).
func TestOverlapChoiceDegenerate(t *testing.T) {
	for _, c := range []struct{ g, sms, m, n, k int }{
		{0, 132, 1024, 14336, 8192}, {-1, 132, 1024, 14336, 8192}, {1, 132, 8192, 8192, 8192},
		{4, 0, 8192, 8192, 8192}, {2, -1, 8192, 8192, 8192}, {4, 132, 0, 8192, 8192},
		{4, 132, 3, 8192, 8192}, {4, 132, 8192, 0, 8192}, {4, 132, 8192, 8192, -8},
	} {
		s := MatmulShape{M: c.m, N: c.n, K: c.k}
		if agOverlapWins(c.g, c.sms, dsl.BF16, dsl.BF16, s) || rsOverlapWins(c.g, c.sms, dsl.BF16, dsl.BF16, s) {
			t.Errorf("%d GPUs of %d SMs, %dx%dx%d: overlap chosen", c.g, c.sms, c.m, c.n, c.k)
		}
	}
}

// TestRSSignalsChoice checks the choice between MatmulReduceScatter's piece launches and
// one piece-signalling GEMM against the shapes measured on 4 x H200 (132 SMs, bf16, same
// call; docs/bench.md), and that New refuses forcing both ways.
func TestRSSignalsChoice(t *testing.T) {
	for _, c := range []struct {
		m, n, k int
		signals bool // the faster measured
	}{
		{4096, 14336, 8192, true},  // 1265.4 vs 1439.1 us
		{4096, 4096, 4096, false},  // 272.8 vs 247.3
		{8192, 4096, 14336, false}, // 1254.8 vs 1234.8
		{8192, 8192, 7168, false},  // 1299.7 vs 1292.9
	} {
		s := MatmulShape{M: c.m, N: c.n, K: c.k}
		if got := rsSignalsWin(4, 132, dsl.BF16, dsl.BF16, s); got != c.signals {
			t.Errorf("%dx%dx%d on 4 GPUs: signals %v, measured faster: %v", c.m, c.n, c.k, got, c.signals)
		}
	}
	for _, s := range []MatmulShape{{M: 4096, N: 14336, K: 8192}, {M: 4098, N: 8, K: 8}, {M: 0, N: 8, K: 8}} {
		if rsSignalsWin(1, 132, dsl.BF16, dsl.BF16, s) || rsSignalsWin(4, 1, dsl.BF16, dsl.BF16, s) {
			t.Errorf("%v: signals chosen with one GPU or one SM", s)
		}
	}
}
