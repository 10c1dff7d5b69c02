package collectives

import "testing"

// TestThresholds checks the measured table's lookup by GPU count and that Options override it.
func TestThresholds(t *testing.T) {
	for _, c := range []struct {
		o         Options
		gpus      int
		mc        bool
		want      thresholds
		situation string
	}{
		{Options{}, 1, false, thresholds{256 << 10, 0, 0, 512 << 10}, "1 GPU: the smallest measured count"},
		{Options{}, 2, false, thresholds{256 << 10, 0, 0, 512 << 10}, "2 GPUs, measured"},
		{Options{}, 3, false, thresholds{256 << 10, 0, 0, 512 << 10}, "3 GPUs: 2's row"},
		{Options{}, 8, false, thresholds{256 << 10, 0, 0, 8 << 20}, "8 GPUs: the largest measured row"},
		{Options{}, 4, true, thresholds{mcLamportMaxBytes, DefaultOneShotMaxBytes, 0, 0}, "multicast"},
		{Options{LamportMaxBytes: 100, OneShotMaxBytes: 7, ReduceScatterPullMinBytes: -1, PushMinBytes: -1}, 4, false, thresholds{100, 7, -1, -1}, "options win"},
		{Options{CaptureSafe: true}, 4, false, thresholds{256 << 10, 0, 0, 8 << 20}, "the push all-reduce in graphs too"},
		{Options{LamportMaxBytes: 100, OneShotMaxBytes: 7, ReduceScatterPullMinBytes: 99, PushMinBytes: 5}, 4, true, thresholds{100, 7, 99, 5}, "options win with multicast"},
	} {
		if got := chooseThresholds(c.o, c.gpus, c.mc); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.situation, got, c.want)
		}
	}
}
