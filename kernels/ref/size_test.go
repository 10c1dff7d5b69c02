package ref

import (
	"strings"
	"testing"
)

// TestRunRefusesHugeProblem: Size and Cols past MaxEmuSize are refused naming the field
// before anything is allocated (before: Cols 2^62 panicked in makeslice, Size 2^40 tried to
// allocate 8 TiB of float64).
func TestRunRefusesHugeProblem(t *testing.T) {
	for _, p := range []Problem{
		{Kernel: "softmax", Cols: 1 << 62},
		{Kernel: "row_sum", Size: -1 << 63, Cols: 1 << 62},
		{Kernel: "vector_add", Size: 1 << 40},
		{Kernel: "softmax", Size: MaxEmuSize + 1, Cols: 8},
	} {
		_, err := Run(p)
		if err == nil || !strings.Contains(err.Error(), "MaxEmuSize") || !strings.Contains(err.Error(), "Problem.") {
			t.Errorf("Run(%+v) = %v; want a refusal naming the field and MaxEmuSize", p, err)
		}
	}
}
