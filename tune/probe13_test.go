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

// TestProbe13FastestUnmeasured: a Timing without an error whose median is not a positive
// duration (built by hand: Measure never makes one) is not picked; with none measured,
// Fastest is an error naming it (before: a zero or negative median won).
func TestProbe13FastestUnmeasured(t *testing.T) {
	ts := []Timing{{Name: "measured", Median: 5}, {Name: "zero"}, {Name: "negative", Median: -3}}
	if best, err := Fastest(ts); err != nil || best != 0 {
		t.Errorf("Fastest = %d, %v; want 0 (the measured one)", best, err)
	}
	if _, err := Fastest(ts[1:]); err == nil || !strings.Contains(err.Error(), "zero: median 0s: not a measured time") || !strings.Contains(err.Error(), "negative: median -3ns") {
		t.Errorf("Fastest of unmeasured timings: %v; want an error naming each", err)
	}
}
