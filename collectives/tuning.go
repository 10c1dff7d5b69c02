package collectives

import (
	"fmt"
	"math"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// The all-reduce thresholds on one node: which algorithm runs at which size, per GPU count,
// from measurements (docs/bench.md, "Collectives on 2 and 4 GPUs"). Options that set a
// threshold override the table.

// p2pTuning is the measured choice of the peer-to-peer all-reduce (no multicast) on gpus
// GPUs: Lamport for floats up to lamportMax bytes, one-shot up to oneShotMax (0: never),
// two-shot above.
type p2pTuning struct {
	gpus       int
	lamportMax int
	oneShotMax int
	rsPullMin  int // p2p_reducescatter_pull from this input size on (0: always)
	pushMin    int // the push all-reduce from this size on (0: never)
}

// p2pTunings holds the measured GPU counts, ascending. 4 x H100 (NV18, 2026-11-27, loop
// timing, slowest rank, 1000 back-to-back calls): Lamport 6.6-7.0 us up to 64 KiB against
// two-shot 9.8-10.5, one-shot (in place, staged) 14.6-18.6; at 256 KiB Lamport 10.4 against
// two-shot 11.0; at 1 MiB Lamport 34.7 against two-shot 14.6. 2 x H100: Lamport 4.7-6.2 us
// up to 256 KiB, where one-shot and two-shot took 8-15 us.
//
// Reduce-scatter (4 x H100, 64 MiB input): p2p_reducescatter_pull 176.0-176.6 us, the push
// kernel 196.8-211.6, NCCL 192.3-222.1; at 1-16 MiB within noise of each other: pull at
// every size. Push all-reduce (p2p_allreduce_push, 2026-11-28, loop / graph, f32 and bf16):
// on 4 GPUs 8 MiB 47.1-48.1 us against two-shot 48.9-49.6, 16 MiB 82.2-84.6 against
// 87.6-88.2, 4 MiB 30.6-31.4 against 29.2-29.5: from 8 MiB; on 2 GPUs 512 KiB 9.6-10.3
// against 10.8-20.0, 1 MiB 11.4-11.5 against 12.9-13.5: from 512 KiB (Lamport below).
var p2pTunings = []p2pTuning{
	{gpus: 2, lamportMax: 256 << 10, pushMin: 512 << 10},
	{gpus: 4, lamportMax: 256 << 10, pushMin: 8 << 20},
}

// p2pTuningFor returns the tuning of the largest measured GPU count not above gpus (the
// smallest measured count for fewer GPUs). Counts past the table (5 to 8 GPUs: not lent
// here) take the largest measured count's thresholds.
func p2pTuningFor(gpus int) p2pTuning {
	t := p2pTunings[0]
	for _, x := range p2pTunings {
		if x.gpus <= gpus {
			t = x
		}
	}
	return t
}

// thresholds are a Comm's all-reduce size limits in bytes (see allReducePlan).
type thresholds struct {
	lamport int // Lamport for floats up to this size (peer-to-peer only)
	oneShot int // one-shot up to this size (0: never)
	rsPull  int // the peer-to-peer reduce-scatter pulls from inputs of this size on (negative: never)
	push    int // the push all-reduce from this size on (<= 0: never)
}

// mcLamportMaxBytes is Lamport's limit on a Comm with multicast, where it only serves the
// float reductions with no multimem form (min, max) past the multimem one-shot's sizes.
const mcLamportMaxBytes = 8 << 10

// chooseThresholds fills the limits Options leave zero: with multicast
// DefaultOneShotMaxBytes and mcLamportMaxBytes (never measured: the lent machines keep
// multicast off), else the measured p2p table for the GPU count.
func chooseThresholds(o Options, gpus int, multicast bool) thresholds {
	p := p2pTuningFor(gpus)
	t := thresholds{lamport: p.lamportMax, oneShot: p.oneShotMax}
	if multicast {
		t = thresholds{lamport: mcLamportMaxBytes, oneShot: DefaultOneShotMaxBytes}
	}
	if o.LamportMaxBytes > 0 {
		t.lamport = o.LamportMaxBytes
	}
	if o.OneShotMaxBytes > 0 {
		t.oneShot = o.OneShotMaxBytes
	}
	t.rsPull = p.rsPullMin
	if o.ReduceScatterPullMinBytes != 0 {
		t.rsPull = o.ReduceScatterPullMinBytes
	}
	t.push = p.pushMin
	if multicast {
		t.push = 0 // multimem runs the large sums
	}
	if o.PushMinBytes != 0 {
		t.push = o.PushMinBytes
	}
	return t
}

// MatmulMode says how the matmuls with communication run on one node (Options.Matmuls).
type MatmulMode int

// The matmul modes.
const (
	// MatmulAuto runs the measured choice (fuseMatmul).
	MatmulAuto MatmulMode = iota
	// MatmulFused runs the fused kernels (ag_gemm, gemm_rs, gemm_ar and their sm_90a forms).
	MatmulFused
	// MatmulSplit runs the collective and the GEMM one after the other (splitMatmul).
	MatmulSplit
	// MatmulOverlap runs the communication of all three on the copy engines, chunk by chunk
	// beside the GEMMs (overlap.go; sm_90a shapes on one node with Options.Stream); other
	// shapes run split.
	MatmulOverlap
)

// String names the mode.
func (m MatmulMode) String() string {
	switch m {
	case MatmulAuto:
		return "auto"
	case MatmulFused:
		return "fused"
	case MatmulSplit:
		return "split"
	case MatmulOverlap:
		return "overlap"
	}
	return fmt.Sprintf("MatmulMode(%d)", int(m))
}

// fuseMatmul reports whether a matmul with communication runs fused on one node. Auto:
// only on one GPU, where the fused kernels cost what the GEMM alone costs (1.00-1.04x
// gemm_sm90 on an H100). On 2 and 4 x H100 (NV18, bf16, 4096^3, 8192^3, 8192x4096x14336;
// docs/bench.md) every fused kernel was slower than kgen's own collective followed by its
// GEMM: ag_gemm 1.09-4.2x, gemm_rs 1.07-1.33x, gemm_ar 1.19-1.46x; their communication
// does not overlap the tensor cores (FUSED ON GPUS).
func (c *Comm) fuseMatmul() bool {
	switch c.o.Matmuls {
	case MatmulFused:
		return true
	case MatmulSplit, MatmulOverlap:
		return false
	}
	return c.g == 1
}

// The estimate behind MatmulAuto's choice of the copy-engine all-gather (agOverlapWins):
// gemm_sm90's cycle model (kernels.GemmSM90Config.Cycles) at an H100's 1.98 GHz, the
// all-gather at the 350 GB/s per GPU that kgen's p2p_allgather reached inside the split
// path on 4 x H100 (split minus GEMM alone), and 20 us for the overlap's two barriers.
const (
	smClockHz         = 1.98e9
	allGatherBytesPS  = 350e9
	overlapOverheadUS = 20
)

// gemmUS is gemm_sm90's estimated time in us for an M x N x K problem on sms
// multiprocessors (GemmSM90For's pick, its cycle model at smClockHz); +Inf when no
// configuration takes the shape.
func gemmUS(dt, out dsl.Type, m, n, k, sms int) float64 {
	sms = max(sms, 1)
	cfg, err := kernels.GemmSM90For(dt, out, m, n, k, sms)
	if err != nil {
		return math.Inf(1)
	}
	return cfg.Cycles(m, n, k, sms) / smClockHz * 1e6
}

// agOverlapWins reports whether AllGatherMatmul of shape s on g GPUs of sms
// multiprocessors runs faster with the copy engines (g chunked GEMMs beside the transfer)
// than split (the all-gather, then one GEMM), by the estimate above: the chunks lose only
// where cutting M by g costs the GEMM more waves than the all-gather takes. On 4 and 2 x
// H100 (docs/bench.md) it picks the faster of the two, or one within 1%, at every measured
// shape.
func agOverlapWins(g, sms int, dt, out dsl.Type, s MatmulShape) bool {
	if !chunkFillsGPU(g, sms, dt, out, s) {
		return false
	}
	us := func(m int) float64 { return gemmUS(dt, out, m, s.N, s.K, sms) }
	ag := float64(g-1) / float64(g) * float64(s.M) * float64(s.K) * float64(dt.Bytes()) / allGatherBytesPS * 1e6
	overlap := max(float64(g)*us(s.M/g), ag) + overlapOverheadUS
	return overlap < us(s.M)+ag
}

// chunkFillsGPU reports whether there is an overlap (g >= 2 GPUs, a shape to run) and one
// of its g chunks (M/g rows) has at least a
// wave of output tiles for the sms multiprocessors in GemmSM90For's pick. Smaller chunks
// lose what the cycle model does not see: each chunk's launch, fill and drain behind its
// event. On 4 x H100 the copy-engine all-gather took 433-442 us at 1024 x 14336 x 8192
// (chunks of 256 rows: 112 tiles for 132 SMs) against 407.7 split, which the cycle model
// alone scored the other way (docs/bench.md).
func chunkFillsGPU(g, sms int, dt, out dsl.Type, s MatmulShape) bool {
	if g < 2 || sms < 1 || s.M < g || s.N < 1 || s.K < 1 {
		return false // nothing to overlap, or nothing to run
	}
	rows := s.M / g
	cfg, err := kernels.GemmSM90For(dt, out, rows, s.N, s.K, max(sms, 1))
	return err == nil && cfg.Tiles(rows, s.N) >= sms
}

// The reduce-scatter's estimate (rsOverlapWins): kgen's p2p_reducescatter_pull moved 300 GB/s
// per GPU of NVLink reads at 64 MiB on 4 x H100; sum_slots reads the g slots and writes one
// at about 2.5 TB/s.
const (
	reduceScatterBytesPS = 300e9
	localBytesPS         = 2.5e12
)

// rsOverlapWins reports whether MatmulReduceScatter of shape s on g GPUs of sms
// multiprocessors runs faster with the copy engines (g chunked GEMMs, each chunk's push
// beside the next GEMM, then sum_slots) than split (one GEMM, then the reduce-scatter).
// On 4 x H100 it picked the faster at M 1024 and 16384 (8192 x 7168; docs/bench.md).
func rsOverlapWins(g, sms int, dt, out dsl.Type, s MatmulShape) bool {
	if !chunkFillsGPU(g, sms, dt, out, s) {
		return false
	}
	us := func(m int) float64 { return gemmUS(dt, out, m, s.N, s.K, sms) }
	chunk := float64(s.M/g) * float64(s.N) * float64(out.Bytes())
	rs := float64(g-1) * chunk / reduceScatterBytesPS * 1e6
	sum := float64(g+1) * chunk / localBytesPS * 1e6
	overlap := max(float64(g)*us(s.M/g), rs) + sum + overlapOverheadUS
	return overlap < us(s.M)+rs
}

// rsSignalsWin reports whether MatmulReduceScatter's copy-engine overlap of shape s on g GPUs
// of sms multiprocessors should run as one piece-signalling GEMM (Options.OverlapSignals)
// rather than one GEMM launch per GPU's rows: where a piece's last wave (GemmSM90For's tiles
// for M/g rows on sms) leaves more than 5% more of the GPU idle than the whole GEMM's does
// on the sms-1 multiprocessors the signalling GEMM takes. 4 x H200, same call (docs/bench.md):
// 4096 x 14336 x 8192, pieces of 448 tiles at 85% of their 4 waves against 98% for the
// whole: 1265 us with signals against 1439; at 4096^3, 8192 x 4096 x 14336 and 8192 x 8192
// x 7168 (pieces at 97%, the whole at 98%) the piece launches were as fast or faster (247
// against 273, 1235 against 1255, 1293 against 1300).
func rsSignalsWin(g, sms int, dt, out dsl.Type, s MatmulShape) bool {
	if g < 2 || sms < 2 || s.M%g != 0 || s.N < 1 || s.K < 1 {
		return false
	}
	eff := func(m, sms int) float64 {
		cfg, err := kernels.GemmSM90For(dt, out, m, s.N, s.K, sms)
		if err != nil {
			return 0
		}
		tiles := cfg.Tiles(m, s.N)
		waves := (tiles + sms - 1) / sms
		return float64(tiles) / float64(waves*sms)
	}
	piece, whole := eff(s.M/g, sms), eff(s.M, sms-1)
	return piece > 0 && whole > piece+0.05
}

// arOverlapRounds returns the rounds of MatmulAllReduce's copy-engine overlap
// (gemmAROverlap) for shape s on g GPUs of sms multiprocessors, or 0 for split: the most of
// 4, 2 and 1 rounds that divide M into whole parts whose GEMM pieces (M/(rounds*g) rows)
// still have a wave of output tiles (pieceFillsGPU); force (MatmulOverlap) takes 1 round
// where none does. Measured on 4 and 2 x H100 (bf16, docs/bench.md): the overlap beat split
// at every shape whose pieces fill the GPU (8192 x 8192 x 7168 on 4 GPUs: 1543-1671 us
// against 1864-1909), and pieces of half a wave lost (4096 x 8192 x 7168 in 4 rounds: 1084-1199
// against 879-945 in 2).
func arOverlapRounds(g, sms int, dt dsl.Type, s MatmulShape, force bool) int {
	if g < 2 || s.M%g != 0 {
		return 0
	}
	for _, r := range []int{4, 2, 1} {
		if s.M%(r*g) == 0 && pieceFillsGPU(sms, dt, MatmulShape{M: s.M / (r * g), N: s.N, K: s.K}) {
			return r
		}
	}
	if force {
		return 1
	}
	return 0
}

// pieceFillsGPU reports whether the piece s has at least 15/16 of a wave of gemm_sm90's
// largest tiles (DefaultGemmSM90Config's, 128 x 256) on sms multiprocessors: 128 tiles on an
// H100's 132. GemmSM90For picks smaller tiles for smaller pieces, which fill the GPU but
// run slower (the measurements above).
func pieceFillsGPU(sms int, dt dsl.Type, s MatmulShape) bool {
	if sms < 1 || s.M < 1 || s.N < 1 || s.K < 1 {
		return false
	}
	cfg := kernels.DefaultGemmSM90Config(dt)
	tiles := (s.M + cfg.BM() - 1) / cfg.BM() * ((s.N + cfg.BN - 1) / cfg.BN)
	return tiles*16 >= sms*15
}
