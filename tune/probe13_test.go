package tune

import (
	"context"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/kernels"
)

// TestProbe13NilGemmTimer: Time and Close of a nil *GemmTimer return an error naming it
// (both panicked: nil pointer; probe 13).
func TestProbe13NilGemmTimer(t *testing.T) {
	var g *GemmTimer
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	if _, err := g.Time(context.Background(), Candidate[kernels.GemmSM90Config]{Name: "x"}); err == nil || !strings.Contains(err.Error(), "nil *GemmTimer") {
		t.Errorf("Time of a nil *GemmTimer: %v", err)
	}
	if err := g.Close(); err == nil || !strings.Contains(err.Error(), "nil *GemmTimer") {
		t.Errorf("Close of a nil *GemmTimer: %v", err)
	}
}
