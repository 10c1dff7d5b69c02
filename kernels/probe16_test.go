package kernels_test

import (
	"math"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/dsl"
	"github.com/kgen-dev/kgen/kernels"
)

// TestProbe16WrappedCounts: AttentionConfig.Grid and GemmSM90Config.PieceSignals saturate at
// math.MaxInt where the count overflows int. Before, Grid(2^63-1, 128, 128) was -128 and
// Grid(2^31-1, 2^31-1, 2^31-1) -72057594021150720, PieceSignals(2^63-1, 2^63-1)
// -36028797018963968 (wrapped products); probe 16.
func TestProbe16WrappedCounts(t *testing.T) {
	fa2 := kernels.DefaultAttentionConfig(dsl.BF16, 128, true)
	sm90 := kernels.DefaultGemmSM90Config(dsl.BF16)
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"AttentionConfig.Grid(MaxInt, 128, 128)", fa2.Grid(math.MaxInt, 128, 128), math.MaxInt},
		{"AttentionConfig.Grid(2^31-1 x3)", fa2.Grid(1<<31-1, 1<<31-1, 1<<31-1), math.MaxInt},
		{"AttentionConfig.Grid(2, 3, 1000)", fa2.Grid(2, 3, 1000), 2 * 3 * 8},
		{"PieceSignals(MaxInt, MaxInt)", sm90.PieceSignals(math.MaxInt, math.MaxInt), math.MaxInt},
		{"PieceSignals(256, 1000)", sm90.PieceSignals(256, 1000), 4 * 4},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d; want %d", c.name, c.got, c.want)
		}
	}
}

// TestProbe16NilSpec: a nil *Spec (from an ignored Lookup error) answers every method with an
// error or a zero value; Build, BuildVariant and ParseDType panicked with a nil dereference.
func TestProbe16NilSpec(t *testing.T) {
	var s *kernels.Spec
	if _, err := s.Build(kernels.Config{}); err == nil || !strings.Contains(err.Error(), "nil *Spec") {
		t.Errorf("Build: %v", err)
	}
	if _, err := s.BuildVariant(kernels.Config{}); err == nil || !strings.Contains(err.Error(), "nil *Spec") {
		t.Errorf("BuildVariant: %v", err)
	}
	if _, err := s.ParseDType("f32"); err == nil || !strings.Contains(err.Error(), "nil *Spec") {
		t.Errorf("ParseDType: %v", err)
	}
	if got := s.VariantName(dsl.F32); got != "" {
		t.Errorf("VariantName = %q", got)
	}
	if got := s.ID(dsl.F32); got != (kernels.ID{DType: dsl.F32}) {
		t.Errorf("ID = %+v", got)
	}
}
