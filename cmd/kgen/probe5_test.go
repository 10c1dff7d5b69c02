package main

import (
	"strings"
	"testing"

	"github.com/kgen-dev/kgen/tune"
)

// TestProbeTuneHugeShapeEmu: a shape whose A, B and D element counts overflow int64 when
// summed is refused on the emulator as too large (before: the sum wrapped negative and the
// bound passed).
func TestProbeTuneHugeShapeEmu(t *testing.T) {
	t.Setenv(tune.DirEnv, t.TempDir())
	for _, args := range [][]string{
		{"tune", "gemm", "-m", "2147483640", "-n", "2147483640", "-k", "2147483640", "--backend", "emu"},
		{"tune", "gemm", "-shapes", "2147483640x2147483640x2147483640", "--backend", "emu"},
	} {
		code, out, errs := kgen(args...)
		if code != 2 || out != "" || !strings.Contains(errs, "on the emulator") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and the emulator's bound", args, code, out, cut(errs))
		}
	}
}

func cut(s string) string {
	if len(s) > 400 {
		return s[:400] + "..."
	}
	return s
}
