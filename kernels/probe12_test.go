package kernels

import (
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
)

// TestProbe12HostileExtents calls the exported configuration and launch-shape helpers with
// zero configurations and hostile extents (0, negative, 2^31, 2^40, 2^62, MaxInt, MinInt):
// errors or clamped answers, never a panic (before: AttentionDecodeConfig.Splits divided by
// a batch*qLen*heads*headDim that wrapped to 0, and SplitRowShape by parts that a huge SM
// count wrapped to 0).
func TestProbe12HostileExtents(t *testing.T) {
	vals := []int{0, -1, 1, 7, 64, 1 << 20, 1 << 31, math.MaxInt32, math.MaxInt, math.MinInt, 1 << 40, 1 << 62, -(1 << 40)}
	use := func(...any) {}
	try := func(name string, f func()) {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s: panic %v", name, r)
			}
		}()
		f()
	}
	as := DefaultAttentionSM90Config(dsl.BF16, 128, true)
	dc := DefaultAttentionDecodeConfig(dsl.BF16, 128, 16, 1)
	gc := DefaultGemmSM90GroupedConfig(dsl.BF16)
	sc := DefaultGemmSM90Config(dsl.BF16)
	zero := []any{AttentionSM90Config{}, AttentionDecodeConfig{}, GemmSM90GroupedConfig{}, GemmSM90Config{}, AttentionConfig{}}
	for _, z := range zero {
		try(fmt.Sprintf("%T zero", z), func() {
			switch c := z.(type) {
			case AttentionSM90Config:
				use(c.Check())
				use(c.Name())
				use(c.SharedBytes())
				use(c.Threads())
				use(c.TMABox())
				use(c.Grid(1, 1, 1))
				use(c.PersistentGrid(1, 1, 1, 1))
				use(c.ModelKeyTiles(1, 1, 1, 1, 1))
				use(c.Launch(1, 1, 1, 1, 1))
				use(c.LaunchPersistent(1, 1, 1, 1, 1, 1))
				use(c.LaunchVarLen(1, 1, 1, 1, 1, 1))
			case AttentionDecodeConfig:
				use(c.Check())
				use(c.Name())
				use(c.SharedBytes())
				use(c.Threads())
				use(c.Registers())
				use(c.RowTiles(1, 1))
				use(c.Grid(1, 1, 1, 1, 1))
				use(c.Splits(1, 1, 1, 1, 1, 1, 1))
				use(c.BlocksPerSM(SMLimitsOf(90)))
			case GemmSM90GroupedConfig:
				use(c.Check())
				use(c.Name())
				use(c.Grid(1, 1, 1, 1))
				use(c.Launch(8, 8, 8, 1, 1))
				use(c.CheckMasked(8, 8, 8, 1, 8))
			case GemmSM90Config:
				use(c.Check())
				use(c.Name())
				use(c.Grid(1, 1, 1))
				use(c.Launch(8, 8, 8, 1))
				use(c.Tiles(1, 1))
				use(c.Cycles(8, 8, 8, 1))
				use(c.TMADimsB(8, 8))
				use(c.PieceSignals(64, 8))
				use(c.NumPieces(64, 64))
			case AttentionConfig:
				use(c.Check())
				use(c.Name())
				use(c.Grid(1, 1, 1))
				use(c.SharedBytes())
				use(c.Threads())
			}
		})
	}
	for _, a := range vals {
		for _, b := range vals {
			try(fmt.Sprint("vals ", a, b), func() {
				defer func() {
					if r := recover(); r != nil {
						panic(fmt.Sprint(r, "\n", string(debug.Stack())))
					}
				}()
				use(as.Grid(a, b, a))
				use(as.PersistentGrid(a, b, a, b))
				use(as.CheckShape(a, b, 1, a, b))
				use(as.CheckVarLenShape(a, b, 1, a, b, a))
				if as.CheckShape(a, b, 1, a, b) == nil {
					use(as.ModelKeyTiles(a, b, a, b, 132))
				}
				use(as.Launch(a, b, 1, a, b))
				use(as.LaunchPersistent(a, b, 1, a, b, a))
				use(as.LaunchVarLen(a, b, 1, a, b, a))
				use(as.LaunchVarLenPersistent(a, b, 1, a, b, a, b))
				use(dc.Grid(a, b, a, 1, b))
				use(dc.Splits(a, b, a, 1, b, a, b))
				use(dc.RowTiles(a, b))
				use(dc.CheckShape(a, b, a, 1, b, a, b))
				use(gc.Grid(a, b, a, b))
				use(gc.Launch(a, b, 8, a, b))
				use(gc.CheckMasked(a, b, 8, a, b))
				use(GemmSM90GroupedFor(dsl.BF16, dsl.BF16, a, b, 8, a, b))
				use(sc.Grid(a, b, a))
				use(sc.Launch(a, b, 8, a))
				use(sc.Tiles(a, b))
				use(sc.Cycles(a, b, 8, a))
				use(GemmSM90For(dsl.BF16, dsl.BF16, a, b, 8, a))
				use(sc.PieceSignals(a, b))
				use(sc.NumPieces(a, b))
				use(sc.TMADimsB(a, b))
				use(FusedGrid(DefaultFusedConfig(dsl.BF16), a, b, a))
				use(FusedSM90Grid(sc, a, b, a, b))
				use(AGGemmSM90GatheredRows(sc, a, b))
				use(StreamShape(a, dsl.F16))
				SoftmaxShape(a, b)
				RowSumShape(a, b)
				SwiGLUShape(a, b, a)
				SplitRowShape(a, b, a)
				use(SwiGLUCheckShape(a, b))
				SwiGLUMaskedCheckShape(a, b, a, b)
				TransposeCheckShape(a, b)
				CheckRowShape(a, b)
				FusedCheckShape(a, b, a, b)
				use(ChooseRowKernel(FamilySoftmax, dsl.F32, a, b, a))
			})
		}
	}
}

// TestProbe12CheckShapeBoundsGrid: every shape a configuration's CheckShape accepts has a
// grid of 1 to 2^31-1 blocks and a Launch (before: the decode kernel's CheckShape took
// batch 2^31-1 x heads 2^40, whose int64 products wrapped below its 2^31 bounds, and its
// Grid came out negative).
func TestProbe12CheckShapeBoundsGrid(t *testing.T) {
	vals := []int{1, 2, 7, 8, 64, 1000, 1 << 16, 1 << 20, 1<<31 - 1, 1 << 31, 1 << 40}
	as := DefaultAttentionSM90Config(dsl.BF16, 128, true)
	ac := DefaultAttentionConfig(dsl.BF16, 128, true)
	dc := DefaultAttentionDecodeConfig(dsl.BF16, 128, 16, 1)
	gc := DefaultGemmSM90GroupedConfig(dsl.BF16)
	sc := DefaultGemmSM90Config(dsl.BF16)
	bad := 0
	report := func(f string, a ...any) {
		if bad < 20 {
			t.Errorf(f, a...)
		}
		bad++
	}
	for _, a := range vals {
		for _, b := range vals {
			for _, c := range vals {
				if as.CheckShape(a, b, 1, c, c) == nil {
					if g := as.Grid(a, b, c); g < 1 || g > math.MaxInt32 {
						report("as grid %d %d %d = %d", a, b, c, g)
					}
					if _, err := as.Launch(a, b, 1, c, c); err != nil {
						report("as launch %d %d %d: %v", a, b, c, err)
					}
				}
				if ac.CheckShape(a, b, 1, c, c) == nil {
					if g := ac.Grid(a, b, c); g < 1 || g > math.MaxInt32 {
						report("ac grid %d %d %d = %d", a, b, c, g)
					}
				}
				if dc.CheckShape(a, 1, b, 1, c, c, 1) == nil {
					if g := dc.Grid(a, 1, b, 1, 1); g < 1 || g > math.MaxInt32 {
						report("dc grid %d %d %d = %d", a, b, c, g)
					}
				}
				m, n, k := a, b*8%(1<<31), c*8%(1<<31)
				if n == 0 || k == 0 {
					continue
				}
				if sc.CheckShape(m, n, k) == nil {
					if g := sc.Grid(m, n, 132); g < 1 || g > math.MaxInt32 {
						report("sc grid %d %d %d = %d", m, n, k, g)
					}
					if _, err := sc.Launch(m, n, k, 132); err != nil {
						report("sc launch %d %d %d: %v", m, n, k, err)
					}
				}
				if gc.CheckShape(m, n, k, 4) == nil {
					if g := gc.Grid(m, n, 4, 132); g < 1 || g > math.MaxInt32 {
						report("gc grid %d %d %d = %d", m, n, k, g)
					}
					if _, err := gc.Launch(m, n, k, 4, 132); err != nil {
						report("gc launch %d %d %d: %v", m, n, k, err)
					}
				}
			}
		}
	}
}

// TestProbe12FusedShapeWrap: FusedCheckShape refuses a GPU count whose product with M and
// max(N, K) wraps 64 bits (2^24 x 2^24 over 2^16 GPUs is 2^64: it wrapped to 0 and passed).
func TestProbe12FusedShapeWrap(t *testing.T) {
	for _, s := range [][4]int{{1 << 24, 1 << 24, 1, 1 << 16}, {1 << 30, 1, 1 << 30, 1 << 4}, {1, 1, 1, math.MaxInt}} {
		if err := FusedCheckShape(s[0], s[1], s[2], s[3]); err == nil || !strings.Contains(err.Error(), "below 2^31") {
			t.Errorf("FusedCheckShape%v = %v; want the 2^31 bound", s, err)
		}
	}
	if err := FusedCheckShape(1024, 1024, 1024, 8); err != nil {
		t.Error(err)
	}
}

// TestProbe12StrideWrap: a masked stride (or an F) whose product wraps 64 bits is refused
// (stride 2^62 x 4 groups is 2^64: it wrapped to 0, fit any rows, and reached the kernels
// cut to 32 bits: stride 0, every group at row 0; F 2^62 doubled to -2^63).
func TestProbe12StrideWrap(t *testing.T) {
	masked := DefaultGemmSM90GroupedConfig(dsl.BF16)
	masked.Masked = true
	for name, err := range map[string]error{
		"SwiGLUCheckShape F 2^62":            SwiGLUCheckShape(1, 1<<62),
		"SwiGLUMaskedCheckShape stride 2^62": SwiGLUMaskedCheckShape(64, 8, 4, 1<<62),
		"CheckMasked stride 2^62":            masked.CheckMasked(64, 8, 8, 4, 1<<62),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
