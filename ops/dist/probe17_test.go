package dist_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/collectives"
	"github.com/kgen-dev/kgen/ops/dist"
)

// TestProbe17AllocBound: a shape of exactly 2^31 elements is refused by Alloc's own check,
// which says "below 2^31" (it passed that check and was refused later in other words);
// noted by probe 17.
func TestProbe17AllocBound(t *testing.T) {
	for _, shape := range [][]int{{1 << 31}, {1 << 16, 1 << 15}, {2, 1 << 30}} {
		_, _, err := dist.Alloc[float32](context.Background(), &collectives.Comm{}, shape...)
		if err == nil || !strings.Contains(err.Error(), "below 2^31 elements") {
			t.Errorf("Alloc%v: %v, want Alloc's bound", shape, err)
		}
	}
}
