package jit

import (
	"context"
	"strings"
	"testing"
)

// TestLaunchRanksMasterAddr: a MasterAddr with spaces or control characters is refused with
// the value quoted on one line (it was printed raw inside "finding a free port on ...",
// split over lines; probe 12).
func TestLaunchRanksMasterAddr(t *testing.T) {
	for _, addr := range []string{"x\ny", "a b", "\x1b[31mred", "\t"} {
		code, err := LaunchRanks(context.Background(), LaunchOptions{N: 1, Prog: "true", MasterAddr: addr})
		if code != 2 || err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "MasterAddr") {
			t.Errorf("MasterAddr %q: exit %d, %v; want a usage error quoting it", addr, code, err)
		}
	}
}
