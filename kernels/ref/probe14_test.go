package ref

import (
	"strings"
	"testing"
)

// TestProbe14EmuBoundsSaturate: the emulator harnesses' size bounds saturate instead of
// wrapping: a 2^32 x 2^32 x 2^32 gemm (RunMLP's check takes no extent bound first) held
// "0 elements" by the wrapped sum and passed, and RunMLP then allocated terabytes for the
// bias (2^40 extents: a fatal out-of-memory); probe 14.
func TestProbe14EmuBoundsSaturate(t *testing.T) {
	for _, d := range [][3]int{{1 << 32, 1 << 32, 1 << 32}, {1 << 40, 8, 1 << 40}, {1 << 62, 1 << 62, 1 << 62}} {
		err := checkEmuGemm("mlp", d[0], d[1], d[2], 2)
		if err == nil || !strings.Contains(err.Error(), "MaxEmuElements") {
			t.Fatalf("checkEmuGemm(%v) = %v; want it refused (MaxEmuElements)", d, err) // RunMLP would allocate terabytes
		}
	}
	if err := checkEmuGemm("gemm", 64, 64, 64, 1); err != nil {
		t.Errorf("a 64^3 gemm: %v", err)
	}
	_, err := RunMLP(MLPProblem{Tokens: 1 << 40, Hidden: 1 << 40, FF: 1 << 40})
	if err == nil || !strings.Contains(err.Error(), "over 2^63") {
		t.Errorf("RunMLP of 2^40 extents: %v; want the size refused", err)
	}
}
