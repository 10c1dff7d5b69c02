package layout

import (
	"strings"
	"testing"
)

// TestLocalPartitionThreadRange: a thread index outside the thread layout is refused (before:
// thread -1 got offset -1 and thread 2^62 the part of thread 0, silently).
func TestLocalPartitionThreadRange(t *testing.T) {
	l, thr := MustParse("(8,8):(8,1)"), MustParse("(2,2):(2,1)")
	for _, idx := range []int{-1, 4, 1 << 62} {
		if r, off, err := LocalPartition(l, thr, idx); err == nil || !strings.Contains(err.Error(), "want 0 <= idx < 4") {
			t.Errorf("LocalPartition(thread %d) = %v, %d, %v; want a refusal naming the range", idx, r, off, err)
		}
	}
	for idx := 0; idx < 4; idx++ {
		if _, _, err := LocalPartition(l, thr, idx); err != nil {
			t.Errorf("LocalPartition(thread %d): %v", idx, err)
		}
	}
}
