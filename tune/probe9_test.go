package tune

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestProbe9ScheduleBounded: counts past MaxCount are refused before any call, naming the
// bound (Reps 2^40 ran for ever, keeping a sample a round).
func TestProbe9ScheduleBounded(t *testing.T) {
	calls := 0
	timer := func(context.Context, Candidate[int]) (time.Duration, error) { calls++; return time.Microsecond, nil }
	cands := []Candidate[int]{{Name: "a"}}
	for _, s := range []Schedule{{Reps: 1 << 40}, {Warmup: 1 << 40}, {Reps: MaxCount + 1}} {
		if _, err := Measure(context.Background(), s, cands, timer); err == nil || !strings.Contains(err.Error(), "0 to 1048576") {
			t.Errorf("Measure with %+v: %v; want the bound named", s, err)
		}
		if _, err := New(t.TempDir(), s); err == nil {
			t.Errorf("New with %+v: no error", s)
		}
	}
	if calls != 0 {
		t.Errorf("%d timer calls for refused schedules", calls)
	}
	if _, err := Measure(context.Background(), Schedule{Warmup: 1, Reps: 3}, cands, timer); err != nil || calls != 4 {
		t.Errorf("Measure 1+3: %v, %d calls", err, calls)
	}
}
