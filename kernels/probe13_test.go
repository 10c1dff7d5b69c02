package kernels

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/ptx"
)

// TestProbe13ModelKeyTiles: AttentionSM90Config.ModelKeyTiles answers nil for a
// configuration Check refuses and for a shape CheckShape refuses, at once. Before: BN -16
// modelled -1088 key tiles on one SM, Schedule 7 and 3 consumers a balanced cost, as if
// they ran; an unchecked 2^20 x 2^20 heads of 2^20 queries walked 2^53 work tiles (it never
// returned); and a huge SM count with 2^34 tiles allocated a slice per SM until the process
// died of it (probe 13).
func TestProbe13ModelKeyTiles(t *testing.T) {
	as := DefaultAttentionSM90Config(dsl.BF16, 128, true)
	within := func(name string, f func() []int) {
		t.Helper()
		got := make(chan []int, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: panic %v", name, r)
					got <- []int{-1}
				}
			}()
			got <- f()
		}()
		select {
		case sum := <-got:
			if sum != nil {
				t.Errorf("%s: ModelKeyTiles = %v; want nil", name, sum)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: ModelKeyTiles did not return in 5 s", name)
		}
	}
	bad := func(f func(*AttentionSM90Config)) AttentionSM90Config {
		c := as
		f(&c)
		return c
	}
	for name, c := range map[string]AttentionSM90Config{
		"BN 0":           bad(func(c *AttentionSM90Config) { c.BN = 0 }),
		"BN -16":         bad(func(c *AttentionSM90Config) { c.BN = -16 }),
		"schedule 7":     bad(func(c *AttentionSM90Config) { c.Schedule, c.Persistent = 7, true }),
		"consumers 3":    bad(func(c *AttentionSM90Config) { c.Consumers = 3 }),
		"only Consumers": {Consumers: 1},
	} {
		within(name, func() []int { return c.ModelKeyTiles(2, 2, 1024, 1024, 4) })
	}
	within("2^20 batches of 2^20 heads", func() []int { return as.ModelKeyTiles(1<<20, 1<<20, 1<<20, 64, 132) })
	within("seqQ 2^40", func() []int { return as.ModelKeyTiles(1, 1, 1<<40, 64, 132) })
	within("sms 0", func() []int { return as.ModelKeyTiles(2, 2, 1024, 1024, 0) })
	// A shape the kernel runs is modelled: every SM's key tiles, summing to the problem's.
	sum := as.ModelKeyTiles(2, 4, 1024, 1024, 8)
	if len(sum) != 8 {
		t.Fatalf("ModelKeyTiles(2, 4, 1024, 1024, 8) = %v; want 8 SMs' sums", sum)
	}
	total := 0
	for _, s := range sum {
		total += s
	}
	// causal 1024 x 1024, BM 128, BN 128: query tile i walks i+1 key tiles; 8 pairs.
	if want := 8 * (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8); as.BM() == 128 && as.BN == 128 && total != want {
		t.Errorf("modelled %d key tiles in all, want %d", total, want)
	}
	if total <= 0 {
		t.Errorf("modelled %d key tiles in all", total)
	}
}

// TestProbe13SizeHelpers: the exported size and cost helpers of the decode split choice,
// the hierarchical collectives and the MoE pieces answer in range for zero, negative and
// huge inputs. Before: MoEPieceBytes(0, 16) and HierShard(dt, n, 0) divided by zero (a
// panic), as did HierShard of the zero Type; HierShard(f32, MaxInt, 1) wrapped to 4
// elements; HierScratchWords, MoESendShared and MoECombineShared wrapped negative;
// SplitCost's blocks*splits and sms*perSM wrapped to 0 waves (SplitCost(MaxInt, 8, 1, 1, 2)
// = -12) and Splits chose 1 split for 2^62 SMs of 2 blocks where 132 SMs get 33 (probe 13).
func TestProbe13SizeHelpers(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	for _, c := range []struct {
		rowBytes, maxPiece, want int
	}{{0, 16, 16}, {-1, 16, 16}, {math.MinInt, 0, 16}, {math.MaxInt &^ 15, 0, 16}, {math.MaxInt &^ 15, math.MaxInt, math.MaxInt &^ 15}, {4096, 1024, 1024}, {4112, 1024, 832}} {
		if got := MoEPieceBytes(c.rowBytes, c.maxPiece); got != c.want {
			t.Errorf("MoEPieceBytes(%d, %d) = %d, want %d", c.rowBytes, c.maxPiece, got, c.want)
		}
	}
	for _, p := range []int{-5, 0, 16, 1 << 40, math.MaxInt} {
		if s, c := MoESendShared(p), MoECombineShared(p); s < 0 || c < 0 || p > 0 && (s < p || c < p) {
			t.Errorf("MoESendShared(%d) = %d, MoECombineShared = %d: want 0 <= piece <= shared", p, s, c)
		}
	}
	for _, c := range []struct {
		dt      dsl.Type
		n, gpus int
		want    int
	}{{dsl.F32, 8, 0, 0}, {dsl.F32, 8, -3, 0}, {dsl.Type(0), 8, 2, 0}, {dsl.F32, math.MaxInt, 1, math.MaxInt &^ 3}, {dsl.F32, 1000, 8, 128}, {dsl.BF16, 1, 8, 8}} {
		if got := HierShard(c.dt, c.n, c.gpus); got != c.want {
			t.Errorf("HierShard(%s, %d, %d) = %d, want %d", c.dt, c.n, c.gpus, got, c.want)
		}
	}
	if got := HierScratchWords(1<<40, 1<<40); got != math.MaxInt {
		t.Errorf("HierScratchWords(2^40, 2^40) = %d, want it saturated at MaxInt", got)
	}
	if got := HierScratchWords(2, 8); got != 48 {
		t.Errorf("HierScratchWords(2, 8) = %d, want 48", got)
	}
	base := SplitCost(1, 100, 132, 2, 4)
	for _, c := range [][5]int{{1, 100, 1 << 32, 1 << 32, 4}, {1, 100, math.MaxInt, 1, 4}} {
		if got := SplitCost(c[0], c[1], c[2], c[3], c[4]); got != base {
			t.Errorf("SplitCost%v = %v; one wave of 25+ tiles as on 132 SMs (%v)", c, got, base)
		}
	}
	for _, c := range [][5]int{{math.MaxInt, 8, 1, 1, 2}, {1 << 40, 1 << 40, 1, 1, 1 << 40}} {
		if got := SplitCost(c[0], c[1], c[2], c[3], c[4]); got < 1e18 {
			t.Errorf("SplitCost%v = %v; want a huge cost (saturated), not a wrapped one", c, got)
		}
	}
	dc := DefaultAttentionDecodeConfig(dsl.BF16, 128, 16, 1)
	few := dc.Splits(1, 1, 8, 8, 1<<20, 132, 2)
	for _, sp := range [][2]int{{1 << 62, 2}, {1 << 32, 1 << 32}, {math.MaxInt, math.MaxInt}} {
		if got := dc.Splits(1, 1, 8, 8, 1<<20, sp[0], sp[1]); got < few {
			t.Errorf("Splits on %d SMs of %d blocks = %d; fewer than on 132 SMs of 2 (%d)", sp[0], sp[1], got, few)
		}
	}
}

// TestProbe13FusedCounts: the fused kernels' grid, tile, gathered-row and signal-word counts
// saturate at math.MaxInt and are 0 for a negative extent, and the stream and copy shapes
// take the zero Type. Before: FusedGrid and the signal-word counts wrapped negative for
// huge extents (FusedSM90Tiles(1, MinInt, 1) = -36028797018963967,
// AGGemmSM90GatheredRows(MaxInt, 1) negative) and StreamShape and TiledCopyElems of the
// zero Type divided by zero (probe 13).
func TestProbe13FusedCounts(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	gc, sc := DefaultFusedConfig(dsl.BF16), DefaultGemmSM90Config(dsl.BF16)
	vals := []int{math.MinInt, -(1 << 40), -1, 0, 1, 64, 1 << 31, 1 << 40, 1 << 62, math.MaxInt}
	for _, m := range vals {
		for _, n := range vals {
			for _, g := range []int{-1, 0, 1, 8, 1 << 40, math.MaxInt} {
				for name, v := range map[string]int{
					"FusedGrid":              FusedGrid(gc, m, n, g),
					"AGGemmSignalWords":      AGGemmSignalWords(gc, m, g),
					"GemmRSSignalWords":      GemmRSSignalWords(gc, m, n, g),
					"GemmARSignalWords":      GemmARSignalWords(gc, m, n, g),
					"FusedSM90Tiles":         FusedSM90Tiles(sc, m, n, g),
					"AGGemmSM90GatheredRows": AGGemmSM90GatheredRows(sc, m, g),
					"AGGemmSM90SignalWords":  AGGemmSM90SignalWords(sc, m, g),
					"GemmRSSM90SignalWords":  GemmRSSM90SignalWords(sc, m, n, g),
					"GemmARSM90SignalWords":  GemmARSM90SignalWords(sc, m, n, g),
				} {
					if v < 0 {
						t.Errorf("%s(m %d, n %d, GPUs %d) = %d: a negative count", name, m, n, g, v)
					}
				}
			}
		}
	}
	// Exact where nothing overflows; saturated where it would.
	if got, want := FusedSM90Tiles(sc, 1024, 512, 4), 4*ceilDiv(256, sc.BM())*ceilDiv(512, sc.BN); got != want {
		t.Errorf("FusedSM90Tiles(1024, 512, 4) = %d, want %d", got, want)
	}
	if got, want := GemmARSignalWords(gc, 1024, 512, 2), 3*CollMaxGPUs*ceilDiv(512, gc.BM)*ceilDiv(512, gc.BN)+CollMaxGPUs; got != want {
		t.Errorf("GemmARSignalWords(1024, 512, 2) = %d, want %d", got, want)
	}
	if got := AGGemmSM90GatheredRows(sc, math.MaxInt, 1); got != math.MaxInt {
		t.Errorf("AGGemmSM90GatheredRows(MaxInt, 1) = %d, want it saturated", got)
	}
	if got := GemmARSM90SignalWords(sc, 1<<62, 1<<62, 1); got != math.MaxInt {
		t.Errorf("GemmARSM90SignalWords(2^62, 2^62, 1) = %d, want it saturated", got)
	}
	if s := StreamShape(1000, dsl.Type(0)); s.Grid < 1 || s.Block < 1 {
		t.Errorf("StreamShape of the zero Type = %+v", s)
	}
	if n := TiledCopyElems(dsl.Type(0)); n < 1 {
		t.Errorf("TiledCopyElems of the zero Type = %d", n)
	}
	if got, want := TiledCopyElems(dsl.F32), TiledCopyElems(dsl.BF16)/2; got != want {
		t.Errorf("TiledCopyElems(f32) = %d, want half bf16's (%d)", got, want)
	}
}

// TestProbe13LongNamesQuoted: the parsers and look-ups of names (ParseActivation,
// ParseEpilogue, ParseAttentionSchedule, Lookup, ChooseGemm's target, ChooseRowKernel's
// family) quote an excerpt of a long input. Before: a 100 KB name came back whole in the
// error (ParseEpilogue quoted it twice: 200 KB; probe 13).
func TestProbe13LongNamesQuoted(t *testing.T) {
	long := strings.Repeat("q", 100000)
	errs := map[string]error{}
	_, errs["ParseActivation"] = ParseActivation(long)
	_, errs["ParseEpilogue"] = ParseEpilogue(long)
	_, errs["ParseEpilogue twice"] = ParseEpilogue(long + "," + long)
	_, errs["ParseAttentionSchedule"] = ParseAttentionSchedule(long)
	_, errs["Lookup"] = Lookup(long)
	_, errs["ChooseGemm"] = ChooseGemm(ptx.Target(long), dsl.BF16, 128, 128, 128, 132)
	_, errs["ChooseRowKernel"] = ChooseRowKernel(Family(long), dsl.BF16, 8, 8, 132)
	for name, err := range errs {
		if err == nil || len(err.Error()) > 5000 || !strings.Contains(err.Error(), "bytes)") {
			n := 0
			if err != nil {
				n = len(err.Error())
			}
			t.Errorf("%s of a 100 KB name: %d bytes: %.200v", name, n, err)
		}
	}
}

// TestProbe13ZeroTypeNamed: configuration checks name the zero Type (they read "input type
// (want f16 or bf16)", the type printing as nothing; probe 13).
func TestProbe13ZeroTypeNamed(t *testing.T) {
	_, cerr := ChooseGemm(ptx.SM90a, 0, 128, 128, 128, 132)
	for name, err := range map[string]error{
		"AttentionConfig":       AttentionConfig{}.Check(),
		"AttentionDecodeConfig": AttentionDecodeConfig{}.Check(),
		"AttentionSM90Config":   AttentionSM90Config{}.Check(),
		"GemmConfig":            GemmConfig{}.Check(),
		"GemmSM90Config":        GemmSM90Config{}.Check(),
		"GemmConfig output":     GemmConfig{In: dsl.BF16}.Check(),
		"GemmSM90Config output": GemmSM90Config{In: dsl.BF16}.Check(),
		"ChooseGemm":            cerr,
	} {
		if err == nil || !strings.Contains(err.Error(), "type (the zero Type)") {
			t.Errorf("%s of the zero Type: %v; want it named", name, err)
		}
	}
}
